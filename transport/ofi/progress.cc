// SPDX-License-Identifier: Apache-2.0
// The ofi connection's helper thread: posts, completions, header matching, the peer watch and
// the I/O timeout. core.h describes the design.
#include <poll.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "transport/ofi/core.h"

namespace tally::transport::ofi {
namespace {

// How long the helper thread keeps polling, yielding the CPU between rounds, after the last
// progress before it sleeps: while an operation of ours is in flight (a send, a message landing)
// its next completion usually comes within microseconds and a sleep would cost a wake-up each
// time; with only receives waiting for the peer, a few rounds and then sleep.
constexpr auto kActiveSpin = std::chrono::microseconds(100);
constexpr int kIdleSpinRounds = 8;
constexpr int kCompletionBatch = 32;
constexpr auto kBusyWatchInterval = std::chrono::milliseconds(5);
constexpr auto kTimeoutCheckInterval = std::chrono::milliseconds(100);

int64_t msSince(Clock::time_point then, Clock::time_point now) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - then).count();
}

}  // namespace

bool Core::failed() {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_ || stop_;
}

void Core::run() {
  std::deque<std::shared_ptr<Op>> fresh;
  int idle = 0;
  Clock::time_point last_busy = Clock::now();
  while (!failed()) {
    takeNewOps(&fresh);
    bool busy = !fresh.empty();
    for (std::shared_ptr<Op>& op : fresh) {
      track(op);
      if (op->is_send) {
        queueSend(op);
      } else if (op->is_flush) {
        queueFlush(op);
      } else {
        posted_recvs_.push_back(std::move(op));
      }
    }
    fresh.clear();
    if (busy) processHeaders();  // a new receive may take headers that came before it
    busy = progressOnce() || busy;
    const Clock::time_point now = Clock::now();
    if (now >= next_watch_) {
      watchPeer();
      next_watch_ = now + kBusyWatchInterval;
    }
    if (now >= next_timeout_check_) {
      checkTimeouts();
      next_timeout_check_ = now + kTimeoutCheckInterval;
    }
    if (busy) {
      idle = 0;
      last_busy = now;
      continue;
    }
    if (++idle < kIdleSpinRounds || (inFlight() && now - last_busy < kActiveSpin)) {
      std::this_thread::yield();
      continue;
    }
    idle = 0;
    sleep();
    last_busy = Clock::now();
    next_watch_ = Clock::time_point{};  // look at the peer after every sleep
  }
}

bool Core::inFlight() const {
  if (!to_post_.empty()) return true;
  for (const std::shared_ptr<Op>& op : active_) {
    if (op->is_send || op->outstanding > 0) return true;
  }
  return false;
}

void Core::takeNewOps(std::deque<std::shared_ptr<Op>>* ops) {
  std::lock_guard<std::mutex> lock(mu_);
  ops->swap(new_ops_);
}

bool Core::progressOnce() {
  bool busy = postQueued();
  busy = drainCompletions() || busy;
  busy = processHeaders() || busy;
  busy = postQueued() || busy;
  return busy;
}

void Core::track(const std::shared_ptr<Op>& op) {
  op->active_index = active_.size();
  op->last_progress = Clock::now();
  active_.push_back(op);
}

void Core::untrack(Op* op) {
  const size_t index = op->active_index;
  if (index >= active_.size() || active_[index].get() != op) return;
  if (index + 1 != active_.size()) {
    active_[index] = std::move(active_.back());
    active_[index]->active_index = index;
  }
  active_.pop_back();
}

bool Core::postQueued() {
  bool posted = false;
  fid_ep* ep = endpoint_->ep();
  while (!to_post_.empty()) {
    Piece* p = to_post_.front();
    const bool send = p->kind == Piece::kControlSend || p->kind == Piece::kChunkSend;
    const bool read = p->kind == Piece::kFlushRead;
    ssize_t ret = 0;
    if (read) {
      ret = fi_read(ep, p->buffer, p->length, p->desc, endpoint_->self(), p->remote_addr, p->key,
                    &p->context);
    } else if (send) {
      ret = fi_tsend(ep, p->buffer, p->length, p->desc, endpoint_->peer(), p->tag, &p->context);
    } else {
      ret = fi_trecv(ep, p->buffer, p->length, p->desc, FI_ADDR_UNSPEC, p->tag, 0, &p->context);
    }
    if (ret == -FI_EAGAIN) break;  // the queue is full: completions first
    if (ret != 0) {
      const char* call = read ? "fi_read" : send ? "fi_tsend" : "fi_trecv";
      fail(Status::system(endpoint_->domain()->errorText(call, static_cast<int>(ret)) +
                          " (peer " + peer_ + ")"));
      return false;
    }
    to_post_.pop_front();
    posted = true;
  }
  return posted;
}

