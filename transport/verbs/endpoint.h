// SPDX-License-Identifier: Apache-2.0
// The device objects of one connection: a completion channel and queue, a control queue pair and
// 1..kMaxQps-1 data queue pairs, and the registered control buffers.
//
// Queue pair 0 carries control messages only (SEND into a ring of receive buffers); the data
// queue pairs carry RDMA writes with immediate, whose receives need no buffer. Keeping the two
// apart lets the data queue pairs post bufferless receives and the control ring stay small.
//
// Life: create() makes everything and takes the queue pairs to INIT with their receives posted,
// so localSetup() can be sent; bringUp() takes them to RTR and RTS against the peer's setup.
// The destructor destroys queue pairs first (no more DMA into memory), then the rest.
// Not thread-safe: the connection that owns it serializes access.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <vector>

#include "common/status.h"
#include "transport/verbs/context.h"
#include "transport/verbs/qp_state.h"
#include "transport/verbs/wire.h"

namespace tally::transport::verbs {

// Work request ids: the low 3 bits say what completed.
enum WrKind : uint64_t {
  kWrData = 0,         // an RDMA write of a send; the id is the send's Op pointer
  kWrRecv = 1,         // a receive: (queue pair << 32) | (control slot << 3)
  kWrControlSend = 2,  // a control send: control send slot << 3
};
inline constexpr uint64_t kWrKindMask = 7;

class Endpoint {
 public:
  // `data_qps` data queue pairs (plus the control one); `max_requests` sizes every queue.
  static Status create(std::shared_ptr<DeviceContext> device, int data_qps, int max_requests,
                       std::unique_ptr<Endpoint>* out);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // This side's setup message (queue pair numbers and PSNs, port address, queue sizes).
  SetupMessage localSetup() const;
  // Connects to the peer: uses min(ours, theirs) queue pairs (the rest are destroyed), takes
  // each to RTR and RTS. Fails with the peer's setup problem (kRemote) or the device's error.
  Status bringUp(const SetupMessage& peer);

  const VerbsApi& api() const { return device_->api(); }
  DeviceContext& device() const { return *device_; }
  const std::shared_ptr<DeviceContext>& deviceShared() const { return device_; }
  ibv_cq* cq() const { return cq_; }
  ibv_comp_channel* channel() const { return channel_; }
  ibv_qp* qp(int index) const { return qps_[static_cast<size_t>(index)].qp; }
  int dataQps() const { return static_cast<int>(qps_.size()) - 1; }
  int maxRequests() const { return max_requests_; }
  int sendDepth(int index) const { return qps_[static_cast<size_t>(index)].send_depth; }
  // The peer's max_requests, known after bringUp.
  int peerMaxRequests() const { return peer_max_requests_; }

  // Control ring: receive slot i's bytes, and send slot i's buffer and key.
  const uint8_t* controlRecv(int slot) const;
  uint8_t* controlSend(int slot);
  uint32_t controlSendKey() const;
  int controlSendSlots() const { return control_send_slots_; }
  // Posts receive `wr_id` again on queue pair `qp` (control slots get their buffer back).
  Status repostReceive(int qp, uint64_t wr_id);
  // Moves every queue pair to ERROR (outstanding work is flushed). Idempotent.
  void toError();

 private:
  struct Qp {
    ibv_qp* qp = nullptr;
    QpStateMachine state;
    uint32_t psn = 0;
    int send_depth = 0;
    int recv_depth = 0;
  };

  explicit Endpoint(std::shared_ptr<DeviceContext> device) : device_(std::move(device)) {}
  Status createQp(int index, int send_depth, int recv_depth);
  Status postInitialReceives(int index);
  Status modify(Qp& qp, QpTransition& t, const char* what);

  std::shared_ptr<DeviceContext> device_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::vector<Qp> qps_;
  int max_requests_ = 0;
  int peer_max_requests_ = 0;
  int control_recv_slots_ = 0;
  int control_send_slots_ = 0;
  std::vector<uint8_t> control_recv_;
  std::vector<uint8_t> control_send_;
  ibv_mr* control_recv_mr_ = nullptr;
  ibv_mr* control_send_mr_ = nullptr;
};

}  // namespace tally::transport::verbs
