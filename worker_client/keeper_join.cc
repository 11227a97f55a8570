// SPDX-License-Identifier: Apache-2.0
// Taking a reducer into a running communicator (docs/failover.md, "Join"): rank 0 finds one for
// an empty slot (the slot's own address restarted, or a spare), every rank opens a link to it
// while it goes on posting, and the decision installs it at a boundary from which calls are
// placed over it again. All on the keeper thread, but for the link's opening, which may wait
// for the slowest rank and so runs on a thread of the join's own.
#include <algorithm>
#include <cinttypes>

#include "common/log.h"
#include "worker_client/coll_connect.h"
#include "worker_client/coordinator.h"
#include "worker_client/keeper.h"
#include "worker_client/offer_backoff.h"

namespace tally::worker_client {
namespace wire = protocol::wire;

namespace {

// A probe that finds nothing listening costs rank 0's keeper this long at most.
constexpr int kProbeMs = 200;

}  // namespace

void Keeper::offerJoins(int64_t now_ns) {
  if (rank_ != 0 || options_.rejoin_interval_ms <= 0 || coordinator_->roundOpen() || join_ ||
      now_ns < next_offer_ns_) {
    return;
  }
  next_offer_ns_ = now_ns + options_.rejoin_interval_ms * kNsPerMs;
  for (uint32_t s = 0; s < slots(); ++s) {
    if (posting_->live(s) || !coordinator_->idle() || now_ns < offer_after_ns_[s]) continue;
    // The slot's own reducer, restarted, or a spare that no live slot uses.
    std::vector<std::string> candidates{options_.reducers[s]};
    for (const std::string& spare : options_.spare_reducers) {
      bool used = false;
      for (uint32_t t = 0; t < addresses_.size(); ++t) {
        used = used || (posting_->live(t) && addresses_[t] == spare);
      }
      if (!used && spare != options_.reducers[s]) candidates.push_back(spare);
    }
    const std::string& address = candidates[offer_cursor_[s]++ % candidates.size()];
    if (!acceptsConnections(address, kProbeMs)) continue;
    TALLY_INFO(log::kColl, "CollNet communicator %s: %s answers; proposing it for slot %u",
               settings_.comm.toString().c_str(), address.c_str(), s);
    coordinator_->offerJoin(s, address);
    proposeNext();
    return;
  }
}

void Keeper::joinOutcome(uint32_t slot, bool joined) {
  if (rank_ != 0 || slot >= offer_backoff_ms_.size()) return;
  offer_backoff_ms_[slot] =
      nextOfferBackoffMs(offer_backoff_ms_[slot], options_.rejoin_interval_ms, joined);
  offer_after_ns_[slot] = nowNs() + offer_backoff_ms_[slot] * kNsPerMs;
}

void Keeper::startJoin(const wire::Control& c) {
  dropJoin();
  join_ = std::make_unique<Join>();
  join_->id = ++last_join_id_;
  join_->epoch = c.epoch;
  join_->slot = c.slot;
  join_->address = c.address;
  JoinRequest req;
  req.network = options_.network.get();
  req.address = c.address;
  req.raw = settings_.link.raw;
  req.token = &settings_.link.token;
  req.hello = settings_.link.hello;
  req.hello.reducer_index = c.slot;
  req.hello.epoch = c.epoch;
  // Bounded like a report: a reducer that accepts but never answers (frozen) must not hold
  // the communicator's changes for the whole connect timeout.
  const int64_t bound_ms =
      std::min<int64_t>(options_.timeouts.connect_ms,
                        std::max<int64_t>(options_.reducer_timeout_ms, 1000));
  req.deadline = Clock::now() + std::chrono::milliseconds(bound_ms);
  req.cancel = &join_->cancel;
  Join* join = join_.get();
  try {
    join_->thread = std::thread([this, join, req] {
      std::unique_ptr<transport::Connection> conn;
      Fd fd;
      int window = options_.window;
      Status st = joinReducer(req, &conn, &fd, &window);
      if (st.isOk()) {
        join->link = posting_->newLink(join->slot, join->address, std::move(conn),
                                       std::move(fd), std::min(options_.window, window));
      }
      Event ev;
      ev.kind = Event::Kind::kJoined;
      ev.slot = join->slot;
      ev.why = st;
      ev.join = join->id;
      // Queued even once the keeper stopped: endJoins waits for this thread, not for the event.
      {
        std::lock_guard<std::mutex> lock(inbox_mu_);
        inbox_.push_back(std::move(ev));
      }
      inbox_cv_.notify_one();
    });
  } catch (const std::system_error& e) {
    join_.reset();
    onJoinedFailed(c, std::string("cannot start a thread to join it: ") + e.what());
  }
}

void Keeper::onJoinedFailed(const wire::Control& c, const std::string& why) {
  wire::Control r;
  r.kind = wire::ControlKind::kReport;
  r.change = wire::Change::kJoin;
  r.epoch = c.epoch;
  r.slot = c.slot;
  r.ok = false;
  r.reason = why;
  r.next_call = posting_->nextCall();
  waiting_since_ns_ = nowNs();
  sendToRankZero(r);
}

void Keeper::onJoined(const Event& ev) {
  const Status& st = ev.why;
  for (auto it = dropped_joins_.begin(); it != dropped_joins_.end(); ++it) {
    if ((*it)->id != ev.join) continue;
    // A join let go of while it opened: its thread has ended (this is its last word).
    std::unique_ptr<Join> dropped = std::move(*it);
    dropped_joins_.erase(it);
    closeJoin(*dropped, "the join was called off");
    return;
  }
  if (!join_ || join_->id != ev.join || join_->done) return;
  join_->done = true;
  if (join_->thread.joinable()) join_->thread.join();
  wire::Control c;
  c.epoch = join_->epoch;
  c.slot = join_->slot;
  if (join_->epoch != proposed_epoch_ || join_->epoch <= decided_epoch_) {
    dropJoin();  // decided meanwhile (void): nothing to report
    return;
  }
  if (!st.isOk()) {
    TALLY_INFO(log::kColl, "CollNet rank %d: could not join reducer %s: %s", rank_,
               join_->address.c_str(), st.toString().c_str());
    onJoinedFailed(c, st.message());
    return;
  }
  wire::Control r;
  r.kind = wire::ControlKind::kReport;
  r.change = wire::Change::kJoin;
  r.epoch = join_->epoch;
  r.slot = join_->slot;
  r.ok = true;
  // Joined: no call is posted until the decision, so its boundary is past every rank's.
  r.next_call = posting_->holdCalls();
  waiting_since_ns_ = nowNs();
  sendToRankZero(r);
}

void Keeper::dropJoin() {
  if (!join_) return;
  if (!join_->done) {
    // Still opening: told to give up, its thread reports when it ends, and is reaped then
    // (onJoined).
    join_->cancel.store(true, std::memory_order_release);
    dropped_joins_.push_back(std::move(join_));
    return;
  }
  closeJoin(*join_, "the join was called off");
  join_.reset();
}

void Keeper::closeJoin(Join& join, const char* why) {
  if (join.thread.joinable()) join.thread.join();
  if (join.link) {
    // Never started: closing it is enough.
    join.link->retire(why, false);
    posting_->keepRetired(std::move(join.link));
  }
}

void Keeper::endJoins() {
  // Every opening gives up at once (close() promises about 100 ms), not by its deadline.
  dropJoin();
  for (std::unique_ptr<Join>& dropped : dropped_joins_) {
    dropped->cancel.store(true, std::memory_order_release);
  }
  for (std::unique_ptr<Join>& dropped : dropped_joins_) {
    closeJoin(*dropped, "the communicator ended while it joined");
  }
  dropped_joins_.clear();
}

void Keeper::applyJoin(const wire::Control& c) {
  if (!join_ || !join_->done || !join_->link || join_->epoch != c.epoch) {
    return failOver("epoch " + std::to_string(c.epoch) + " takes reducer " + c.address +
                    " into slot " + std::to_string(c.slot) + ", which this rank has not joined");
  }
  std::shared_ptr<Link> link = std::move(join_->link);
  join_.reset();
  Status started = posting_->startLink(link);
  if (!started.isOk()) {
    link->retire(started.message(), false);
    posting_->keepRetired(std::move(link));
    return failOver("cannot start the link to reducer " + c.address + ": " + started.message());
  }
  const uint32_t live = posting_->installLink(c, std::move(link));
  suspected_[c.slot] = false;
  lost_reasons_[c.slot].clear();
  joined_at_[c.slot] = c.epoch;
  ping_sent_ns_[c.slot] = 0;
  addresses_[c.slot] = c.address;
  joined_ns_[c.slot] = nowNs();
  joinOutcome(c.slot, true);
  TALLY_WARN("CollNet communicator %s: reducer %s joined as slot %u; continues on %u of %u "
             "reducers from call %" PRIu64 " (epoch %u)",
             settings_.comm.toString().c_str(), c.address.c_str(), c.slot, live, slots(),
             c.next_call, c.epoch);
}

}  // namespace tally::worker_client