bool Core::drainCompletions() {
  fi_cq_tagged_entry entries[kCompletionBatch];
  bool any = false;
  for (;;) {
    const ssize_t ret = fi_cq_read(endpoint_->cq(), entries, kCompletionBatch);
    if (ret == -FI_EAGAIN) return any;
    if (ret == -FI_EAVAIL) {
      handleError();
      any = true;
      continue;
    }
    if (ret < 0) {
      fail(Status::system(endpoint_->domain()->errorText("fi_cq_read", static_cast<int>(ret))));
      return any;
    }
    for (ssize_t i = 0; i < ret; ++i) {
      // Every context Tally posts is the first member of a Piece (standard layout).
      handleCompletion(static_cast<Piece*>(entries[i].op_context), entries[i].len);
    }
    any = true;
    if (ret < kCompletionBatch) return any;
  }
}

void Core::handleError() {
  fi_cq_err_entry entry{};
  const ssize_t ret = fi_cq_readerr(endpoint_->cq(), &entry, 0);
  if (ret == -FI_EAGAIN) return;
  if (ret < 0) {
    return fail(
        Status::system(endpoint_->domain()->errorText("fi_cq_readerr", static_cast<int>(ret))));
  }
  if (entry.err == FI_ECANCELED) return;
  const char* detail =
      fi_cq_strerror(endpoint_->cq(), entry.prov_errno, entry.err_data, nullptr, 0);
  const auto* piece = static_cast<const Piece*>(entry.op_context);
  const char* what = piece == nullptr ? "operation"
                     : piece->kind == Piece::kFlushRead ? "read-back (iflush)"
                     : piece->kind == Piece::kChunkRecv || piece->kind == Piece::kControlRecv
                         ? "receive"
                         : "send";
  fail(Status::remote("ofi " + std::string(what) + " with peer " + peer_ +
                      " failed: " + endpoint_->domain()->api->errorText(-entry.err) +
                      (detail != nullptr ? std::string(" (") + detail + ")" : std::string())));
}

void Core::handleCompletion(Piece* piece, size_t length) {
  switch (piece->kind) {
    case Piece::kControlRecv:
      arrived_length_[piece->slot] = length;
      return;
    case Piece::kControlSend:
      free_send_slots_.push_back(piece->slot);
      return finishPiece(piece->op, -1);
    case Piece::kChunkSend:
    case Piece::kFlushRead:
      return finishPiece(piece->op, -1);
    case Piece::kChunkRecv:
      if (length != piece->length) {
        return fail(Status::remote("peer " + peer_ + " sent a chunk of " +
                                   std::to_string(length) + " bytes where " +
                                   std::to_string(piece->length) + " were due"));
      }
      return finishPiece(piece->op, static_cast<int>(piece->slot));
  }
}

void Core::finishPiece(Op* op, int buffer) {
  op->last_progress = Clock::now();
  if (buffer >= 0 && --op->chunks_left[buffer] == 0) ++delivered_;
  if (--op->outstanding == 0 && (op->is_send || op->matched == op->n)) completeOp(op);
}

void Core::completeOp(Op* op) {
  for (FidPtr<fid_mr>& mr : op->owned_mr) mr.reset();
  {
    std::lock_guard<std::mutex> lock(mu_);
    op->done = true;
    if (op->is_send) {
      --sends_in_flight_;
    } else if (!op->is_flush) {
      --recvs_in_flight_;
    }
    done_cv_.notify_all();
  }
  untrack(op);  // may free op
}

