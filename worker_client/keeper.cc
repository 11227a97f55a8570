// SPDX-License-Identifier: Apache-2.0
// The keeper (keeper.h): its thread, the losses, and the agreement on each change. Joins are in
// keeper_join.cc.
#include "worker_client/keeper.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cinttypes>

#include "common/log.h"
#include "worker_client/coordinator.h"
#include "worker_client/offer_backoff.h"

namespace tally::worker_client {
namespace wire = protocol::wire;

namespace {

// The keeper's tick: often enough to ping on time and to notice a silent reducer within a few
// percent of TALLY_REDUCER_TIMEOUT_MS, rarely enough to cost nothing. With a timeout of 0 nothing
// is pinged: the tick only bounds the waits of a membership change and, without a progress
// thread, how late an idle communicator reads a lost reducer's hang-up.
int64_t tickMs(int64_t reducer_timeout_ms) {
  if (reducer_timeout_ms == 0) return 100;
  return std::clamp<int64_t>(reducer_timeout_ms / 8, 5, 100);
}

// How long after a reducer dropped as slow is taken back two slow windows drop it again.
constexpr int64_t kSlowProbationNs = 10000 * kNsPerMs;

SlowReducers::Settings slowSettings(const CollOptions& options) {
  SlowReducers::Settings s;
  // With a reducer timeout of 0 only a failed connection drops a reducer.
  s.factor = options.reducer_timeout_ms > 0 ? options.slow_reducer_factor : 0;
  return s;
}

}  // namespace

Keeper::Keeper(const CollOptions& options, KeeperSettings settings,
               std::shared_ptr<Shared> shared, Posting* posting)
    : options_(options),
      settings_(std::move(settings)),
      rank_(settings_.rank),
      shared_(std::move(shared)),
      posting_(posting),
      relays_since_decision_(options.reducers.size(), 0),
      suspected_(options.reducers.size(), false),
      lost_reasons_(options.reducers.size()),
      joined_at_(options.reducers.size(), 0),
      running_(options.reducers.size(), false),
      ping_sent_ns_(options.reducers.size(), 0),
      addresses_(options.reducers),
      offer_cursor_(options.reducers.size(), 0),
      offer_after_ns_(options.reducers.size(), 0),
      offer_backoff_ms_(options.reducers.size(), 0),
      slow_(slowSettings(options)),
      slow_samples_(options.reducers.size()),
      slow_wait_ms_(options.reducers.size(), 0),
      joined_ns_(options.reducers.size(), 0),
      slow_lost_(options.reducers.size(), false) {
  if (rank_ == 0) {
    coordinator_ =
        std::make_unique<Coordinator>(settings_.nranks, options.reducers, options.min_reducers);
  }
}

Keeper::~Keeper() { stop(); }

Status Keeper::start() {
  try {
    thread_ = std::thread([this] { loop(); });
  } catch (const std::system_error& e) {
    return Status::system(std::string("cannot start the CollNet keeper thread: ") + e.what());
  }
  return Status::ok();
}

void Keeper::push(Event ev) {
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    if (stop_) return;
    inbox_.push_back(std::move(ev));
  }
  inbox_cv_.notify_one();
}

void Keeper::linkLost(uint32_t slot, const Status& why) {
  Event ev;
  ev.kind = Event::Kind::kLinkLost;
  ev.slot = slot;
  ev.why = why;
  push(std::move(ev));
}

uint32_t Keeper::relayLimit() const {
  // Between two decisions a slot carries to a rank at most: every rank's Suspect of each other
  // slot and its Report (to rank 0), rank 0's Propose, Decide and a join's Void, and late
  // copies of the epoch before; kept generous, as all it must do is bound a flood.
  const uint64_t slots = relays_since_decision_.size();
  return static_cast<uint32_t>(std::min<uint64_t>(
      UINT32_MAX, static_cast<uint64_t>(settings_.nranks) * (2 * slots + 8) + 64));
}

void Keeper::relayed(uint32_t slot, const wire::Relay& relay) {
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    if (stop_ || slot >= relays_since_decision_.size()) return;
    // Relays are sealed by the ranks (relay_seal.h), but a reducer that holds the job token can
    // replay genuine ones, each costing an HMAC and a queue entry. More than the ranks can have
    // sent since the last decision drops the reducer, and nothing more of its is queued.
    const uint32_t count = ++relays_since_decision_[slot];
    const uint32_t limit = relayLimit();
    Event ev;
    ev.slot = slot;
    if (count <= limit) {
      ev.kind = Event::Kind::kRelay;
      ev.relay = relay;
    } else if (count == limit + 1) {
      ev.kind = Event::Kind::kLinkLost;
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

void Keeper::stop() {
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    stop_ = true;
  }
  inbox_cv_.notify_one();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    thread_.join();
    endJoins();  // the keeper's, now that it is gone: a join's thread must end before the client
  }
}

bool Keeper::changeUnderWay() const {
  return waiting_since_ns_ != 0 || (coordinator_ && coordinator_->roundOpen()) ||
         suspicionPending();
}

