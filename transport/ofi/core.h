// SPDX-License-Identifier: Apache-2.0
// The ofi Connection's state and its helper thread; internal to the ofi backend.
//
// Data path (wire.h has the bytes):
//   isend and irecv build an Op on the caller's thread (registering its buffers on the fly when
//   the provider needs registered buffers and none was given) and queue it for the helper
//   thread. The helper thread alone calls into the endpoint: it posts the control receives, the
//   control send and payload chunks of each send, reads headers in sequence order, matches them
//   to the posted receives exactly as TCP does, posts the payload receives, and reads the
//   completion queue. A request is done when all its libfabric operations are.
//
// Threads and locks
//   One mutex (mu_) guards what callers and the helper share: the queue of new Ops, the
//   in-flight counts, every Op's `done`, and the sticky error. The helper never holds it while
//   inside libfabric. It sleeps in poll() on the queue's wait fd and an eventfd that callers
//   write when it sleeps, after fi_trywait says nothing is pending, and wakes at least every
//   kWatchMs (every millisecond while an operation of its own is under way) to look at the
//   side channel and the I/O timeout. close_mu_ serializes close() and
//   is taken before mu_.
//
// The peer
//   The side channel (side_channel.h) is the peer's liveness. kLost fails the connection at once
//   (kRemote). A farewell (the peer closed in order) carries how many messages it posted: the
//   connection fails (kRemote) once all of them have landed and no send of ours waits, or when
//   a request of ours has waited kFarewellGraceMs after the farewell with no message landing
//   (time with no request posted does not count: the caller may post its receives slowly).
#pragma once

#include <rdma/fabric.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "transport/core_adapters.h"
#include "transport/ofi/endpoint.h"
#include "transport/ofi/wire.h"
#include "transport/side_channel.h"
#include "transport/transport.h"

namespace tally::transport::ofi {

using Clock = std::chrono::steady_clock;

struct Op;

// One libfabric operation; libfabric hands &context back in the completion. Lives in its Op (or
// in the connection's control slots) until the operation completes or the endpoint is closed.
struct Piece {
  fi_context2 context;  // first member: the completion's op_context points here
  enum Kind : uint8_t { kControlRecv, kControlSend, kChunkSend, kChunkRecv, kFlushRead };
  Kind kind = kChunkSend;
  Op* op = nullptr;
  uint32_t slot = 0;  // control slot; for chunks, the receive buffer index
  void* buffer = nullptr;
  size_t length = 0;
  void* desc = nullptr;
  uint64_t tag = 0;
  uint64_t remote_addr = 0;  // kFlushRead: the address (or offset) and key read from
  uint64_t key = 0;
};

// One isend or irecv. Fields set before the Op is queued are read-only afterwards; the helper
// thread owns the rest, except `done` and the error, which mu_ guards.
struct Op {
  bool is_send = false;
  bool is_flush = false;  // iflush's read-backs: one kFlushRead piece per buffer, in chunks[0]
  int n = 1;
  // Send.
  uint64_t seq = 0;
  int tag = 0;
  uint64_t size = 0;
  const uint8_t* send_data = nullptr;
  // Receive buffers (the send's data is buffer 0 for registration).
  uint8_t* data[kMaxRecvs] = {};
  size_t capacity[kMaxRecvs] = {};
  int tags[kMaxRecvs] = {};
  void* desc[kMaxRecvs] = {};
  FidPtr<fid_mr> owned_mr[kMaxRecvs];  // registered on the fly (released when done)
  // Helper thread.
  bool taken[kMaxRecvs] = {};
  size_t received[kMaxRecvs] = {};  // read by callers once done
  uint64_t chunks_left[kMaxRecvs] = {};
  std::unique_ptr<Piece[]> chunks[kMaxRecvs];
  int matched = 0;
  uint64_t outstanding = 0;  // libfabric operations queued or posted and not complete
  int control_slot = -1;
  Clock::time_point last_progress{};
  size_t active_index = 0;
  // mu_.
  bool done = false;
};

// A registration on a connection's domain (Connection::registerMemory).
class OfiMemoryRegion final : public MemoryRegion {
 public:
  std::shared_ptr<Domain> domain;  // declared first: outlives the registration
  FidPtr<fid_mr> mr;
  void* desc = nullptr;
  const uint8_t* base = nullptr;
  size_t size = 0;
  const fid_ep* ep = nullptr;  // the endpoint it is bound to (FI_MR_ENDPOINT)

  // Whether [data, data+length) lies inside the registration.
  bool covers(const void* data, size_t length) const {
    const auto* bytes = static_cast<const uint8_t*>(data);
    return bytes >= base && length <= size && bytes - base <= static_cast<ptrdiff_t>(size - length);
  }
};

struct CoreParams {
  std::string peer;           // for log lines and errors
  int max_requests = 256;     // in flight per direction
  int64_t io_timeout_ms = 0;  // OfiOptions::timeouts.io_ms; 0: none
  uint64_t chunk_bytes = 0;   // agreed with the peer
  size_t inline_bytes = 0;    // largest payload carried in the control message
  size_t slot_bytes = 0;      // this side's control slot size
};

class Core : public CoreBase<Op, &Op::size>, public std::enable_shared_from_this<Core> {
 public:
  Core(std::unique_ptr<Endpoint> endpoint, std::unique_ptr<side::SideChannel> side,
       const CoreParams& params);
  ~Core();

