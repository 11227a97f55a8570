// SPDX-License-Identifier: Apache-2.0
// The transport interface: what Tally's point-to-point net and its reducer protocol need from a
// network. One folder per backend (tcp/ now; verbs/ and ofi/ later), each made by a factory
// function such as tcp::createDevice(). Nothing here knows about NCCL.
//
// Model
//   A Device is one network interface. A Listener, made by Device::listen, publishes a
//   ConnectHandle (opaque bytes, at most kMaxHandleBytes) that a peer passes to Device::connect.
//   Connection establishment is non-blocking on both sides: PendingConnection::step and
//   Listener::accept are called again until they produce a Connection.
//
//   A Connection is bidirectional and ordered: messages sent with isend on one side match
//   receives posted with irecv on the other side in posting order. A grouped receive (n > 1)
//   takes the next n messages; each lands in the buffer of that receive whose tag equals the
//   message's tag and that is still free. A message longer than its buffer is an error; a shorter
//   one is fine and its size is reported.
//
// Threads
//   Every method may be called from any thread; a Connection serializes its own state. Requests
//   are completed by the backend's helper threads; test() and wait() only observe.
//
// Errors
//   A failure on a helper thread (peer reset, garbage, timeout) sticks to the Connection: every
//   later test(), wait(), isend() and irecv() on it returns that Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tally::transport {

inline constexpr size_t kMaxHandleBytes = 64;

// Opaque connection address written by a Listener. Trivially copyable.
struct ConnectHandle {
  uint8_t bytes[kMaxHandleBytes];
};

enum class MemoryType { kHost = 1, kCuda = 2 };

// A registration of memory with a device. TCP needs none and returns an empty object; the RDMA
// backends keep their keys here. Valid until destroyed; must outlive requests that use it.
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  // What was registered; a backend's regions set it.
  MemoryType type = MemoryType::kHost;
};

// What a request reports once its connection has failed: that failure, and never kTimeout. From
// test() and wait(), kTimeout only ever means "not done yet, the wait ran out", which callers
// answer by waiting again; a connection that died of an I/O timeout must not read as that (it
// would be polled for ever), so it reports kRemote with the same message.
// Its message starts with kTimedOutPrefix, so that a server can still count it as a timeout.
inline constexpr std::string_view kTimedOutPrefix = "timed out: ";
inline Status connectionFailure(const Status& failure) {
  if (failure.code() != StatusCode::kTimeout) return failure;
  return Status::remote(std::string(kTimedOutPrefix) + failure.message());
}

// A failure because the peer broke the framing (a bad message header, a message that does not
// fit the receive posted for it) rather than went away: its message starts with
// kProtocolPrefix, so a server counts it as a protocol error and says so.
inline constexpr std::string_view kProtocolPrefix = "protocol violation: ";
inline Status protocolViolation(StatusCode code, const std::string& what) {
  return Status(code, std::string(kProtocolPrefix) + what);
}

// Why a connection failed, for a server's counts: from connectionFailure, protocolViolation, or
// anything else (the peer went away: EOF, reset, a failed system call).
enum class FailureKind { kLost, kTimedOut, kProtocol };
inline FailureKind failureKind(const Status& st) {
  const std::string& m = st.message();
  if (st.code() == StatusCode::kTimeout || m.rfind(kTimedOutPrefix, 0) == 0) {
    return FailureKind::kTimedOut;
  }
  if (m.rfind(kProtocolPrefix, 0) == 0) return FailureKind::kProtocol;
  return FailureKind::kLost;
}

// A posted send or receive. Owned by the caller. Destroying a request that is not done is
// allowed only after its Connection has been closed or destroyed. The same holds for its
// buffers: after a request fails, a helper thread may still be finishing I/O on them until
// Connection::close() returns.
class Request {
 public:
  virtual ~Request() = default;
  // Non-blocking. On success sets *done; once done, sizes[i] (when sizes is non-null) holds the
  // bytes received into buffer i (one entry for a send: the bytes sent).
  virtual Status test(bool* done, size_t* sizes) = 0;
  // Blocks until done, an error, or timeout_ms elapses (then Status kTimeout, request still
  // pending; an error is never kTimeout, see connectionFailure). timeout_ms < 0 waits without
  // limit; used only where the caller bounds it itself.
  virtual Status wait(int64_t timeout_ms, size_t* sizes) = 0;
};

struct DeviceProperties {
  std::string name;       // interface name, e.g. "eth0"
  std::string address;    // numeric address the device listens on
  std::string pci_path;   // sysfs path of the NIC, empty when none
  int speed_mbps = 0;     // link speed
  bool loopback = false;  // the loopback interface (no link: the CPU is the limit)
  float latency_us = 0;
  uint64_t guid = 0;
  // registerMemory(kCuda) works, so connections carry CUDA device memory: verbs with a
  // peer-memory client, libfabric with FI_HMEM and RMA reads. TCP never can.
  bool cuda_memory = false;
  // Connection::registerDmaBuf works (verbs with ibv_reg_dmabuf_mr on a kernel that has it).
  bool dmabuf = false;
};

class Connection {
 public:
  virtual ~Connection() = default;

