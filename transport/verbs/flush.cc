// SPDX-License-Identifier: Apache-2.0
#include "transport/verbs/flush.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

namespace tally::transport::verbs {

using FlushClock = std::chrono::steady_clock;

struct FlushQp::Ticket {
  uint64_t id = 0;
  int reads_left = 0;
  bool done = false;
  Status error;
  FlushClock::time_point posted_at{};
};

class FlushQp::FlushRequest final : public Request {
 public:
  FlushRequest(std::shared_ptr<FlushQp> owner, std::shared_ptr<Ticket> ticket)
      : owner_(std::move(owner)), ticket_(std::move(ticket)) {}
  Status test(bool* done, size_t* /*sizes*/) override { return owner_->test(*ticket_, done); }
  Status wait(int64_t timeout_ms, size_t* /*sizes*/) override {
    return owner_->wait(*ticket_, timeout_ms);
  }

 private:
  std::shared_ptr<FlushQp> owner_;
  std::shared_ptr<Ticket> ticket_;
};

Status FlushQp::create(std::shared_ptr<DeviceContext> device, int depth, int64_t timeout_ms,
                       const std::string& peer, std::shared_ptr<FlushQp>* out) {
  std::shared_ptr<FlushQp> f(new FlushQp(std::move(device)));
  const VerbsApi& api = f->device_->api();
  const ibv_device_attr& attr = f->device_->deviceAttr();
  f->peer_ = peer;
  f->timeout_ms_ = timeout_ms;
  f->depth_ = std::max(1, std::min({depth, attr.max_qp_wr, attr.max_cqe}));
  f->cq_ = api.create_cq(f->device_->context(), f->depth_, nullptr, nullptr, 0);
  if (f->cq_ == nullptr) return Status::fromErrno("ibv_create_cq (flush)", errno);
  f->scratch_.assign(size_t{kMaxRecvs} * kFlushReadBytes, 0);
  f->scratch_mr_ =
      api.reg_mr(f->device_->pd(), f->scratch_.data(), f->scratch_.size(), IBV_ACCESS_LOCAL_WRITE);
  if (f->scratch_mr_ == nullptr) return Status::fromErrno("ibv_reg_mr (flush scratch)", errno);
  ibv_qp_init_attr init{};
  init.send_cq = f->cq_;
  init.recv_cq = f->cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = static_cast<uint32_t>(f->depth_);
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  f->qp_ = api.create_qp(f->device_->pd(), &init);
  if (f->qp_ == nullptr) return Status::fromErrno("ibv_create_qp (flush)", errno);
  // Connected to itself: this side is both the reader and the responder that serves the read.
  f->state_ = QpStateMachine(f->device_->qpSettings());
  QpEndpoint self = f->device_->endpoint();
  self.qp_num = f->qp_->qp_num;
  self.psn = randomPsn();
  QpTransition t;
  auto modify = [&](const char* what) {
    int rc = api.modify_qp(f->qp_, &t.attr, t.mask);
    if (rc == 0) return Status::ok();
    return Status::fromErrno(std::string("ibv_modify_qp to ") + what + " (flush queue pair on " +
                                 f->device_->properties().name + ")",
                             rc > 0 ? rc : errno);
  };
  TALLY_RETURN_IF_ERROR(f->state_.toInit(self, &t, kQpAccessFlags | IBV_ACCESS_REMOTE_READ));
  TALLY_RETURN_IF_ERROR(modify("INIT"));
  TALLY_RETURN_IF_ERROR(f->state_.toRtr(self, self, &t));
  TALLY_RETURN_IF_ERROR(modify("RTR"));
  TALLY_RETURN_IF_ERROR(f->state_.toRts(self, &t));
  TALLY_RETURN_IF_ERROR(modify("RTS"));
  *out = std::move(f);
  return Status::ok();
}

Status FlushQp::post(int n, const FlushRead* reads, std::unique_ptr<Request>* req) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.isOk()) return broken_;
  drainLocked();  // frees room
  if (outstanding_ + n > depth_) {
    return Status::internal("flush of " + std::to_string(n) +
                            " buffers on the connection to peer " + peer_ + ": " +
                            std::to_string(outstanding_) + " reads already in flight, room for " +
                            std::to_string(depth_));
  }
  auto ticket = std::make_shared<Ticket>();
  ticket->id = next_id_++;
  ticket->posted_at = FlushClock::now();
  for (int i = 0; i < n; ++i) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(scratch_.data()) + size_t{kFlushReadBytes} * i,
                std::min(reads[i].length, kFlushReadBytes), scratch_mr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = ticket->id;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = reads[i].addr;
    wr.wr.rdma.rkey = reads[i].rkey;
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(qp_, &wr, &bad);
    if (rc != 0) {
      // Reads already posted complete unseen: the ticket is not in flight yet.
      breakLocked(
          Status::fromErrno("ibv_post_send (flush read) on the connection to peer " + peer_, rc));
      return broken_;
    }
    ++outstanding_;
    ++ticket->reads_left;
  }
  in_flight_.push_back(ticket);
  *req = std::make_unique<FlushRequest>(shared_from_this(), std::move(ticket));
  return Status::ok();
}

