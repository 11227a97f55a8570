// SPDX-License-Identifier: Apache-2.0
// The verbs Connection's helper thread: completions, matching sends to the peer's clear-to-send
// messages, posting writes and control messages. The design is in connection.h.
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include <algorithm>

#include "common/log.h"
#include "transport/tcp/wire.h"
#include "transport/verbs/core.h"

namespace tally::transport::verbs {
namespace {

constexpr int kBatch = 32;
constexpr int kSpinPolls = 2000;  // empty polls before sleeping on the completion channel
constexpr int kWatchMs = 20;      // the side channel and timeouts are looked at this often
constexpr int64_t kFarewellGraceMs = 1000;

}  // namespace

int Core::qpIndex(uint32_t qp_num) const {
  for (int i = 0; i <= endpoint_->dataQps(); ++i) {
    if (endpoint_->qp(i)->qp_num == qp_num) return i;
  }
  return -1;
}

void Core::pollLoop() {
  ibv_comp_channel* channel = endpoint_->channel();
  ibv_cq* cq = endpoint_->cq();
  const int flags = fcntl(channel->fd, F_GETFL);
  if (flags < 0 || fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    std::lock_guard<std::mutex> lock(mu_);
    return failLocked(Status::fromErrno("fcntl on the completion channel", errno));
  }
  int idle = 0;
  auto last_watch = Clock::now();
  while (!stop_) {
    int taken = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      taken = drainLocked();
    }
    if (Clock::now() - last_watch >= std::chrono::milliseconds(kWatchMs)) {
      watchPeer();
      last_watch = Clock::now();
    }
    if (taken > 0 || ++idle < kSpinPolls) {
      if (taken > 0) idle = 0;
      continue;
    }
    // Nothing for a while: arm the channel, look once more (a completion may have come before
    // arming), then sleep until an event, close(), or the next watch.
    idle = 0;
    if (ibv_req_notify_cq(cq, 0) != 0) {
      std::lock_guard<std::mutex> lock(mu_);
      return failLocked(Status::system("ibv_req_notify_cq failed"));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (drainLocked() > 0) continue;
    }
    pollfd fds[2] = {{channel->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, kWatchMs) > 0 && (fds[0].revents & POLLIN) != 0) {
      ibv_cq* event_cq = nullptr;
      void* context = nullptr;
      if (endpoint_->api().get_cq_event(channel, &event_cq, &context) == 0) {
        endpoint_->api().ack_cq_events(event_cq, 1);
      }
    }
  }
}

int Core::drainLocked() {
  if (!endpoint_) return 0;
  ibv_wc wcs[kBatch];
  int total = 0;
  for (;;) {
    int got = ibv_poll_cq(endpoint_->cq(), kBatch, wcs);
    if (got < 0) {
      failLocked(Status::system("ibv_poll_cq failed on the connection to peer " + peer_));
      return total;
    }
    for (int i = 0; i < got; ++i) completionLocked(wcs[i]);
    total += got;
    if (got < kBatch) return total;
  }
}

void Core::completionLocked(const ibv_wc& wc) {
  const uint64_t kind = wc.wr_id & kWrKindMask;
  if (wc.status != IBV_WC_SUCCESS) {
    // After a failure the device flushes everything outstanding; only the first error counts.
    if (kind == kWrControlSend) controlSentLocked(static_cast<int>(wc.wr_id >> 3));
    if (failed_) return;
    char text[160];
    std::snprintf(text, sizeof(text), "%s (status %d, vendor error 0x%x) on queue pair 0x%x",
                  endpoint_->api().wc_status_str(wc.status), static_cast<int>(wc.status),
                  wc.vendor_err, wc.qp_num);
    return failLocked(Status::remote("verbs work request to peer " + peer_ + " failed: " + text));
  }
  const int qp = qpIndex(wc.qp_num);
  if (qp < 0) return failLocked(Status::internal("completion for an unknown queue pair"));
  if (kind == kWrRecv) {
    Status status = endpoint_->repostReceive(qp, wc.wr_id);
    if (!status.isOk()) return failLocked(status);
    if (qp == 0)
      return controlReceivedLocked(static_cast<int>((wc.wr_id & 0xffffffffu) >> 3), wc.byte_len);
    return dataReceivedLocked(wc);
  }
  --outstanding_[static_cast<size_t>(qp)];
  if (kind == kWrControlSend) {
    controlSentLocked(static_cast<int>(wc.wr_id >> 3));
    return flushControlLocked();
  }
  writeCompletedLocked(reinterpret_cast<Op*>(wc.wr_id), qp);
}

