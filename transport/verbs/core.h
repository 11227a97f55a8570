// SPDX-License-Identifier: Apache-2.0
// The state behind one verbs Connection, shared by connection.cc (the calls users make) and
// datapath.cc (the helper thread: completions, matching, posting). Not part of the interface.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/small_pool.h"
#include "transport/core_adapters.h"
#include "transport/side_channel.h"
#include "transport/verbs/connection.h"
#include "transport/verbs/endpoint.h"
#include "transport/verbs/flush.h"
#include "transport/verbs/reg_cache.h"
#include "transport/verbs/wire.h"

namespace tally::transport::verbs {

using Clock = std::chrono::steady_clock;

// Past this a message chunk is cut again (the device's largest message is 1 or 2 GiB).
inline constexpr uint64_t kMaxChunkBytes = uint64_t{1} << 30;

// One posted isend or irecv. Every field after construction is guarded by Core::mu_.
struct Op {
  bool is_send = false;
  bool done = false;
  int n = 1;
  RegistrationCache::Pin pins[kMaxRecvs];
  // A send.
  const uint8_t* send_data = nullptr;
  uint64_t send_size = 0;
  int send_tag = 0;
  uint32_t lkey = 0;
  int chunks = 0;       // its writes
  int chunks_left = 0;  // writes not yet completed
  Clock::time_point posted_at{};
  // A receive.
  uint32_t seq = 0;
  uint8_t* data[kMaxRecvs] = {};
  uint64_t capacity[kMaxRecvs] = {};
  int tags[kMaxRecvs] = {};
  uint32_t rkeys[kMaxRecvs] = {};
  uint64_t received[kMaxRecvs] = {};
  int chunks_seen[kMaxRecvs] = {};
  int chunks_total[kMaxRecvs] = {};  // 0 until the buffer's first chunk came
  int slots_done = 0;
  Clock::time_point progress_at{};  // last chunk; unset before the first
};

template <typename T>
using PooledDeque = std::deque<T, PoolAllocator<T>>;

// A peer's clear to send, as far as our sends have used it.
struct PeerCts {
  ClearToSend cts;
  bool taken[kMaxRecvs] = {};
  int matched = 0;
};

// One RDMA write waiting for room on its queue pair.
struct PendingWrite {
  Op* op = nullptr;
  uint64_t local_addr = 0;
  uint32_t length = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t imm = 0;
};

struct ControlMessage {
  uint8_t bytes[kControlBytes];
  size_t size = 0;
  bool notice = false;  // a mismatch notice: the side channel stays open until it went out
};

class Core : public CoreBase<Op, &Op::send_size>, public std::enable_shared_from_this<Core> {
 public:
  Core(std::unique_ptr<Endpoint> endpoint, std::unique_ptr<side::SideChannel> side,
       std::string peer, const VerbsOptions& options);
  ~Core();

  // Starts the helper thread; kSystem when it cannot (the caller then closes).
  Status start();
  Status isend(const void* data, size_t size, int tag, MemoryRegion* mr,
               std::unique_ptr<Request>* req);
  Status irecv(int n, void* const* data, const size_t* sizes, const int* tags,
               MemoryRegion* const* mrs, std::unique_ptr<Request>* req);
  Status registerMemory(void* data, size_t size, MemoryType type,
                        std::unique_ptr<MemoryRegion>* mr);
  // ibv_reg_dmabuf_mr, outside the registration cache; the region owns the registration.
  Status registerDmaBuf(void* data, size_t size, int fd, uint64_t offset,
                        std::unique_ptr<MemoryRegion>* mr);
  // Reads back from each kCuda buffer through flush_ (flush.h).
  Status iflush(int n, void* const* data, const size_t* sizes, MemoryRegion* const* mrs,
                std::unique_ptr<Request>* req);
  void close();

 private:
  // connection.cc
  Status pin(const void* data, size_t size, MemoryRegion* mr, RegistrationCache::Pin* pin,
             uint32_t* lkey, uint32_t* rkey);

  // datapath.cc
  void pollLoop();
  // Handles what the completion queue has; returns how many completions it took.
  int drainLocked();
  void completionLocked(const ibv_wc& wc);
  void dataReceivedLocked(const ibv_wc& wc);
  void controlReceivedLocked(int slot, uint32_t length);
  void writeCompletedLocked(Op* op, int qp);
  void matchLocked();
  void postWritesLocked(Op& op, const PeerCts& cts, int slot);
  void flushWritesLocked(int qp);
  void sendControlLocked(const uint8_t* bytes, size_t size, bool notice = false);
  void flushControlLocked();
  void controlSentLocked(int slot);
  // Makes `status` the sticky error (first one wins), wakes every waiter, and asks the helper
  // thread to close the side channel (after any mismatch notice went out).
  // `quiet`: log at INFO (a peer that ended the connection while nothing was being sent).
  void failLocked(Status status, bool quiet = false);
  void completeLocked(Op& op);
  // The peer side: farewell, loss, and the I/O timeout. Called by the helper thread unlocked.
  void watchPeer();
  void checkTimeoutsLocked();
  int qpIndex(uint32_t qp_num) const;

  const VerbsOptions options_;
  const std::shared_ptr<DeviceContext> device_;  // registrations, outside the lock
  const int max_requests_;

  std::mutex close_mu_;  // serializes close(); taken before mu_
  bool closed_ = false;  // guarded by close_mu_

  // The flush queue pair, made by the first iflush; closed by close(). flush_mu_ is taken before
  // mu_ (iflush), never while holding it.
  std::mutex flush_mu_;
  std::shared_ptr<FlushQp> flush_;  // guarded by flush_mu_

  std::unique_ptr<Endpoint> endpoint_;  // reset by close() after the helper thread stopped
  std::unique_ptr<side::SideChannel> side_;
  std::thread thread_;
  int wake_fd_ = -1;  // eventfd: close() wakes the helper thread
  std::atomic<bool> stop_{false};
  int recv_limit_ = 0;
  int sends_in_flight_ = 0;  // posted isends not done (unmatched, writing)
  int recvs_in_flight_ = 0;
  PooledDeque<std::shared_ptr<Op>> unmatched_;  // sends waiting for a CTS entry
  PooledDeque<std::shared_ptr<Op>> writing_;    // sends whose writes are posted
  std::deque<PeerCts> peer_cts_;
  uint32_t next_peer_cts_seq_ = 0;
  PooledDeque<std::shared_ptr<Op>> window_;  // receives by sequence, from window_base_
  uint32_t window_base_ = 0;
  uint32_t next_seq_ = 0;
  std::vector<std::deque<PendingWrite>> backlog_;  // per data queue pair
  std::vector<int> outstanding_;                   // posted, uncompleted sends per queue pair
  std::vector<int> free_control_;                  // free control send slots
  std::vector<bool> notice_slots_;                 // control send slots carrying a notice
  std::deque<ControlMessage> control_backlog_;
  int next_qp_ = 0;
  int notices_in_flight_ = 0;      // mismatch notices not yet completed
  uint64_t chunks_delivered_ = 0;  // our writes that completed (for the farewell)
  uint64_t chunks_arrived_ = 0;    // the peer's writes that completed here
  Clock::time_point farewell_at_{};
  uint64_t farewell_chunks_ = 0;
  bool closing_ = false;  // close() owns the side channel now (it says farewell)
  bool side_closed_ = false;
};

}  // namespace tally::transport::verbs