void FlushQp::drainLocked() {
  if (cq_ == nullptr) return;
  ibv_wc wcs[16];
  int got = 0;
  while ((got = ibv_poll_cq(cq_, 16, wcs)) > 0) {
    for (int i = 0; i < got; ++i) {
      --outstanding_;
      const ibv_wc& wc = wcs[i];
      if (wc.status != IBV_WC_SUCCESS) {
        char text[160];
        std::snprintf(text, sizeof(text), "%s (status %d, vendor error 0x%x)",
                      device_->api().wc_status_str(wc.status), static_cast<int>(wc.status),
                      wc.vendor_err);
        breakLocked(
            Status::remote("flush read on the connection to peer " + peer_ + " failed: " + text));
        continue;
      }
      auto it = std::find_if(in_flight_.begin(), in_flight_.end(),
                             [&](const auto& t) { return t->id == wc.wr_id; });
      if (it == in_flight_.end() || --(*it)->reads_left > 0) continue;
      (*it)->done = true;
      in_flight_.erase(it);
    }
  }
  if (got < 0) breakLocked(Status::system("ibv_poll_cq failed on the flush queue pair"));
}

void FlushQp::breakLocked(Status status) {
  if (broken_.isOk()) broken_ = std::move(status);
  for (auto& ticket : in_flight_) ticket->error = broken_;
  in_flight_.clear();
}

Status FlushQp::testLocked(Ticket& ticket, bool* done) {
  drainLocked();
  if (ticket.done) {
    *done = true;
    return Status::ok();
  }
  if (!ticket.error.isOk()) return connectionFailure(ticket.error);
  if (timeout_ms_ > 0 &&
      FlushClock::now() - ticket.posted_at > std::chrono::milliseconds(timeout_ms_)) {
    breakLocked(Status::timeout("flush on the connection to peer " + peer_ +
                                " did not complete within the I/O timeout (TALLY_TIMEOUT_MS)"));
    return connectionFailure(ticket.error);
  }
  *done = false;
  return Status::ok();
}

Status FlushQp::test(Ticket& ticket, bool* done) {
  std::lock_guard<std::mutex> lock(mu_);
  return testLocked(ticket, done);
}

Status FlushQp::wait(Ticket& ticket, int64_t timeout_ms) {
  const auto deadline = FlushClock::now() + std::chrono::milliseconds(timeout_ms);
  for (int polls = 0;; ++polls) {
    bool done = false;
    TALLY_RETURN_IF_ERROR(test(ticket, &done));
    if (done) return Status::ok();
    if (timeout_ms >= 0 && FlushClock::now() >= deadline) {
      return Status::timeout("flush on the connection to peer " + peer_ + " still pending after " +
                             std::to_string(timeout_ms) + " ms");
    }
    // Reads take microseconds: spin a little, then poll every 20 us.
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void FlushQp::close() {
  std::lock_guard<std::mutex> lock(mu_);
  breakLocked(Status::remote("connection to peer " + peer_ + " was closed"));
  const VerbsApi& api = device_->api();
  // The queue pair goes first: once it is destroyed the device reads no user memory.
  if (qp_ != nullptr) {
    QpTransition t;
    state_.toError(&t);
    api.modify_qp(qp_, &t.attr, t.mask);
    api.destroy_qp(qp_);
  }
  if (scratch_mr_ != nullptr) api.dereg_mr(scratch_mr_);
  if (cq_ != nullptr) api.destroy_cq(cq_);
  qp_ = nullptr;
  scratch_mr_ = nullptr;
  cq_ = nullptr;
}

FlushQp::~FlushQp() { close(); }

}  // namespace tally::transport::verbs