void Keeper::loop() {
  const auto tick = std::chrono::milliseconds(tickMs(options_.reducer_timeout_ms));
  std::deque<Event> events;
  for (;;) {
    {
      // With no progress thread, relayed messages are read only when someone polls: while a
      // change is agreed the keeper polls every millisecond, so each hop costs no tick.
      const bool fast = shared_->poller != nullptr && changeUnderWay();
      std::unique_lock<std::mutex> lock(inbox_mu_);
      inbox_cv_.wait_for(lock, fast ? std::chrono::milliseconds(1) : tick,
                         [&] { return stop_ || !inbox_.empty(); });
      if (stop_) return;
      events.swap(inbox_);
    }
    const bool failed = shared_->failed.load(std::memory_order_acquire) || posting_->closing();
    for (Event& ev : events) {
      if (!failed) handleEvent(ev);
    }
    events.clear();
    if (failed) continue;
    const int64_t now = nowNs();
    heartbeat(now);
    checkSlow(now);
    checkDrain(now);
    checkRounds(now);
    posting_->dropRetired();
    posting_->compactPlacement();
    if (!shared_->failed.load(std::memory_order_acquire)) offerJoins(now);
    // With no progress thread, results (and a dead reducer's hang-up) are read only when NCCL
    // tests: an idle communicator must notice a lost reducer too.
    if (shared_->poller != nullptr) shared_->poller->poll();
  }
}

