// SPDX-License-Identifier: Apache-2.0
// The state machine of one reliable-connected queue pair: RESET -> INIT -> RTR -> RTS, with
// ERROR reachable from anywhere.
//
// It computes the ibv_qp_attr and attribute mask for each transition from this side's and the
// peer's QpEndpoint and never calls libibverbs itself, so every attribute is unit-tested without
// a device; the caller passes the result to ibv_modify_qp. A transition out of order is refused
// (kInternal) and leaves the state as it was. A computed transition moves the state forward: if
// ibv_modify_qp then fails, the queue pair is unusable and its connection fails as a whole.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "common/status.h"

namespace tally::transport::verbs {

// What one side of a queue pair tells the other (see wire.h), plus its local GID index.
struct QpEndpoint {
  uint32_t qp_num = 0;         // 24 bits
  uint32_t psn = 0;            // 24 bits: first packet sequence number this side sends
  uint16_t lid = 0;            // InfiniBand: the port's LID
  uint8_t gid[16] = {};        // RoCE (and routed IB): the port's GID
  int gid_index = -1;          // local only: the GID table entry the GID came from
  ibv_mtu mtu = IBV_MTU_1024;  // the port's active MTU
  uint8_t port = 1;
  uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;
};

// Settings that are not negotiated. The defaults suit a data-center fabric.
struct QpSettings {
  uint16_t pkey_index = 0;
  uint8_t service_level = 0;
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 255;
  // Local ACK timeout, 4.096 us * 2^timeout: 20 is about 4.3 s per try.
  uint8_t ack_timeout = 20;
  uint8_t retry_count = 7;
  // 7 retries forever: a receive not yet re-posted costs a pause, never the connection.
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 12;  // 0.64 ms
  // Route with a global header on InfiniBand too (needed across subnets).
  bool force_global_route = false;
};

// RDMA write with immediate lands in registered memory on the receiving side, which posts
// receives for the immediates; sends (control messages) need local write on the receive buffers.
inline constexpr int kQpAccessFlags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

struct QpTransition {
  ibv_qp_attr attr{};
  int mask = 0;
};

class QpStateMachine {
 public:
  enum class State { kReset, kInit, kRtr, kRts, kError };

  explicit QpStateMachine(const QpSettings& settings = {}) : settings_(settings) {}

  State state() const { return state_; }

  // RESET -> INIT on local.port, allowing the peer `access` (the flags above; the flush queue
  // pair adds IBV_ACCESS_REMOTE_READ).
  Status toInit(const QpEndpoint& local, QpTransition* out, int access = kQpAccessFlags);
  // INIT -> RTR towards `remote`. The path MTU is the smaller of both; RoCE (Ethernet link
  // layer) routes by the peer's GID from local.gid_index, InfiniBand by its LID. Fails
  // (kRemote) when the link layers differ or the peer's address is missing.
  Status toRtr(const QpEndpoint& local, const QpEndpoint& remote, QpTransition* out);
  // RTR -> RTS sending from local.psn.
  Status toRts(const QpEndpoint& local, QpTransition* out);
  // Any state -> ERROR: flushes outstanding work requests.
  void toError(QpTransition* out);

  static const char* stateName(State state);

 private:
  Status expect(State wanted, const char* transition) const;

  QpSettings settings_;
  State state_ = State::kReset;
};

// A random 24-bit starting packet sequence number for a new queue pair.
uint32_t randomPsn();

}  // namespace tally::transport::verbs