  // Posts a send of `size` bytes from `data`, which must stay valid until the request is done.
  // Success with *req == nullptr means no room: too many requests in flight; call again later.
  virtual Status isend(const void* data, size_t size, int tag, MemoryRegion* mr,
                       std::unique_ptr<Request>* req) = 0;
  // Posts a grouped receive of n buffers (1 <= n <= kMaxRecvs). Same no-room contract.
  virtual Status irecv(int n, void* const* data, const size_t* sizes, const int* tags,
                       MemoryRegion* const* mrs, std::unique_ptr<Request>* req) = 0;
  // Registers [data, data+size). Repeated and overlapping registrations are allowed.
  virtual Status registerMemory(void* data, size_t size, MemoryType type,
                                std::unique_ptr<MemoryRegion>* mr) = 0;
  // Registers [data, data+size) of CUDA memory exported as the dma-buf `fd`, `offset` bytes into
  // it. Only where DeviceProperties::dmabuf; elsewhere kInvalidUsage. The region is kCuda.
  virtual Status registerDmaBuf(void* data, size_t size, int fd, uint64_t offset,
                                std::unique_ptr<MemoryRegion>* mr);
  // After receives into device memory completed: makes their bytes visible to the device by
  // reading back through the NIC (PCIe orders the read behind the NIC's writes), which GPUs
  // older than Hopper need before a kernel reads the buffer. n buffers as in irecv with their
  // received sizes and the regions they were received with (null: skip the buffer). Every kCuda
  // buffer is read back; verbs skips host ones, ofi reads back whatever it is given (which lets
  // its tests run without a GPU). Success with *req == nullptr: nothing to read back (no such
  // buffer, nothing received, or a backend without CUDA memory); otherwise a request to test.
  virtual Status iflush(int n, void* const* data, const size_t* sizes, MemoryRegion* const* mrs,
                        std::unique_ptr<Request>* req);
  // Stops the helper threads and closes the sockets; pending requests fail with kRemote.
  // Idempotent; the destructor calls it.
  virtual void close() = 0;
  // "10.0.0.2:40112", for log lines.
  virtual std::string peerName() const = 0;
  // Hands the connection's socket to the caller, who then owns it and runs its own non-blocking
  // I/O in the backend's framing (transport/raw_stream.h), and closes the connection. Only a TCP
  // connection of one socket on which nothing was posted yet can; -1 otherwise (and the
  // connection is unchanged).
  virtual int takeSocket() { return -1; }
  // Bytes taken off the wire so far, counted as they come, partial messages included: how a
  // receiver tells a large message still arriving from a silent peer. 0 where the transport
  // cannot tell (its completions are whole messages).
  virtual uint64_t bytesReceived() const { return 0; }
};

inline constexpr int kMaxRecvs = 8;
// Bytes Connection::iflush reads back from each buffer.
inline constexpr uint32_t kFlushReadBytes = 4;

// Resumable connect: call step() until it sets *conn. Never blocks.
class PendingConnection {
 public:
  virtual ~PendingConnection() = default;
  // Advances one non-blocking step. Success with *conn == nullptr: not finished, call again.
  // An error is final.
  virtual Status step(std::unique_ptr<Connection>* conn) = 0;
};

class Listener {
 public:
  virtual ~Listener() = default;
  virtual const ConnectHandle& handle() const = 0;
  // Non-blocking. Success with *conn == nullptr: nobody finished connecting yet. May be called
  // repeatedly to accept many connections (the reducer does); each connect yields one accept.
  virtual Status accept(std::unique_ptr<Connection>* conn) = 0;
  // Blocks up to timeout_ms for the next connection. Success with *conn == nullptr: none came
  // (waiting allocates nothing, so an idle server polling this takes no memory).
  virtual Status acceptWait(int64_t timeout_ms, std::unique_ptr<Connection>* conn) = 0;
  // "0.0.0.0:5000"
  virtual std::string address() const = 0;
  // Sockets this listener closed before they became a connection, since it was made: a
  // transport hello that was malformed or did not fit (bad_hellos), or that did not come within
  // the connect timeout (hello_timeouts); queued connections closed unheard because the process
  // had no descriptor to accept them with (no_descriptors); the oldest waiting sockets closed
  // to make room at the limit of sockets waiting for a hello (pending_full). For a server's
  // metrics; a backend that does not count reports zeros.
  struct DroppedHellos {
    uint64_t bad_hellos = 0;
    uint64_t hello_timeouts = 0;
    uint64_t no_descriptors = 0;
    uint64_t pending_full = 0;
  };
  virtual DroppedHellos droppedHellos() const { return {}; }
};

struct ConnectionOptions {
  int max_requests = 0;  // in-flight requests per direction; 0 = the backend's default
  int sockets = 0;       // streams per connection (TCP); 0 = the backend's default
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceProperties& properties() const = 0;
  virtual Status listen(std::unique_ptr<Listener>* listener) = 0;
  virtual Status connect(const ConnectHandle& handle, const ConnectionOptions& options,
                         std::unique_ptr<PendingConnection>* pending) = 0;
};

}  // namespace tally::transport