void Core::controlSentLocked(int slot) {
  free_control_.push_back(slot);
  if (notice_slots_[static_cast<size_t>(slot)]) {
    notice_slots_[static_cast<size_t>(slot)] = false;
    --notices_in_flight_;
  }
}

void Core::writeCompletedLocked(Op* op, int qp) {
  ++chunks_delivered_;
  flushWritesLocked(qp);
  if (--op->chunks_left > 0) return;
  completeLocked(*op);
  while (!writing_.empty() && writing_.front()->done) writing_.pop_front();
}

void Core::dataReceivedLocked(const ibv_wc& wc) {
  if ((wc.wc_flags & IBV_WC_WITH_IMM) == 0) {
    return failLocked(Status::remote("peer " + peer_ + " sent data without an immediate"));
  }
  Immediate imm;
  Status status = decodeImmediate(ntohl(wc.imm_data), &imm);
  if (!status.isOk()) return failLocked(status);
  const uint32_t index = (imm.seq - window_base_) & kSeqMask;
  Op* op = index < window_.size() ? window_[index].get() : nullptr;
  if (op == nullptr || op->done || imm.slot >= op->n ||
      (op->chunks_total[imm.slot] != 0 && op->chunks_total[imm.slot] != imm.chunks)) {
    return failLocked(Status::remote("peer " + peer_ + " wrote to receive " +
                                     std::to_string(imm.seq) + " buffer " +
                                     std::to_string(imm.slot) + ", which is not expecting it"));
  }
  const int slot = imm.slot;
  op->chunks_total[slot] = imm.chunks;
  op->received[slot] += wc.byte_len;
  op->progress_at = Clock::now();
  ++chunks_arrived_;
  if (op->received[slot] > op->capacity[slot]) {
    return failLocked(Status::remote("peer " + peer_ + " wrote past a receive buffer of " +
                                     std::to_string(op->capacity[slot]) + " bytes"));
  }
  if (++op->chunks_seen[slot] < op->chunks_total[slot]) return;
  if (++op->slots_done < op->n) return;
  completeLocked(*op);
  while (!window_.empty() && window_.front()->done) {
    window_.pop_front();
    window_base_ = (window_base_ + 1) & kSeqMask;
  }
}

void Core::controlReceivedLocked(int slot, uint32_t length) {
  ControlKind kind{};
  ClearToSend cts;
  Mismatch mismatch;
  Status status = decodeControl(endpoint_->controlRecv(slot), length, &kind, &cts, &mismatch);
  if (!status.isOk()) return failLocked(status);
  if (kind == ControlKind::kMismatch) {
    std::string text = "peer " + peer_ + " sent " + std::to_string(mismatch.size) +
                       " bytes with tag " + std::to_string(mismatch.tag);
    return failLocked(Status::internal(
        mismatch.capacity < 0
            ? text + " but the posted receive has no free buffer with that tag"
            : text + " into a receive buffer of " + std::to_string(mismatch.capacity) + " bytes"));
  }
  if (cts.seq != next_peer_cts_seq_) {
    return failLocked(Status::remote("peer " + peer_ + " sent clear-to-send " +
                                     std::to_string(cts.seq) + ", expected " +
                                     std::to_string(next_peer_cts_seq_)));
  }
  next_peer_cts_seq_ = (next_peer_cts_seq_ + 1) & kSeqMask;
  PeerCts entry;
  entry.cts = cts;
  peer_cts_.push_back(entry);
  matchLocked();
}

