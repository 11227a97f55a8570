// The CollClient's keeper thread: reducer failover (docs/failover.md). Links report a lost
// reducer and relayed failover messages into the inbox; this thread alone runs the membership
// changes: it drops the reducer, tells rank 0 (or, on rank 0, the coordinator), freezes and
// reports on a proposal, applies decisions (placing the lost reducer's slices again), pings
// silent reducers and drops the ones that stay silent.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cinttypes>

#include "common/log.h"
#include "worker_client/coll_client_impl.h"
#include "worker_client/coordinator.h"
#include "worker_client/link.h"

namespace tally::worker_client {
namespace wire = protocol::wire;

namespace {

constexpr int64_t kNsPerMs = 1000000;

// The keeper's tick: often enough to ping on time and to notice a silent reducer within a few
// percent of TALLY_REDUCER_TIMEOUT_MS, rarely enough to cost nothing. With a timeout of 0 nothing
// is pinged: the tick only bounds the waits of a membership change and, without a progress
// thread, how late an idle communicator reads a lost reducer's hang-up.
int64_t tickMs(int64_t reducer_timeout_ms) {
  if (reducer_timeout_ms == 0) return 100;
  return std::clamp<int64_t>(reducer_timeout_ms / 8, 5, 100);
}

}  // namespace

void CollClientImpl::linkLost(uint32_t slot, const Status& why) {
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    if (keeper_stop_) return;
    FailoverEvent ev;
    ev.kind = FailoverEvent::Kind::kLinkLost;
    ev.slot = slot;
    ev.why = why;
    inbox_.push_back(std::move(ev));
  }
  inbox_cv_.notify_one();
}

uint32_t CollClientImpl::relayLimit() const {
  // Between two decisions a slot carries to a rank at most: every rank's Suspect of each other
  // slot and its Report (to rank 0), rank 0's Propose, Decide and a join's Void, and late
  // copies of the epoch before; kept generous, as all it must do is bound a flood.
  const uint64_t slots = relays_since_decision_.size();
  return static_cast<uint32_t>(std::min<uint64_t>(
      UINT32_MAX, static_cast<uint64_t>(nranks_) * (2 * slots + 8) + 64));
}

void CollClientImpl::relayed(uint32_t slot, const wire::Relay& relay) {
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    if (keeper_stop_ || slot >= relays_since_decision_.size()) return;
    // Relays are sealed by the ranks (relay_seal.h), but a reducer that holds the job token can
    // replay genuine ones, each costing an HMAC and a queue entry. More than the ranks can have
    // sent since the last decision drops the reducer, and nothing more of its is queued.
    const uint32_t count = ++relays_since_decision_[slot];
    const uint32_t limit = relayLimit();
    FailoverEvent ev;
    ev.slot = slot;
    if (count <= limit) {
      ev.kind = FailoverEvent::Kind::kRelay;
      ev.relay = relay;
    } else if (count == limit + 1) {
      ev.kind = FailoverEvent::Kind::kLinkLost;
      ev.why = Status::remote("it relayed over " + std::to_string(limit) +
                              " failover messages since epoch " +
                              std::to_string(relays_counted_from_) + " was decided: replays");
    } else {
      return;
    }
    inbox_.push_back(std::move(ev));
  }
  inbox_cv_.notify_one();
}

void CollClientImpl::stopKeeper() {
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    keeper_stop_ = true;
  }
  inbox_cv_.notify_one();
  if (keeper_.joinable() && keeper_.get_id() != std::this_thread::get_id()) {
    keeper_.join();
    endJoins();  // the keeper's, now that it is gone: a join's thread must end before the client
  }
}

bool CollClientImpl::changeUnderWay() const {
  return waiting_since_ns_ != 0 || (coordinator_ && coordinator_->roundOpen()) ||
         suspicionPending();
}

