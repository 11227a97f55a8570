// SPDX-License-Identifier: Apache-2.0
#include "transport/verbs/endpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tally::transport::verbs {

Status Endpoint::create(std::shared_ptr<DeviceContext> device, int data_qps, int max_requests,
                        std::unique_ptr<Endpoint>* out) {
  if (data_qps < 1 || data_qps > kMaxQps - 1) {
    return Status::invalidUsage("verbs queue pairs per connection is " + std::to_string(data_qps) +
                                ", expected 1 to " + std::to_string(kMaxQps - 1));
  }
  if (max_requests < 1 || static_cast<uint32_t>(max_requests) > kMaxWireRequests) {
    return Status::invalidUsage("verbs max requests is " + std::to_string(max_requests) +
                                ", expected 1 to " + std::to_string(kMaxWireRequests));
  }
  std::unique_ptr<Endpoint> ep(new Endpoint(std::move(device)));
  const VerbsApi& api = ep->api();
  const ibv_device_attr& attr = ep->device_->deviceAttr();
  const int max_wr = std::max(attr.max_qp_wr, 1);
  // Control queue pair: one clear-to-send per receive in flight, plus a mismatch notice.
  const int control_depth = std::min(max_requests + 2, max_wr);
  // Data queue pairs: one write per send in flight; one immediate per buffer of each receive.
  const int data_send = std::min(max_requests, max_wr);
  const int data_recv = std::min(max_requests * kMaxRecvs, max_wr);
  const int64_t cqe = 2 * int64_t{control_depth} + int64_t{data_qps} * (data_send + data_recv);
  if (cqe > attr.max_cqe) {
    return Status::invalidUsage("verbs: " + std::to_string(data_qps) +
                                " queue pairs with max requests " + std::to_string(max_requests) +
                                " need a completion queue of " + std::to_string(cqe) +
                                " entries, the device allows " + std::to_string(attr.max_cqe));
  }
  ep->max_requests_ = max_requests;
  ep->channel_ = api.create_comp_channel(ep->device_->context());
  if (ep->channel_ == nullptr) return Status::fromErrno("ibv_create_comp_channel", errno);
  ep->cq_ = api.create_cq(ep->device_->context(), static_cast<int>(cqe), nullptr, ep->channel_, 0);
  if (ep->cq_ == nullptr) return Status::fromErrno("ibv_create_cq", errno);

  ep->control_recv_slots_ = control_depth;
  ep->control_send_slots_ = control_depth;
  ep->control_recv_.assign(static_cast<size_t>(control_depth) * kControlBytes, 0);
  ep->control_send_.assign(static_cast<size_t>(control_depth) * kControlBytes, 0);
  ep->control_recv_mr_ = api.reg_mr(ep->device_->pd(), ep->control_recv_.data(),
                                    ep->control_recv_.size(), IBV_ACCESS_LOCAL_WRITE);
  if (ep->control_recv_mr_ == nullptr) return Status::fromErrno("ibv_reg_mr (control)", errno);
  ep->control_send_mr_ =
      api.reg_mr(ep->device_->pd(), ep->control_send_.data(), ep->control_send_.size(), 0);
  if (ep->control_send_mr_ == nullptr) return Status::fromErrno("ibv_reg_mr (control)", errno);

  ep->qps_.resize(static_cast<size_t>(data_qps) + 1);
  TALLY_RETURN_IF_ERROR(ep->createQp(0, control_depth, control_depth));
  for (int i = 1; i <= data_qps; ++i) TALLY_RETURN_IF_ERROR(ep->createQp(i, data_send, data_recv));
  *out = std::move(ep);
  return Status::ok();
}

Status Endpoint::createQp(int index, int send_depth, int recv_depth) {
  Qp& q = qps_[static_cast<size_t>(index)];
  q.state = QpStateMachine(device_->qpSettings());
  ibv_qp_init_attr init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = static_cast<uint32_t>(send_depth);
  init.cap.max_recv_wr = static_cast<uint32_t>(recv_depth);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  q.qp = api().create_qp(device_->pd(), &init);
  if (q.qp == nullptr) return Status::fromErrno("ibv_create_qp", errno);
  q.psn = randomPsn();
  q.send_depth = send_depth;
  q.recv_depth = recv_depth;
  QpEndpoint local = device_->endpoint();
  QpTransition t;
  TALLY_RETURN_IF_ERROR(q.state.toInit(local, &t));
  TALLY_RETURN_IF_ERROR(modify(q, t, "INIT"));
  return postInitialReceives(index);
}

Status Endpoint::modify(Qp& qp, QpTransition& t, const char* what) {
  int rc = api().modify_qp(qp.qp, &t.attr, t.mask);
  if (rc != 0) {
    return Status::fromErrno(
        "ibv_modify_qp to " + std::string(what) + " on " + device_->properties().name,
        rc > 0 ? rc : errno);
  }
  return Status::ok();
}