void Core::matchLocked() {
  while (!failed_ && !unmatched_.empty() && !peer_cts_.empty()) {
    std::shared_ptr<Op> op = unmatched_.front();
    PeerCts& cts = peer_cts_.front();
    int slot = -1;
    for (int i = 0; i < cts.cts.n && slot < 0; ++i) {
      if (!cts.taken[i] && cts.cts.entries[i].tag == op->send_tag) slot = i;
    }
    if (slot < 0 || op->send_size > cts.cts.entries[slot].capacity) {
      // Tell the receiver why its receive will never complete, then fail here too.
      Mismatch mismatch;
      mismatch.tag = op->send_tag;
      mismatch.size = op->send_size;
      mismatch.capacity = slot < 0 ? -1 : static_cast<int64_t>(cts.cts.entries[slot].capacity);
      uint8_t bytes[kControlBytes];
      ++notices_in_flight_;
      sendControlLocked(bytes, encodeMismatch(mismatch, bytes), /*notice=*/true);
      return failLocked(Status::internal(
          "a message of " + std::to_string(op->send_size) + " bytes with tag " +
          std::to_string(op->send_tag) + " does not fit the receive peer " + peer_ + " posted" +
          (slot < 0 ? std::string(" (no free buffer with that tag)")
                    : " (buffer of " + std::to_string(mismatch.capacity) + " bytes)")));
    }
    cts.taken[slot] = true;
    unmatched_.pop_front();
    postWritesLocked(*op, cts, slot);
    writing_.push_back(std::move(op));
    if (++cts.matched == cts.cts.n) peer_cts_.pop_front();
  }
}

void Core::postWritesLocked(Op& op, const PeerCts& cts, int slot) {
  const int data_qps = endpoint_->dataQps();
  int chunks = tcp::stripeCount(op.send_size, data_qps, options_.min_stripe);
  const uint64_t needed = (op.send_size + kMaxChunkBytes - 1) / kMaxChunkBytes;
  chunks = static_cast<int>(std::max<uint64_t>(static_cast<uint64_t>(chunks), needed));
  op.chunks = chunks;
  op.chunks_left = chunks;
  op.posted_at = Clock::now();
  const CtsEntry& entry = cts.cts.entries[slot];
  const uint32_t imm = htonl(encodeImmediate({cts.cts.seq, slot, chunks}));
  for (int i = 0; i < chunks; ++i) {
    uint64_t offset = 0;
    uint64_t length = 0;
    tcp::stripeRange(op.send_size, chunks, i, &offset, &length);
    const int qp = 1 + (next_qp_ + i) % data_qps;
    backlog_[static_cast<size_t>(qp)].push_back(
        {&op, reinterpret_cast<uintptr_t>(op.send_data) + offset, static_cast<uint32_t>(length),
         entry.addr + offset, entry.rkey, imm});
    flushWritesLocked(qp);
  }
  next_qp_ = (next_qp_ + chunks) % data_qps;
}

void Core::flushWritesLocked(int qp) {
  auto& queue = backlog_[static_cast<size_t>(qp)];
  while (endpoint_ && !queue.empty() &&
         outstanding_[static_cast<size_t>(qp)] < endpoint_->sendDepth(qp)) {
    const PendingWrite& w = queue.front();
    ibv_sge sge{w.local_addr, w.length, w.op->lkey};
    ibv_send_wr wr{};
    wr.wr_id = reinterpret_cast<uintptr_t>(w.op) | kWrData;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = w.imm;
    wr.sg_list = w.length > 0 ? &sge : nullptr;
    wr.num_sge = w.length > 0 ? 1 : 0;
    wr.wr.rdma.remote_addr = w.remote_addr;
    wr.wr.rdma.rkey = w.rkey;
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(endpoint_->qp(qp), &wr, &bad);
    if (rc != 0) return failLocked(Status::fromErrno("ibv_post_send (write) to " + peer_, rc));
    ++outstanding_[static_cast<size_t>(qp)];
    queue.pop_front();
  }
}

void Core::sendControlLocked(const uint8_t* bytes, size_t size, bool notice) {
  control_backlog_.emplace_back();
  std::copy(bytes, bytes + size, control_backlog_.back().bytes);
  control_backlog_.back().size = size;
  control_backlog_.back().notice = notice;
  flushControlLocked();
}