void CollClientImpl::keeperLoop() {
  const auto tick = std::chrono::milliseconds(tickMs(options_.reducer_timeout_ms));
  std::deque<FailoverEvent> events;
  for (;;) {
    {
      // With no progress thread, relayed messages are read only when someone polls: while a
      // change is agreed the keeper polls every millisecond, so each hop costs no tick.
      const bool fast = shared_->poller != nullptr && changeUnderWay();
      std::unique_lock<std::mutex> lock(inbox_mu_);
      inbox_cv_.wait_for(lock, fast ? std::chrono::milliseconds(1) : tick,
                         [&] { return keeper_stop_ || !inbox_.empty(); });
      if (keeper_stop_) return;
      events.swap(inbox_);
    }
    const bool failed = shared_->failed.load(std::memory_order_acquire) || closing();
    for (FailoverEvent& ev : events) {
      if (!failed) handleEvent(ev);
    }
    events.clear();
    if (failed) continue;
    const int64_t now = nowNs();
    heartbeat(now);
    checkRounds(now);
    dropRetired();
    compactPlacement();
    if (!shared_->failed.load(std::memory_order_acquire)) offerJoins(now);
    // With no progress thread, results (and a dead reducer's hang-up) are read only when NCCL
    // tests: an idle communicator must notice a lost reducer too.
    if (shared_->poller != nullptr) shared_->poller->poll();
  }
}

void CollClientImpl::handleEvent(FailoverEvent& ev) {
  switch (ev.kind) {
    case FailoverEvent::Kind::kLinkLost:
      return handleLinkLost(ev.slot, ev.why);
    case FailoverEvent::Kind::kRelay:
      if (!relay_seal_.opens(ev.relay)) {
        // No rank made it: the reducer that carried it forged or changed it. It is dropped
        // like a lost one, through the agreement; the message is not looked at.
        return handleLinkLost(
            ev.slot, Status::remote("it relayed a " +
                                    std::string(wire::controlKindName(ev.relay.control.kind)) +
                                    " as rank " + std::to_string(ev.relay.from) +
                                    "'s that does not carry that rank's seal"));
      }
      if (rank_ == 0 && ev.relay.from == 0) {
        TALLY_WARN_LIMITED(warnings_, "CollNet rank 0: ignoring a %s relayed as its own",
                           wire::controlKindName(ev.relay.control.kind));
        return;
      }
      return handleControl(ev.relay.from, ev.relay.control);
    case FailoverEvent::Kind::kJoined:
      return onJoined(ev);
  }
}

uint32_t CollClientImpl::liveLinks() {
  uint32_t n = 0;
  for (uint32_t s = 0; s < suspected_.size(); ++s) {
    if (placement_.live(s) && !suspected_[s]) ++n;
  }
  return n;
}

void CollClientImpl::handleLinkLost(uint32_t slot, const Status& why) {
  if (slot >= links_.size() || suspected_[slot] || !placement_.live(slot)) return;
  suspected_[slot] = true;
  std::shared_ptr<Link> link = linkSnapshot()[slot];
  TALLY_INFO(log::kColl, "CollNet rank %d: reducer %s (slot %u) lost: %s", rank_,
             link->address().c_str(), slot, why.message().c_str());
  link->retire(why.message(), false);
  lost_reasons_[slot] = why.message();
  if (liveLinks() == 0) return failOver("no reducer is left");
  wire::Control c;
  c.kind = wire::ControlKind::kSuspect;
  c.change = wire::Change::kLost;
  c.epoch = decided_epoch_;
  c.slot = slot;
  c.address = link->address();
  c.reason = why.message();
  if (suspect_since_ns_ == 0) suspect_since_ns_ = nowNs();
  sendToRankZero(c);
}

void CollClientImpl::compactPlacement() {
  // The keeper alone changes the placement, so it may look without the lock.
  constexpr size_t kFewChanges = 8;
  if (placement_.changes().size() <= kFewChanges) return;
  std::lock_guard<std::mutex> lock(post_mu_);
  // The oldest call a slice may still be placed for: one whose record someone besides calls_
  // holds (its request, a link's books, a parked or orphaned slice).
  uint64_t first = next_seq_;
  for (const std::shared_ptr<Call>& c : calls_) {
    if (c.use_count() > 1) first = std::min(first, c->seq);
  }
  placement_.compact(first);
}

bool CollClientImpl::suspicionPending() const {
  for (uint32_t s = 0; s < suspected_.size(); ++s) {
    if (suspected_[s] && placement_.live(s)) return true;
  }
  return false;
}

