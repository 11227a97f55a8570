// SPDX-License-Identifier: Apache-2.0
#include "transport/verbs/qp_state.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>

namespace tally::transport::verbs {
namespace {

bool allZero(const uint8_t* bytes, size_t n) {
  return std::all_of(bytes, bytes + n, [](uint8_t b) { return b == 0; });
}

}  // namespace

const char* QpStateMachine::stateName(State state) {
  switch (state) {
    case State::kReset:
      return "RESET";
    case State::kInit:
      return "INIT";
    case State::kRtr:
      return "RTR";
    case State::kRts:
      return "RTS";
    case State::kError:
      return "ERROR";
  }
  return "?";
}

Status QpStateMachine::expect(State wanted, const char* transition) const {
  if (state_ == wanted) return Status::ok();
  return Status::internal(std::string("queue pair transition ") + transition + " from state " +
                          stateName(state_) + " (expected " + stateName(wanted) + ")");
}

Status QpStateMachine::toInit(const QpEndpoint& local, QpTransition* out, int access) {
  TALLY_RETURN_IF_ERROR(expect(State::kReset, "to INIT"));
  if (local.port == 0) return Status::internal("queue pair on port 0");
  QpTransition t;
  t.attr.qp_state = IBV_QPS_INIT;
  t.attr.pkey_index = settings_.pkey_index;
  t.attr.port_num = local.port;
  t.attr.qp_access_flags = static_cast<unsigned>(access);
  t.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  *out = t;
  state_ = State::kInit;
  return Status::ok();
}

Status QpStateMachine::toRtr(const QpEndpoint& local, const QpEndpoint& remote, QpTransition* out) {
  TALLY_RETURN_IF_ERROR(expect(State::kInit, "to RTR"));
  if (local.link_layer != remote.link_layer) {
    return Status::remote(std::string("peer's port is ") +
                          (remote.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand") +
                          ", ours is " +
                          (local.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand"));
  }
  const bool roce = local.link_layer == IBV_LINK_LAYER_ETHERNET;
  const bool global = roce || settings_.force_global_route;
  if (global && allZero(remote.gid, sizeof(remote.gid))) {
    return Status::remote("peer sent no GID, which routing over " +
                          std::string(roce ? "RoCE" : "a global route") + " needs");
  }
  if (global && local.gid_index < 0) {
    return Status::internal("no local GID index for a globally routed queue pair");
  }
  if (!global && remote.lid == 0) return Status::remote("peer sent LID 0 for an InfiniBand port");
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTR;
  t.attr.path_mtu = std::min(local.mtu, remote.mtu);
  t.attr.dest_qp_num = remote.qp_num;
  t.attr.rq_psn = remote.psn;
  // Only the flush queue pair issues RDMA reads (a few bytes each, so one at a time is plenty);
  // one is the smallest legal value.
  t.attr.max_dest_rd_atomic = 1;
  t.attr.min_rnr_timer = settings_.min_rnr_timer;
  t.attr.ah_attr.port_num = local.port;
  t.attr.ah_attr.sl = settings_.service_level;
  t.attr.ah_attr.src_path_bits = 0;
  t.attr.ah_attr.dlid = global && roce ? 0 : remote.lid;
  if (global) {
    t.attr.ah_attr.is_global = 1;
    std::memcpy(t.attr.ah_attr.grh.dgid.raw, remote.gid, sizeof(remote.gid));
    t.attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(local.gid_index);
    t.attr.ah_attr.grh.hop_limit = settings_.hop_limit;
    t.attr.ah_attr.grh.traffic_class = settings_.traffic_class;
    t.attr.ah_attr.grh.flow_label = 0;
  }
  t.mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  *out = t;
  state_ = State::kRtr;
  return Status::ok();
}

Status QpStateMachine::toRts(const QpEndpoint& local, QpTransition* out) {
  TALLY_RETURN_IF_ERROR(expect(State::kRtr, "to RTS"));
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTS;
  t.attr.sq_psn = local.psn;
  t.attr.timeout = settings_.ack_timeout;
  t.attr.retry_cnt = settings_.retry_count;
  t.attr.rnr_retry = settings_.rnr_retry;
  t.attr.max_rd_atomic = 1;
  t.mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
           IBV_QP_MAX_QP_RD_ATOMIC;
  *out = t;
  state_ = State::kRts;
  return Status::ok();
}

void QpStateMachine::toError(QpTransition* out) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_ERR;
  t.mask = IBV_QP_STATE;
  *out = t;
  state_ = State::kError;
}

uint32_t randomPsn() {
  std::random_device device;
  return device() & 0xffffffu;
}

}  // namespace tally::transport::verbs