void Core::flushControlLocked() {
  while (endpoint_ && !control_backlog_.empty() && !free_control_.empty()) {
    const int slot = free_control_.back();
    const ControlMessage& message = control_backlog_.front();
    uint8_t* buffer = endpoint_->controlSend(slot);
    std::copy(message.bytes, message.bytes + message.size, buffer);
    ibv_sge sge{reinterpret_cast<uintptr_t>(buffer), static_cast<uint32_t>(message.size),
                endpoint_->controlSendKey()};
    ibv_send_wr wr{};
    wr.wr_id = (static_cast<uint64_t>(slot) << 3) | kWrControlSend;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(endpoint_->qp(0), &wr, &bad);
    if (rc != 0) return failLocked(Status::fromErrno("ibv_post_send (control) to " + peer_, rc));
    free_control_.pop_back();
    notice_slots_[static_cast<size_t>(slot)] = message.notice;
    ++outstanding_[0];
    control_backlog_.pop_front();
  }
}

void Core::completeLocked(Op& op) {
  op.done = true;
  for (auto& p : op.pins) p.reset();
  if (op.is_send) {
    --sends_in_flight_;
  } else {
    --recvs_in_flight_;
  }
  done_cv_.notify_all();
}

void Core::failLocked(Status status, bool quiet) {
  if (failed_) return;
  failed_ = true;
  error_ = std::move(status);
  done_cv_.notify_all();
  if (quiet) {
    TALLY_INFO(log::kNet, "verbs: connection to peer %s ended: %s", peer_.c_str(),
               error_.toString().c_str());
  } else if (!closing_) {
    TALLY_WARN("verbs: connection to peer %s failed: %s", peer_.c_str(),
               error_.toString().c_str());
  }
}

void Core::watchPeer() {
  bool close_side = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_) checkTimeoutsLocked();
    // A failure found here closes the side channel, so the peer hears of it now rather than at
    // close(); a pending mismatch notice goes out first, it says more than the loss would.
    close_side = failed_ && !closing_ && !side_closed_ && notices_in_flight_ == 0;
    side_closed_ = side_closed_ || close_side;
  }
  if (close_side) return side_->close();
  std::vector<uint8_t> farewell;
  Status why;
  side::PeerState state = side_->poll(&farewell, &why);
  if (state == side::PeerState::kOpen) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_) return;
  if (state == side::PeerState::kFarewell) {
    // Let the chunks the peer saw complete arrive here first (the farewell can overtake them).
    if (farewell_at_ == Clock::time_point{}) {
      farewell_at_ = Clock::now();
      for (size_t i = 0; i < farewell.size() && i < 8; ++i) {
        farewell_chunks_ |= static_cast<uint64_t>(farewell[i]) << (8 * i);
      }
    }
    drainLocked();
    if (chunks_arrived_ < farewell_chunks_ &&
        Clock::now() - farewell_at_ < std::chrono::milliseconds(kFarewellGraceMs)) {
      return;
    }
    // A peer that closes between messages is how connections normally end: INFO, not WARN.
    return failLocked(Status::remote("peer " + peer_ + " closed the connection"),
                      /*quiet=*/sends_in_flight_ == 0);
  }
  drainLocked();
  failLocked(why.message().empty() ? Status::remote("lost peer " + peer_)
                                   : Status::remote(why.message()));
}

void Core::checkTimeoutsLocked() {
  if (options_.timeouts.io_ms <= 0) return;
  const auto limit = Clock::now() - std::chrono::milliseconds(options_.timeouts.io_ms);
  for (const auto& op : writing_) {
    if (!op->done && op->posted_at < limit) {
      return failLocked(Status::timeout("peer " + peer_ + " did not take a message of " +
                                        std::to_string(op->send_size) +
                                        " bytes within the I/O timeout (TALLY_TIMEOUT_MS)"));
    }
  }
  for (const auto& op : window_) {
    if (!op->done && op->progress_at != Clock::time_point{} && op->progress_at < limit) {
      return failLocked(Status::timeout("peer " + peer_ + " sent part of a message, then " +
                                        "nothing within the I/O timeout (TALLY_TIMEOUT_MS)"));
    }
  }
}

}  // namespace tally::transport::verbs