  // Allocates and registers the control slots, posts the control receives and starts the
  // helper thread. On error the caller destroys the Core.
  Status start();

  Status isend(const void* data, size_t size, int tag, MemoryRegion* mr,
               std::unique_ptr<Request>* req);
  Status irecv(int n, void* const* data, const size_t* sizes, const int* tags,
               MemoryRegion* const* mrs, std::unique_ptr<Request>* req);
  Status registerMemory(void* data, size_t size, MemoryType type,
                        std::unique_ptr<MemoryRegion>* mr);
  Status registerDmaBuf(void* data, size_t size, int fd, uint64_t offset,
                        std::unique_ptr<MemoryRegion>* mr);
  // Reads a few bytes back from each buffer with a region, through this endpoint's own address
  // (Domain::rma_read); nullptr when the domain cannot read.
  Status iflush(int n, void* const* data, const size_t* sizes, MemoryRegion* const* mrs,
                std::unique_ptr<Request>* req);
  void close();

  // How long the helper thread sleeps at most, and so how soon it sees a dead peer or a timeout.
  static constexpr int64_t kWatchMs = 50;
  // After the peer's farewell, how long a waiting receive may go without a message landing.
  static constexpr int64_t kFarewellGraceMs = 1000;
  // Most control receives kept posted (the receive window of headers).
  static constexpr int kMaxControlSlots = 128;

 private:
  // Caller side (core.cc).
  Status describe(void* data, size_t size, MemoryRegion* mr, Op* op, int index);
  Status submit(std::shared_ptr<Op> op, std::unique_ptr<Request>* req);
  void wake();
  // Makes `status` the sticky error (first wins), wakes every waiter and drops the side
  // channel so the peer learns. `quiet`: INFO instead of WARN (an orderly end).
  void fail(Status status, bool quiet = false);

  // Helper thread (progress.cc).
  void run();
  bool progressOnce();
  void takeNewOps(std::deque<std::shared_ptr<Op>>* ops);
  void queueSend(const std::shared_ptr<Op>& op);
  void queueFlush(const std::shared_ptr<Op>& op);
  bool postQueued();
  bool drainCompletions();
  void handleCompletion(Piece* piece, size_t length);
  void handleError();
  bool processHeaders();
  bool matchHeader(uint64_t seq, uint32_t slot, size_t length);
  void postControlRecv(uint64_t seq);
  void finishPiece(Op* op, int buffer);
  void completeOp(Op* op);
  void watchPeer();
  void checkTimeouts();
  void sleep();
  void track(const std::shared_ptr<Op>& op);
  void untrack(Op* op);
  bool failed();
  // Whether an operation of ours is queued or under way (not just a receive waiting).
  bool inFlight() const;

  std::unique_ptr<Endpoint> endpoint_;
  std::unique_ptr<side::SideChannel> side_;
  const CoreParams params_;

  std::mutex close_mu_;
  bool closed_ = false;  // close_mu_

  std::deque<std::shared_ptr<Op>> new_ops_;
  uint64_t next_send_seq_ = 0;
  int sends_in_flight_ = 0;
  int recvs_in_flight_ = 0;
  bool stop_ = false;
  bool sleeping_ = false;
  int event_fd_ = -1;

  // Helper thread only (and close() once it has joined).
  std::thread thread_;
  size_t control_slots_ = 0;  // receive slots (W)
  std::unique_ptr<uint8_t[]> recv_arena_;
  std::unique_ptr<uint8_t[]> send_arena_;
  FidPtr<fid_mr> recv_arena_mr_;
  FidPtr<fid_mr> send_arena_mr_;
  void* recv_arena_desc_ = nullptr;
  void* send_arena_desc_ = nullptr;
  // Where iflush's reads land (their bytes are not used); registered where reads need it.
  uint8_t flush_scratch_[kMaxRecvs * kFlushReadBytes] = {};
  FidPtr<fid_mr> flush_scratch_mr_;
  void* flush_scratch_desc_ = nullptr;
  std::unique_ptr<Piece[]> recv_pieces_;  // one per receive slot
  std::vector<size_t> arrived_length_;    // per receive slot; SIZE_MAX: not arrived
  std::unique_ptr<Piece[]> send_pieces_;  // one per send slot
  std::vector<uint32_t> free_send_slots_;
  uint64_t next_header_seq_ = 0;                  // next header to read, in order
  std::deque<uint64_t> ready_headers_;            // read, waiting for a receive
  std::deque<std::shared_ptr<Op>> posted_recvs_;  // not yet matched to all their messages
  std::deque<Piece*> to_post_;
  std::vector<std::shared_ptr<Op>> active_;  // queued, posted or matched, not done
  uint64_t delivered_ = 0;                   // messages landed in receive buffers
  bool peer_closed_ = false;
  uint64_t peer_sent_ = 0;
  Clock::time_point farewell_at_{};     // the farewell, or the last progress after it
  uint64_t delivered_at_farewell_ = 0;  // delivered_ when farewell_at_ was last set
  Clock::time_point next_watch_{};
  Clock::time_point next_timeout_check_{};
};

}  // namespace tally::transport::ofi