void CollClientImpl::broadcastRelay(const wire::Control& c) {
  wire::Relay relay;
  relay.control = c;
  if (Status st = relay_seal_.seal(static_cast<uint32_t>(rank_), &relay); !st.isOk()) {
    return failOver("cannot seal a failover message: " + st.message());
  }
  const wire::Frame frame = wire::encodeRelay(relay);
  const std::vector<std::shared_ptr<Link>> links = linkSnapshot();
  for (uint32_t s = 0; s < links.size(); ++s) {
    if (suspected_[s] || !placement_.live(s) || links[s]->ended()) continue;
    links[s]->sendControl(frame);
  }
}

void CollClientImpl::sendToRankZero(const wire::Control& c) {
  if (rank_ == 0) return handleControl(0, c);
  broadcastRelay(c);
}

void CollClientImpl::sendToAll(const wire::Control& c) {
  broadcastRelay(c);
  handleControl(0, c);
}

void CollClientImpl::handleControl(uint32_t from, const wire::Control& c) {
  switch (c.kind) {
    case wire::ControlKind::kSuspect:
      if (rank_ != 0 || c.change != wire::Change::kLost || c.slot >= links_.size()) return;
      if (c.epoch < joined_at_[c.slot]) return;  // about the slot's reducer before this one
      coordinator_->suspect(c.slot, c.reason);
      if (coordinator_->joinRoundOpen()) {
        // A loss goes first: the join is called off (and may be offered again later).
        if (std::optional<wire::Control> d =
                coordinator_->voidJoin("reducer " + c.address + " was lost meanwhile")) {
          round_since_ns_ = 0;
          sendToAll(*d);
        }
      }
      return proposeNext();
    case wire::ControlKind::kReport:
      if (rank_ != 0) return;
      return onReport(from, c);
    case wire::ControlKind::kPropose:
    case wire::ControlKind::kDecide:
      // Only rank 0 decides; the reducer writes the true sender into every relay.
      if (from != 0) {
        TALLY_WARN_LIMITED(warnings_, "CollNet rank %d: ignoring a %s from rank %u (only rank 0 "
                           "proposes and decides)", rank_, wire::controlKindName(c.kind), from);
        return;
      }
      return c.kind == wire::ControlKind::kPropose ? onPropose(c) : onDecide(c);
  }
}

void CollClientImpl::proposeNext() {
  if (rank_ != 0) return;
  std::optional<wire::Control> p = coordinator_->propose();
  if (!p) return;
  round_since_ns_ = nowNs();
  sendToAll(*p);
}

void CollClientImpl::onReport(uint32_t from, const wire::Control& c) {
  bool ignored = false;
  std::optional<wire::Control> d = coordinator_->report(from, c, &ignored);
  if (!d) return;
  round_since_ns_ = 0;
  sendToAll(*d);
  proposeNext();
}

void CollClientImpl::onPropose(const wire::Control& c) {
  if (c.epoch <= decided_epoch_ || c.epoch == proposed_epoch_) return;  // stale, or a copy
  if (c.epoch != decided_epoch_ + 1 || c.slot >= links_.size()) {
    TALLY_WARN_LIMITED(warnings_, "CollNet rank %d: ignoring a proposal for epoch %u (slot %u); "
                       "epoch %u is the last decided", rank_, c.epoch, c.slot, decided_epoch_);
    return;
  }
  proposed_epoch_ = c.epoch;
  if (suspect_since_ns_ != 0) suspect_since_ns_ = nowNs();  // rank 0 goes on: count afresh
  if (c.change == wire::Change::kJoin) {
    // Posting goes on while this rank opens the link; it reports once joined (onJoined).
    waiting_since_ns_ = nowNs();
    return startJoin(c);
  }
  wire::Control r;
  r.kind = wire::ControlKind::kReport;
  r.change = c.change;
  r.epoch = c.epoch;
  r.slot = c.slot;
  {
    // No call is posted until the decision: K is then past every rank's last call. First, so
    // that no post puts a slice in the lost link's books after they are taken below.
    std::lock_guard<std::mutex> lock(post_mu_);
    hold_ = true;
    r.next_call = next_seq_;
  }
  std::shared_ptr<Link> link = linkSnapshot()[c.slot];
  if (!suspected_[c.slot]) {
    // Another rank dropped it: this rank closes its connection too, so that nothing more comes
    // from it after this report.
    suspected_[c.slot] = true;
    lost_reasons_[c.slot] = c.reason;
    link->retire("dismissed: " + c.reason, true);
  }
  orphans_.clear();
  orphans_ = link->takeOrphans(&r.commit);
  waiting_since_ns_ = nowNs();
  sendToRankZero(r);
}

