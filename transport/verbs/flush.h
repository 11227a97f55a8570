// SPDX-License-Identifier: Apache-2.0
// The read-back that makes received bytes in GPU memory visible to the GPU (Connection::iflush),
// for the verbs backend.
#pragma once

#include <infiniband/verbs.h>

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/transport.h"
#include "transport/verbs/context.h"
#include "transport/verbs/qp_state.h"

namespace tally::transport::verbs {

// One RDMA read of a flush: `length` bytes at `addr` (the device's addressing) under `rkey`.
struct FlushRead {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t length = 0;
};

// The flush of receives into GPU memory (Connection::iflush): a queue pair connected to itself
// reads a few bytes back from each buffer into a small host scratch. PCIe does not let the read
// pass the NIC's earlier writes to the same device, so once the read completed the received bytes
// are visible to the GPU. A connection makes one on its first flush.
//
// Completions go to a completion queue of its own, polled by the requests' test() and wait() (a
// flush is a few microseconds; no thread needed). A failed read, a post the device refuses, or a
// flush pending for longer than the I/O timeout breaks the queue pair: that flush and every later
// one fails with that Status. Thread-safe (one mutex); requests may outlive close().
class FlushQp : public std::enable_shared_from_this<FlushQp> {
 public:
  // Room for `depth` reads in flight (capped by the device). timeout_ms 0: no limit.
  static Status create(std::shared_ptr<DeviceContext> device, int depth, int64_t timeout_ms,
                       const std::string& peer, std::shared_ptr<FlushQp>* out);
  ~FlushQp();
  FlushQp(const FlushQp&) = delete;
  FlushQp& operator=(const FlushQp&) = delete;

  // Posts the n reads; *req completes when all have (test() and wait() leave sizes untouched).
  // Fails, posting nothing, when the queue pair broke earlier or has no room for n more reads.
  Status post(int n, const FlushRead* reads, std::unique_ptr<Request>* req);
  // Fails every pending flush and destroys the device objects. Idempotent.
  void close();

 private:
  struct Ticket;
  class FlushRequest;

  explicit FlushQp(std::shared_ptr<DeviceContext> device) : device_(std::move(device)) {}
  Status test(Ticket& ticket, bool* done);
  Status wait(Ticket& ticket, int64_t timeout_ms);
  Status testLocked(Ticket& ticket, bool* done);
  void drainLocked();
  // The first failure wins; pending flushes fail with it.
  void breakLocked(Status status);

  const std::shared_ptr<DeviceContext> device_;
  std::string peer_;
  int64_t timeout_ms_ = 0;
  int depth_ = 0;
  std::mutex mu_;  // guards everything below
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  QpStateMachine state_;
  std::vector<uint8_t> scratch_;
  ibv_mr* scratch_mr_ = nullptr;
  int outstanding_ = 0;  // reads posted and not yet polled
  uint64_t next_id_ = 1;
  std::deque<std::shared_ptr<Ticket>> in_flight_;  // in posting order
  Status broken_;
};

}  // namespace tally::transport::verbs
