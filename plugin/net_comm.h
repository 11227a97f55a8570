// SPDX-License-Identifier: Apache-2.0
// The point-to-point objects behind NCCL's net table: plain C++ over transport/. The entry points
// (net_api.cc) hand NCCL released owners of these and take them back in close*.
//
// Threads: every method may be called from any NCCL proxy thread; the transport Connection
// serializes itself and the request pool has its own lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/status.h"
#include "plugin/abi/nccl_types.h"
#include "plugin/requests.h"
#include "plugin/state.h"
#include "transport/transport.h"

namespace tally::plugin {

class NetComm;

// Layout of NCCL's 128-byte net handle.
//   address:  the transport ConnectHandle the listener published (listen writes it, zeroing the
//             rest of the buffer).
//   progress: connect's resumable state. NCCL calls connect again and again with the same handle
//             buffer until it returns a comm; the first call starts a transport PendingConnection
//             and parks it in the state's PendingConnects under a fresh id, written here with a
//             magic. Later calls
//             take it back by id. The id (not a pointer) is stored, so garbage in the buffer can
//             never be dereferenced; completion or failure clears the magic.
struct NetHandle {
  transport::ConnectHandle address;
  uint64_t progress_magic;
  uint64_t progress_id;
};
static_assert(sizeof(NetHandle) <= NCCL_NET_HANDLE_MAXSIZE, "net handle fits NCCL's buffer");
inline constexpr uint64_t kConnectProgressMagic = 0x7461'6c6c'7963'6f6eull;  // "tallycon"

inline constexpr uint32_t kNetListenMagic = 0x544c4e4c;   // 'TLNL'
inline constexpr uint32_t kNetCommMagic = 0x544c4e43;     // 'TLNC'
inline constexpr uint32_t kNetMrMagic = 0x544c4e4d;       // 'TLNM'
inline constexpr uint32_t kNetRequestMagic = 0x544c4e52;  // 'TLNR'

// The NCCL_PTR_* bits a device's point-to-point connections take: host memory always; CUDA
// memory and dma-buf where the transport carries them (transport::DeviceProperties).
int netPtrSupport(const transport::DeviceProperties& props);

class NetListenComm {
 public:
  NetListenComm(int dev, int ptr_support, std::unique_ptr<transport::Listener> listener)
      : dev_(dev), ptr_support_(ptr_support), listener_(std::move(listener)) {}
  ~NetListenComm() { magic_ = 0; }
  bool valid() const { return magic_ == kNetListenMagic; }
  int dev() const { return dev_; }
  const transport::ConnectHandle& handle() const { return listener_->handle(); }
  // Non-blocking. Success with *out null: nobody finished connecting yet.
  Status accept(std::unique_ptr<NetComm>* out);

 private:
  uint32_t magic_ = kNetListenMagic;
  int dev_;
  int ptr_support_;
  std::unique_ptr<transport::Listener> listener_;
};

// A registration (mhandle): the transport's region (empty for TCP; a pinned registration for
// verbs) and the registered range.
struct NetMr {
  uint32_t magic = kNetMrMagic;
  std::unique_ptr<transport::MemoryRegion> region;
  MemRange range;  // what was registered, for deregMr's abort check
};

// One in-flight isend or irecv (the `request` NCCL polls).
struct NetRequest {
  uint32_t magic = 0;  // kNetRequestMagic while in use
  NetComm* owner = nullptr;
  int n = 0;  // buffers: 1 for a send
  std::unique_ptr<transport::Request> request;
  MemRange span;  // covers every buffer the transport may read or write for it
};

class NetComm {
 public:
  enum class Kind { kSend, kRecv };

  // ptr_support: the NCCL_PTR_* bits advertised for this comm's device (netPtrSupport).
  NetComm(Kind kind, int dev, int ptr_support, std::unique_ptr<transport::Connection> conn);
  // Closes the connection first (failing pending requests), then frees the request slots.
  ~NetComm();
  NetComm(const NetComm&) = delete;
  NetComm& operator=(const NetComm&) = delete;

  bool valid() const { return magic_ == kNetCommMagic; }
  Kind kind() const { return kind_; }
  int dev() const { return dev_; }

  // NCCL_PTR_HOST, or NCCL_PTR_CUDA where advertised; any other type is kInternal.
  Status registerMemory(void* data, size_t size, int type, NetMr** out);
  // CUDA memory exported as a dma-buf (regMrDmaBuf), where NCCL_PTR_DMABUF was advertised.
  Status registerDmaBuf(void* data, size_t size, int type, uint64_t offset, int fd, NetMr** out);
  // Deletes an mhandle from registerMemory (any comm's; they are not tied to one).
  static Status deregister(void* mhandle);
  // NCCL frees memory right after deregMr, and before closeSend/closeRecv on an abort: when an
  // unfinished request of this comm uses [data, data + size), the connection is closed first
  // (its requests fail; transport.h: no I/O touches their buffers once close returns). Returns
  // how many requests that was. Called from deregMr with the comm NCCL passes.
  int releaseMemory(const MemRange& range);

  // Success with *out null: no free request slot or no room in the transport; retry later.
  Status isend(const void* data, size_t size, int tag, void* mhandle, NetRequest** out);
  Status irecv(int n, void* const* data, const size_t* sizes, const int* tags,
               void* const* mhandles, NetRequest** out);
  // Makes received bytes in CUDA memory visible to the GPU (see transport::Connection::iflush).
  // Success with *out null: nothing to flush, done already.
  Status iflush(int n, void* const* data, const int* sizes, void* const* mhandles,
                NetRequest** out);
  // Polls `req`. When done, writes req->n sizes (when sizes is non-null) and frees the slot:
  // NCCL never tests a finished request again.
  Status test(NetRequest* req, bool* done, size_t* sizes);
  // True when `req` is an in-use request of this comm.
  bool ownsRequest(const NetRequest* req) const;

 private:
  // How long iflush waits in place when every request slot is taken.
  static constexpr int64_t kFlushWaitMs = 10000;

  uint32_t magic_ = kNetCommMagic;
  Kind kind_;
  int dev_;
  int ptr_support_;
  std::unique_ptr<transport::Connection> conn_;
  RequestPool<NetRequest> requests_;
};

// The connect state machine (see NetHandle). One non-blocking step per call; success with
// *out null means "call again with the same handle". A connection still in progress waits in
// `pending` between calls.
Status connectStep(transport::Device* device, const transport::ConnectionOptions& options,
                   PendingConnects* pending, int dev, void* handle, std::unique_ptr<NetComm>* out);

}  // namespace tally::plugin