void CollClientImpl::onDecide(const wire::Control& c) {
  if (c.epoch <= decided_epoch_) return;  // a copy
  if (c.epoch != decided_epoch_ + 1 || c.epoch != proposed_epoch_ || c.slot >= links_.size()) {
    TALLY_WARN_LIMITED(warnings_, "CollNet rank %d: ignoring a decision for epoch %u (slot %u); "
                       "epoch %u is the last decided, %u the last proposed", rank_, c.epoch,
                       c.slot, decided_epoch_, proposed_epoch_);
    return;
  }
  waiting_since_ns_ = 0;
  decided_epoch_ = c.epoch;
  if (suspect_since_ns_ != 0) suspect_since_ns_ = nowNs();
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    std::fill(relays_since_decision_.begin(), relays_since_decision_.end(), 0);
    relays_counted_from_ = c.epoch;
  }
  switch (c.change) {
    case wire::Change::kLost:
      return applyLost(c);
    case wire::Change::kFail:
      if (c.slot < suspected_.size()) {
        suspected_[c.slot] = true;  // out with the communicator: listed with the others
        if (lost_reasons_[c.slot].empty()) lost_reasons_[c.slot] = "lost";
      }
      return failOver(c.reason);
    case wire::Change::kJoin:
      return applyJoin(c);
    case wire::Change::kVoid: {
      TALLY_INFO(log::kColl, "CollNet communicator %s: epoch %u passes without %s joining: %s",
                 comm_.toString().c_str(), c.epoch, c.address.c_str(), c.reason.c_str());
      joinOutcome(c.slot, false);
      // A join still opening finishes on its own thread and is reaped when it reports
      // (onJoined): waiting for it here could hold up a loss behind it.
      dropJoin();
      std::lock_guard<std::mutex> lock(post_mu_);
      hold_ = false;
      return;
    }
  }
}

void CollClientImpl::applyLost(const wire::Control& c) {
  const std::string why = lost_reasons_[c.slot].empty() ? c.reason : lost_reasons_[c.slot];
  const std::string address = linkSnapshot()[c.slot]->address();
  lost_reasons_[c.slot] = why;
  std::string cannot;  // why this rank cannot go on, if it cannot
  size_t again = 0;
  std::vector<SliceTask> prompt;  // sent at once, not at the boundary
  size_t at_once = 0;
  uint32_t live = 0;
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    MembershipChange change;
    change.kind = MembershipChange::Kind::kLost;
    change.epoch = c.epoch;
    change.slot = c.slot;
    change.boundary = c.next_call;
    if (!placement_.apply(change)) {
      cannot = "epoch " + std::to_string(c.epoch) + " loses slot " + std::to_string(c.slot) +
               ", which is not live here";
    }
    for (LedgerEntry& e : orphans_) {
      const SliceTask& t = e.task;
      const bool committed = t.epoch == 0 ? t.call->seq < c.commit.calls
                                          : t.epoch <= c.commit.recovery_epoch;
      if (committed) {
        // Some rank had the lost reducer's Commit for it, so every rank has landed it.
        if (!e.landed && cannot.empty()) {
          cannot = "call " + std::to_string(t.call->seq) + " slice " + std::to_string(t.slice) +
                   " was committed by the lost reducer but never reached this rank";
        }
        // An early call's slice was counted done when it landed.
        if (!t.call->early) completeSlice(t.call.get());
        continue;
      }
      // An early call is sent again from its copy: its input is intact however the result came.
      if (e.touched && t.call->inPlace() && !t.call->early && cannot.empty()) {
        cannot = "in-place call " + std::to_string(t.call->seq) + ": the result of slice " +
                 std::to_string(t.slice) + " from lost reducer " + address +
                 " had already overwritten this rank's input, so it cannot be summed again "
                 "(in-place calls survive a reducer's loss only before its results arrive)";
      }
      SliceTask again_task = t;
      again_task.epoch = 0;  // its class comes from the placement when it goes out
      again_task.prompt = false;
      // An early call that had this result is done, perhaps given back to the caller: the
      // result that comes again is dropped.
      if (t.call->early && e.landed) again_task.drop_result = true;
      if (sentAtOnce(t, c.first_call)) {
        prompt.push_back(std::move(again_task));
      } else {
        parked_[c.epoch].push_back(std::move(again_task));
      }
      ++again;
    }
    orphans_.clear();
    boundaries_.push_back(Boundary{c.epoch, c.next_call});
    catch_up_until_ = std::max(catch_up_until_, c.next_call);
    hold_ = false;
    live = placement_.liveCount();
    if (cannot.empty()) {
      at_once = prompt.size();
      sendPromptLocked(c.epoch, std::move(prompt));
      flushBoundariesLocked();
    }
  }
  if (!cannot.empty()) return failOver(cannot);
  if (rank_ == 0) {
    // Its own address, restarted, is worth a look soon; backing off starts from here.
    offer_backoff_ms_[c.slot] = 0;
    offer_after_ns_[c.slot] = nowNs() + options_.rejoin_interval_ms * kNsPerMs;
  }
  TALLY_WARN("CollNet communicator %s: reducer %s (slot %u) lost: %s; continues on %u of %zu "
             "reducers from call %" PRIu64 " (epoch %u; %zu slices summed again, %zu of them at "
             "once)",
             comm_.toString().c_str(), address.c_str(), c.slot, why.c_str(), live, links_.size(),
             c.next_call, c.epoch, again, at_once);
}