Status Endpoint::postInitialReceives(int index) {
  const Qp& q = qps_[static_cast<size_t>(index)];
  for (int slot = 0; slot < q.recv_depth; ++slot) {
    uint64_t wr_id = (static_cast<uint64_t>(index) << 32) |
                     (static_cast<uint64_t>(index == 0 ? slot : 0) << 3) | kWrRecv;
    TALLY_RETURN_IF_ERROR(repostReceive(index, wr_id));
  }
  return Status::ok();
}

Status Endpoint::repostReceive(int qp_index, uint64_t wr_id) {
  ibv_recv_wr wr{};
  ibv_sge sge{};
  wr.wr_id = wr_id;
  if (qp_index == 0) {
    const auto slot = static_cast<size_t>((wr_id & 0xffffffffu) >> 3);
    sge.addr = reinterpret_cast<uintptr_t>(control_recv_.data() + slot * kControlBytes);
    sge.length = static_cast<uint32_t>(kControlBytes);
    sge.lkey = control_recv_mr_->lkey;
    wr.sg_list = &sge;
    wr.num_sge = 1;
  }
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(qps_[static_cast<size_t>(qp_index)].qp, &wr, &bad);
  if (rc != 0) return Status::fromErrno("ibv_post_recv", rc);
  return Status::ok();
}

const uint8_t* Endpoint::controlRecv(int slot) const {
  return control_recv_.data() + static_cast<size_t>(slot) * kControlBytes;
}

uint8_t* Endpoint::controlSend(int slot) {
  return control_send_.data() + static_cast<size_t>(slot) * kControlBytes;
}

uint32_t Endpoint::controlSendKey() const { return control_send_mr_->lkey; }

SetupMessage Endpoint::localSetup() const {
  const QpEndpoint& local = device_->endpoint();
  SetupMessage m;
  m.link_layer = local.link_layer;
  m.port = local.port;
  m.mtu = static_cast<uint8_t>(local.mtu);
  m.lid = local.lid;
  std::memcpy(m.gid, local.gid, sizeof(m.gid));
  m.max_requests = static_cast<uint32_t>(max_requests_);
  m.recv_depth = static_cast<uint32_t>(qps_.size() > 1 ? qps_[1].recv_depth : 0);
  for (const Qp& q : qps_) m.qps.push_back({q.qp->qp_num, q.psn});
  return m;
}

Status Endpoint::bringUp(const SetupMessage& peer) {
  if (peer.qps.size() < 2) {
    return Status::remote("peer offers " + std::to_string(peer.qps.size()) +
                          " queue pairs, at least 2 (control and data) are needed");
  }
  const size_t used = std::min(qps_.size(), peer.qps.size());
  for (size_t i = used; i < qps_.size(); ++i) api().destroy_qp(qps_[i].qp);
  qps_.resize(used);
  peer_max_requests_ = static_cast<int>(peer.max_requests);
  for (size_t i = 0; i < used; ++i) {
    Qp& q = qps_[i];
    QpEndpoint local = device_->endpoint();
    local.qp_num = q.qp->qp_num;
    local.psn = q.psn;
    QpEndpoint remote;
    remote.qp_num = peer.qps[i].qp_num;
    remote.psn = peer.qps[i].psn;
    remote.lid = peer.lid;
    std::memcpy(remote.gid, peer.gid, sizeof(remote.gid));
    remote.mtu = static_cast<ibv_mtu>(peer.mtu);
    remote.port = peer.port;
    remote.link_layer = peer.link_layer;
    QpTransition t;
    TALLY_RETURN_IF_ERROR(q.state.toRtr(local, remote, &t));
    TALLY_RETURN_IF_ERROR(modify(q, t, "RTR"));
    TALLY_RETURN_IF_ERROR(q.state.toRts(local, &t));
    TALLY_RETURN_IF_ERROR(modify(q, t, "RTS"));
  }
  return Status::ok();
}

void Endpoint::toError() {
  for (Qp& q : qps_) {
    if (q.qp == nullptr || q.state.state() == QpStateMachine::State::kError) continue;
    QpTransition t;
    q.state.toError(&t);
    api().modify_qp(q.qp, &t.attr, t.mask);
  }
}

Endpoint::~Endpoint() {
  const VerbsApi& verbs = api();
  for (Qp& q : qps_) {
    if (q.qp != nullptr) verbs.destroy_qp(q.qp);
  }
  if (control_recv_mr_ != nullptr) verbs.dereg_mr(control_recv_mr_);
  if (control_send_mr_ != nullptr) verbs.dereg_mr(control_send_mr_);
  if (cq_ != nullptr) verbs.destroy_cq(cq_);
  if (channel_ != nullptr) verbs.destroy_comp_channel(channel_);
}

}  // namespace tally::transport::verbs