void Keeper::handleEvent(Event& ev) {
  switch (ev.kind) {
    case Event::Kind::kLinkLost:
      return handleLinkLost(ev.slot, ev.why);
    case Event::Kind::kRelay:
      if (!settings_.seal.opens(ev.relay)) {
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
    case Event::Kind::kJoined:
      return onJoined(ev);
  }
}

uint32_t Keeper::liveLinks() const {
  uint32_t n = 0;
  for (uint32_t s = 0; s < suspected_.size(); ++s) {
    if (posting_->live(s) && !suspected_[s]) ++n;
  }
  return n;
}

void Keeper::handleLinkLost(uint32_t slot, const Status& why, bool retire) {
  if (slot >= slots() || suspected_[slot] || !posting_->live(slot)) return;
  suspected_[slot] = true;
  std::shared_ptr<Link> link = posting_->linkAt(slot);
  TALLY_INFO(log::kColl, "CollNet rank %d: reducer %s (slot %u) lost: %s", rank_,
             link->address().c_str(), slot, why.message().c_str());
  running_[slot] = !retire;
  if (retire) link->retire(why.message(), false);
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

bool Keeper::suspicionPending() const {
  for (uint32_t s = 0; s < suspected_.size(); ++s) {
    if (suspected_[s] && posting_->live(s)) return true;
  }
  return false;
}

void Keeper::broadcastRelay(const wire::Control& c) {
  wire::Relay relay;
  relay.control = c;
  if (Status st = settings_.seal.seal(static_cast<uint32_t>(rank_), &relay); !st.isOk()) {
    return failOver("cannot seal a failover message: " + st.message());
  }
  const wire::Frame frame = wire::encodeRelay(relay);
  posting_->snapshotLinks(&links_);
  for (uint32_t s = 0; s < links_.size(); ++s) {
    if (suspected_[s] || !posting_->live(s) || links_[s]->ended()) continue;
    links_[s]->sendControl(frame);
  }
}

void Keeper::sendToRankZero(const wire::Control& c) {
  if (rank_ == 0) return handleControl(0, c);
  broadcastRelay(c);
}

void Keeper::sendToAll(const wire::Control& c) {
  broadcastRelay(c);
  handleControl(0, c);
}

void Keeper::handleControl(uint32_t from, const wire::Control& c) {
  switch (c.kind) {
    case wire::ControlKind::kSuspect:
      if (rank_ != 0 || c.change != wire::Change::kLost || c.slot >= slots()) return;
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

void Keeper::proposeNext() {
  if (rank_ != 0) return;
  std::optional<wire::Control> p = coordinator_->propose();
  if (!p) return;
  round_since_ns_ = nowNs();
  sendToAll(*p);
}

void Keeper::onReport(uint32_t from, const wire::Control& c) {
  bool ignored = false;
  std::optional<wire::Control> d = coordinator_->report(from, c, &ignored);
  if (!d) return;
  round_since_ns_ = 0;
  sendToAll(*d);
  proposeNext();
}

void Keeper::onPropose(const wire::Control& c) {
  if (c.epoch <= decided_epoch_ || c.epoch == proposed_epoch_) return;  // stale, or a copy
  if (c.epoch != decided_epoch_ + 1 || c.slot >= slots()) {
    TALLY_WARN_LIMITED(warnings_, "CollNet rank %d: ignoring a proposal for epoch %u (slot %u); "
                       "epoch %u is the last decided", rank_, c.epoch, c.slot, decided_epoch_);
    return;
  }
  proposed_epoch_ = c.epoch;
  if (suspect_since_ns_ != 0) suspect_since_ns_ = nowNs();  // rank 0 goes on: count afresh
  waiting_since_ns_ = nowNs();
  if (c.change == wire::Change::kJoin) {
    // Posting goes on while this rank opens the link; it reports once joined (onJoined).
    return startJoin(c);
  }
  reportOnLoss(c);
}

void Keeper::onDecide(const wire::Control& c) {
  if (c.epoch <= decided_epoch_) return;  // a copy
  if (c.epoch != decided_epoch_ + 1 || c.epoch != proposed_epoch_ || c.slot >= slots()) {
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
  // The load moves with every change (a slot that takes a lost one's slices is busier for a
  // while): slowness is measured afresh.
  slow_.restart();
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
                 settings_.comm.toString().c_str(), c.epoch, c.address.c_str(), c.reason.c_str());
      joinOutcome(c.slot, false);
      // A join still opening finishes on its own thread and is reaped when it reports
      // (onJoined): waiting for it here could hold up a loss behind it.
      dropJoin();
      posting_->releaseCalls();
      return;
    }
  }
}

void Keeper::applyLost(const wire::Control& c) {
  const std::string why = lost_reasons_[c.slot].empty() ? c.reason : lost_reasons_[c.slot];
  const std::string address = posting_->linkAt(c.slot)->address();
  lost_reasons_[c.slot] = why;
  const LossApplied done = posting_->applyLoss(c, std::move(orphans_));
  orphans_.clear();
  if (!done.cannot.empty()) return failOver(done.cannot);
  slow_lost_[c.slot] = droppedAsSlow(why);
  if (rank_ == 0) {
    // Its own address, restarted, is worth a look soon; backing off starts from here. One
    // dropped as slow still answers: taken back at once, it would be dropped again.
    const int64_t now = nowNs();
    offer_backoff_ms_[c.slot] = 0;
    int64_t wait_ms = options_.rejoin_interval_ms;
    if (slow_lost_[c.slot]) {
      const bool again = joined_ns_[c.slot] != 0 &&
                         now - joined_ns_[c.slot] < slow_wait_ms_[c.slot] * kNsPerMs;
      slow_wait_ms_[c.slot] =
          nextSlowOfferWaitMs(slow_wait_ms_[c.slot], options_.rejoin_interval_ms, again);
      wait_ms = slow_wait_ms_[c.slot];
    }
    offer_after_ns_[c.slot] = now + wait_ms * kNsPerMs;
  }
  TALLY_WARN("CollNet communicator %s: reducer %s (slot %u) lost: %s; continues on %u of %u "
             "reducers from call %" PRIu64 " (epoch %u; %zu slices summed again, %zu of them at "
             "once)",
             settings_.comm.toString().c_str(), address.c_str(), c.slot, why.c_str(), done.live,
             slots(), c.next_call, c.epoch, done.again, done.at_once);
}

std::string Keeper::lostText() const {
  std::string text;
  for (uint32_t s = 0; s < suspected_.size(); ++s) {
    if (posting_->live(s) && !suspected_[s]) continue;
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

void Keeper::failOver(const std::string& why) {
  std::string headline = why;
  if (liveLinks() == 0) {
    // Every reducer lost the same rank: that rank is what failed (a worker that died, or its
    // network), not the reducers, which each said so.
    int64_t rank = -1;
    bool same = true;
    for (uint32_t s = 0; s < suspected_.size() && same; ++s) {
      if (!posting_->live(s)) continue;  // lost before, for its own reason
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
  posting_->failCommunicator(Status::remote("CollNet communicator " +
                                            settings_.comm.toString() + " failed: " + headline +
                                            (lost.empty() ? "" : "; reducers lost: " + lost)));
}

void Keeper::heartbeat(int64_t now_ns) {
  // 0: only a failed connection drops a reducer, so silence needs no Ping.
  if (options_.reducer_timeout_ms == 0) return;
  const int64_t timeout_ns = options_.reducer_timeout_ms * kNsPerMs;
  const int64_t interval_ns = std::max<int64_t>(timeout_ns / 4, kNsPerMs);
  posting_->snapshotLinks(&links_);
  for (uint32_t s = 0; s < links_.size(); ++s) {
    Link& link = *links_[s];
    if (suspected_[s] || !posting_->live(s) || link.ended()) continue;
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

void Keeper::checkSlow(int64_t now_ns) {
  // The links as heartbeat() just copied them.
  if (links_.size() != slow_samples_.size()) return;
  for (uint32_t s = 0; s < slow_samples_.size(); ++s) {
    Link& link = *links_[s];
    slow_samples_[s].live = !suspected_[s] && posting_->live(s) && !link.ended();
    slow_samples_[s].busy_ns = link.busyNs(now_ns);
    slow_samples_[s].heard = now_ns - link.lastHeardNs() < slow_.windowNs();
    slow_samples_[s].probation = slow_lost_[s] && now_ns - joined_ns_[s] < kSlowProbationNs;
  }
  const SlowReducers::Verdict v = slow_.sample(now_ns, slow_samples_);
  if (v.slot < 0) return;
  handleLinkLost(static_cast<uint32_t>(v.slot), Status::timeout(v.why), false);
}

void Keeper::checkRounds(int64_t now_ns) {
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