bool CollClientImpl::sentAtOnce(const SliceTask& t, uint64_t first_call) const {
  // An early call's slice, below F: every rank posted the call. A normal slice, or one sent
  // promptly before, is then in the lost reducer's books on every rank (unless committed, which
  // P and RC tell alike); a recovery slice sent at its boundary is only once every rank reached
  // that boundary.
  if (!t.call->early || t.call->seq >= first_call) return false;
  return t.epoch == 0 || t.prompt || placement_.boundaryOf(t.epoch) <= first_call;
}

void CollClientImpl::sendPromptLocked(uint32_t epoch, std::vector<SliceTask> tasks) {
  sortForSending(&tasks);
  for (SliceTask& t : tasks) {
    const Placement p = placement_.place(t.call->seq, t.slice, epoch);
    if (!p.placed) {
      // Every slot is empty: the keeper is failing the communicator.
      parked_[epoch].push_back(std::move(t));
      continue;
    }
    t.epoch = epoch;
    t.prompt = true;
    links_[p.slot]->post(std::move(t));
  }
}

std::string CollClientImpl::lostText() const {
  std::string text;
  for (uint32_t s = 0; s < suspected_.size(); ++s) {
    if (placement_.live(s) && !suspected_[s]) continue;
    text += (text.empty() ? "" : ", ") + addresses_[s] + " (" +
            (lost_reasons_[s].empty() ? std::string("lost") : lost_reasons_[s]) + ")";
  }
  return text;
}

namespace {

// The rank a reducer said it lost, from its Error's reason ("rank 3 (peer 10.0.0.4:5000) was
// lost: ..." or "... gave up: ..."; reducer/session.cc); -1 for any other reason.
int64_t rankLostIn(const std::string& reason) {
  const size_t at = reason.find("rank ");
  if (at == std::string::npos) return -1;
  size_t end = at + 5;
  int64_t rank = 0;
  while (end < reason.size() && std::isdigit(static_cast<unsigned char>(reason[end])) &&
         rank < (int64_t{1} << 40)) {
    rank = rank * 10 + (reason[end++] - '0');
  }
  if (end == at + 5 || reason.compare(end, 7, " (peer ") != 0) return -1;
  const bool lost = reason.find(") was lost", end) != std::string::npos ||
                    reason.find(") gave up", end) != std::string::npos;
  return lost ? rank : -1;
}

}  // namespace