void Core::watchPeer() {
  std::vector<uint8_t> farewell;
  Status why;
  const Clock::time_point now = Clock::now();
  switch (side_->poll(&farewell, &why)) {
    case side::PeerState::kOpen:
      return;
    case side::PeerState::kLost:
      return fail(Status::remote("lost peer " + peer_ + ": " + why.message()));
    case side::PeerState::kFarewell:
      if (!peer_closed_) {
        if (!decodeFarewell(farewell, &peer_sent_)) {
          return fail(Status::remote("peer " + peer_ + " sent a bad farewell"));
        }
        peer_closed_ = true;
        farewell_at_ = now;
        delivered_at_farewell_ = delivered_;
      }
      break;
  }
  bool sending = false;
  bool receiving = false;
  for (const std::shared_ptr<Op>& op : active_) {
    sending = sending || op->is_send;
    receiving = receiving || !op->is_send;
  }
  const std::string closed = "peer " + peer_ + " closed the connection";
  if (!sending && delivered_ >= peer_sent_) return fail(Status::remote(closed), /*quiet=*/true);
  // The grace runs only while a request of ours waits and nothing lands: a caller that posts
  // its receives slowly still gets every message the peer sent before it closed.
  if ((!receiving && !sending) || delivered_ != delivered_at_farewell_) {
    farewell_at_ = now;
    delivered_at_farewell_ = delivered_;
  }
  if (msSince(farewell_at_, now) >= kFarewellGraceMs) {
    fail(Status::remote(closed + (sending ? " with sends of ours pending" : "") + "; " +
                        std::to_string(delivered_) + " of its " + std::to_string(peer_sent_) +
                        " messages arrived"));
  }
}

void Core::checkTimeouts() {
  if (params_.io_timeout_ms <= 0) return;
  const Clock::time_point now = Clock::now();
  for (const std::shared_ptr<Op>& op : active_) {
    // A receive counts only once a message is under way: idle time between messages is fine.
    if (!op->is_send && op->outstanding == 0) continue;
    if (msSince(op->last_progress, now) < params_.io_timeout_ms) continue;
    const std::string limit = " within the I/O timeout (TALLY_TIMEOUT_MS, " +
                              std::to_string(params_.io_timeout_ms) + " ms)";
    if (op->is_flush) {
      return fail(Status::timeout("ofi read-back (iflush) on the connection to peer " +
                                  peer_ + " did not complete" + limit));
    }
    if (op->is_send) {
      return fail(Status::timeout("peer " + peer_ + " took none of a " +
                                  std::to_string(op->size) + "-byte message" + limit +
                                  ": it is stuck or not receiving"));
    }
    return fail(Status::timeout("peer " + peer_ +
                                " began a message and sent nothing "
                                "more" +
                                limit));
  }
}

void Core::sleep() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!new_ops_.empty() || stop_ || failed_) return;
    sleeping_ = true;
  }
  pollfd fds[2] = {{event_fd_, POLLIN, 0}, {endpoint_->waitFd(), POLLIN, 0}};
  nfds_t count = 1;
  // While an operation of ours is under way, wake every millisecond whatever the wait
  // descriptor says: with manual progress, data moves only in progress calls, and a provider's
  // descriptor need not cover every step (an outgoing socket becoming writable, say).
  int timeout_ms = inFlight() ? 1 : static_cast<int>(kWatchMs);
  if (!to_post_.empty()) {
    timeout_ms = 0;  // the send queue was full: go round again soon
  } else if (endpoint_->waitFd() >= 0) {
    fid* queue = &endpoint_->cq()->fid;
    if (fi_trywait(endpoint_->domain()->fabric.get(), &queue, 1) == FI_SUCCESS) {
      count = 2;
    } else {
      timeout_ms = 0;  // completions are pending
    }
  } else {
    timeout_ms = 1;  // no wait object: look at the queue every millisecond
  }
  if (timeout_ms > 0) ::poll(fds, count, timeout_ms);
  std::lock_guard<std::mutex> lock(mu_);
  sleeping_ = false;
  uint64_t drained = 0;
  ssize_t got = ::read(event_fd_, &drained, sizeof(drained));
  (void)got;
}

}  // namespace tally::transport::ofi