void CollClientImpl::failOver(const std::string& why) {
  std::string headline = why;
  if (liveLinks() == 0) {
    // Every reducer lost the same rank: that rank is what failed (a worker that died, or its
    // network), not the reducers, which each said so.
    int64_t rank = -1;
    bool same = true;
    for (uint32_t s = 0; s < suspected_.size() && same; ++s) {
      if (!placement_.live(s)) continue;  // lost before, for its own reason
      const int64_t r = rankLostIn(lost_reasons_[s]);
      same = r >= 0 && (rank < 0 || r == rank);
      rank = r;
    }
    if (same && rank >= 0) {
      headline = "rank " + std::to_string(rank) +
                 " was lost to every reducer (the worker died or lost its network), so no "
                 "reducer is left";
    }
  }
  const std::string lost = lostText();
  fail(Status::remote("CollNet communicator " + comm_.toString() + " failed: " + headline +
                      (lost.empty() ? "" : "; reducers lost: " + lost)));
}

void CollClientImpl::heartbeat(int64_t now_ns) {
  // 0: only a failed connection drops a reducer, so silence needs no Ping.
  if (options_.reducer_timeout_ms == 0) return;
  const int64_t timeout_ns = options_.reducer_timeout_ms * kNsPerMs;
  const int64_t interval_ns = std::max<int64_t>(timeout_ns / 4, kNsPerMs);
  snapshotLinks(&keeper_links_);
  for (uint32_t s = 0; s < keeper_links_.size(); ++s) {
    Link& link = *keeper_links_[s];
    if (suspected_[s] || !placement_.live(s) || link.ended()) continue;
    const int64_t heard = link.lastHeardNs();
    if (ping_sent_ns_[s] != 0 && ping_sent_ns_[s] <= heard) ping_sent_ns_[s] = 0;
    const int64_t silent = now_ns - heard;
    if (silent >= timeout_ns) {
      handleLinkLost(s, Status::timeout("nothing from reducer " + link.address() + " for " +
                                        std::to_string(silent / kNsPerMs) +
                                        " ms, not even a Pong (TALLY_REDUCER_TIMEOUT_MS)"));
      continue;
    }
    if (silent >= interval_ns && ping_sent_ns_[s] == 0) {
      ping_sent_ns_[s] = now_ns;
      link.sendControl(wire::encodePing(wire::Ping{++ping_token_}));
    }
  }
}

void CollClientImpl::checkRounds(int64_t now_ns) {
  const int64_t bound_ns = std::max<int64_t>(options_.reducer_timeout_ms, 1000) * kNsPerMs;
  // A join's reports wait for its opening (bounded by the same bound): a late one calls the
  // join off rather than the communicator.
  if (rank_ == 0 && coordinator_->joinRoundOpen() && round_since_ns_ != 0 &&
      now_ns - round_since_ns_ > 2 * bound_ns) {
    if (std::optional<wire::Control> d = coordinator_->voidJoin("a rank did not join in time")) {
      round_since_ns_ = 0;
      sendToAll(*d);
    }
    return proposeNext();
  }
  if (rank_ == 0 && coordinator_->roundOpen() && !coordinator_->joinRoundOpen() &&
      round_since_ns_ != 0 && now_ns - round_since_ns_ > bound_ns) {
    std::string missing;
    for (uint32_t r : coordinator_->missingReports()) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    return failOver("no report on epoch " + std::to_string(coordinator_->decidedEpoch() + 1) +
                    " from rank " + missing + " within " +
                    std::to_string(bound_ns / kNsPerMs) + " ms");
  }
  // A Suspect of this rank's that rank 0 leaves unproposed: its way to rank 0 is lost (every
  // relay of it swallowed), and the slices in the dropped link's books are under no other bound.
  if (suspect_since_ns_ != 0 && !suspicionPending()) suspect_since_ns_ = 0;
  if (suspect_since_ns_ != 0 && waiting_since_ns_ == 0 && rank_ != 0 &&
      now_ns - suspect_since_ns_ > 3 * bound_ns) {
    return failOver("no proposal from rank 0 within " + std::to_string(3 * bound_ns / kNsPerMs) +
                    " ms of this rank's Suspect, nor since the last change");
  }
  // Rank 0 gives up first and tells the reducers; a rank still waiting long after that has lost
  // its way to rank 0.
  if (waiting_since_ns_ != 0 && now_ns - waiting_since_ns_ > 3 * bound_ns) {
    failOver("no decision on epoch " + std::to_string(proposed_epoch_) + " from rank 0 within " +
             std::to_string(3 * bound_ns / kNsPerMs) + " ms");
  }
}

}  // namespace tally::worker_client
