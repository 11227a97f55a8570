// SPDX-License-Identifier: Apache-2.0
// A CollClient's membership (docs/failover.md): which reducers serve the communicator, agreed
// with the other ranks. One keeper per client, on a thread of its own. Links report a lost
// reducer and relayed failover messages into its inbox (through LinkOwner); the keeper alone
// runs the changes: it drops a reducer, tells rank 0 (or, on rank 0, the coordinator), freezes
// posting and reports on a proposal, applies decisions through Posting (posting.h), pings
// silent reducers and drops the ones that stay silent, and takes reducers back (keeper_join.cc).
// Not a public interface.
//
// Threads: linkLost from any thread (no lock of a link held), relayed from any thread (a link
// may hold its own lock: it only queues, under inbox_mu_); start and stop from
// the client's owner; everything else on the keeper thread, which alone touches the members
// below the inbox. Locks: inbox_mu_ is a leaf; the keeper calls Posting with none of its own
// held.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/auth.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/status.h"
#include "protocol/wire.h"
#include "worker_client/call.h"
#include "worker_client/coll_connect.h"
#include "worker_client/coll_options.h"
#include "worker_client/ledger.h"
#include "worker_client/link.h"
#include "worker_client/posting.h"
#include "worker_client/relay_seal.h"
#include "worker_client/slow_reducers.h"

namespace tally::worker_client {
namespace wire = protocol::wire;

class Coordinator;

// The keeper's timers are steady-clock nanoseconds (nowNs) against settings in milliseconds.
inline constexpr int64_t kNsPerMs = 1000000;

// How this client opens a link to a reducer taken in later (a Join): what connect() used.
struct LinkSettings {
  bool raw = false;  // RawLinks (TCP with TALLY_COLL_PROGRESS thread or poll)
  auth::JobToken token;
  const crc32c::Crc32c* crc = nullptr;
  wire::Hello hello;  // this rank's Hello, for every reducer alike but the slot and epoch
};

// What a keeper is set up with at connect.
struct KeeperSettings {
  int rank = 0;
  int nranks = 1;
  wire::CommId comm;
  RelaySeal seal;     // on this communicator's relays (relay_seal.h); none without a job token
  LinkSettings link;  // for joins
};

class Keeper {
 public:
  // `options` and `posting` (and `shared`) outlive the keeper.
  Keeper(const CollOptions& options, KeeperSettings settings, std::shared_ptr<Shared> shared,
         Posting* posting);
  ~Keeper();
  Keeper(const Keeper&) = delete;
  Keeper& operator=(const Keeper&) = delete;

  // Starts the keeper thread; kSystem when it cannot be created.
  Status start();
  // Stops the thread, then tells every join under way to give up and waits for its thread (each
  // ends soon after, well before its deadline). Idempotent; not from the keeper thread.
  void stop();

  // A link lost its reducer. Any thread, no lock of the link held.
  void linkLost(uint32_t slot, const Status& why);
  // A link received a relayed failover message. Any thread; the link's own lock may be held.
  void relayed(uint32_t slot, const wire::Relay& relay);

 private:
  // A failover event for the keeper thread.
  struct Event {
    enum class Kind { kLinkLost, kRelay, kJoined };
    Kind kind = Kind::kLinkLost;
    uint32_t slot = 0;  // the link it came from
    Status why;         // kLinkLost; kJoined: how the join went
    uint64_t join = 0;  // kJoined: which join (Join::id)
    wire::Relay relay;  // kRelay
  };
  // A join under way on this rank: its thread opens the link, the keeper installs it.
  struct Join {
    uint64_t id = 0;  // which kJoined event is its own
    uint32_t epoch = 0;
    uint32_t slot = 0;
    std::string address;
    std::thread thread;
    std::shared_ptr<Link> link;  // set by the thread when it joined
    bool done = false;           // the thread ended (keeper's view, after kJoined)
    Cancel cancel{false};        // set: the thread gives up its opening soon
  };

  void loop();
  void push(Event ev);
  void handleEvent(Event& ev);
  // Suspects slot's reducer. With retire, its link ends now (it failed, or went silent);
  // without (a drop as slow), it runs on until the proposal, which lets it finish its in-place
  // slices first (keeper_drain.cc).
  void handleLinkLost(uint32_t slot, const Status& why, bool retire = true);
  void handleControl(uint32_t from, const wire::Control& c);
  void onPropose(const wire::Control& c);
  // keeper_drain.cc: this rank's report on a proposed loss, once the link may end.
  void reportOnLoss(const wire::Control& c);
  void checkDrain(int64_t now_ns);
  void sendLossReport(wire::Control r);
  void onDecide(const wire::Control& c);
  void onReport(uint32_t from, const wire::Control& c);
  void applyLost(const wire::Control& c);
  // Joins (keeper_join.cc): rank 0 looks for a reducer for an empty slot; every rank opens a
  // link to it on a proposal (on a thread of the join's own), reports, and installs it on the
  // decision.
  void offerJoins(int64_t now_ns);
  void startJoin(const wire::Control& c);
  void onJoined(const Event& ev);
  void onJoinedFailed(const wire::Control& c, const std::string& why);
  void applyJoin(const wire::Control& c);
  // Lets go of the join under way without waiting for its thread: a thread still opening is
  // kept in dropped_joins_ until it reports (the keeper must not stop for it: its heartbeats
  // are what notice a frozen reducer meanwhile).
  void dropJoin();
  // After the keeper stopped: tells every join thread to give up and waits for it.
  void endJoins();
  // Waits for a join's thread (ended, or ending by its deadline) and retires the link it
  // opened, saying why.
  void closeJoin(Join& join, const char* why);
  // Rank 0: how a join of `slot` ended, for the wait before the next offer.
  void joinOutcome(uint32_t slot, bool joined);
  void heartbeat(int64_t now_ns);
  // Drops a reducer far slower than its peers (slow_reducers.h).
  void checkSlow(int64_t now_ns);
  void checkRounds(int64_t now_ns);
  // Rank 0: sends the coordinator's next proposal, if one waits.
  void proposeNext();
  // Sends a failover message to rank 0 (from rank 0: handled here) or, from rank 0, to every
  // rank (and handled here too), through every live link.
  void sendToRankZero(const wire::Control& c);
  void sendToAll(const wire::Control& c);
  void broadcastRelay(const wire::Control& c);
  // Fails the communicator for a failover reason, naming every reducer out of it now and why
  // (lostText). When every reducer lost the same rank, that rank is the headline.
  void failOver(const std::string& why);
  // "address (why), ...": every slot's reducer that is out now (lost and not taken back since,
  // or dropped by this rank and not yet decided), in slot order; "" when none.
  std::string lostText() const;
  uint32_t liveLinks() const;
  // A membership change is being agreed (this rank dropped a reducer, reported, or, on rank 0,
  // gathers reports).
  bool changeUnderWay() const;
  bool suspicionPending() const;
  uint32_t relayLimit() const;
  uint32_t slots() const { return static_cast<uint32_t>(addresses_.size()); }

  const CollOptions& options_;
  const KeeperSettings settings_;
  const int rank_;
  const std::shared_ptr<Shared> shared_;
  Posting* const posting_;

  std::thread thread_;
  std::mutex inbox_mu_;
  std::condition_variable inbox_cv_;
  std::deque<Event> inbox_;
  bool stop_ = false;
  // By slot (inbox_mu_): relays that came through it since this rank last applied a decision.
  // More than the ranks can have sent meanwhile (relayLimit) is a reducer replaying or
  // inventing them: it is dropped, and what it sends beyond is not queued.
  std::vector<uint32_t> relays_since_decision_;
  uint32_t relays_counted_from_ = 0;  // that decision's epoch (inbox_mu_)

  // Keeper-thread state.
  std::unique_ptr<Coordinator> coordinator_;  // rank 0 only
  uint32_t decided_epoch_ = 0;
  uint32_t proposed_epoch_ = 0;   // the epoch of the proposal this rank reported on
  int64_t waiting_since_ns_ = 0;  // reported, waiting for the decision (0: not waiting)
  // This rank dropped a reducer and waits for rank 0 to propose it: since its Suspect, or since
  // the last proposal or decision while a Suspect of its is still pending (0: none pending).
  int64_t suspect_since_ns_ = 0;
  int64_t round_since_ns_ = 0;   // rank 0: the round under way began
  std::vector<bool> suspected_;  // by slot: this rank dropped it, the decision is pending
  std::vector<std::string> lost_reasons_;  // by slot: why this rank dropped it
  // By slot: the epoch its reducer joined at (0: it formed with the communicator). A Suspect
  // from before it is about the reducer that was there before (late, or replayed).
  std::vector<uint32_t> joined_at_;
  // The books of the slot the proposal under way loses, taken when this rank froze.
  std::vector<LedgerEntry> orphans_;
  // A proposed drop as slow whose report waits: the reducer still answers, so its link first
  // lets the in-place slices it holds finish (keeper_drain.cc).
  struct Drain {
    wire::Control report;
    std::string why;  // the link's retirement
    int64_t since_ns = 0;
  };
  std::optional<Drain> drain_;
  std::vector<bool> running_;  // by slot: suspected as slow, its link not retired yet
  log::RateLimitedLog warnings_;  // refused failover messages
  std::vector<int64_t> ping_sent_ns_;  // by slot: the first Ping since the reducer was heard
  uint64_t ping_token_ = 0;
  std::vector<std::shared_ptr<Link>> links_;  // the keeper's copy of the client's links
  std::vector<std::string> addresses_;  // by slot: the reducer serving it now, or last
  std::unique_ptr<Join> join_;
  std::vector<std::unique_ptr<Join>> dropped_joins_;  // threads still opening, no longer wanted
  uint64_t last_join_id_ = 0;
  int64_t next_offer_ns_ = 0;           // rank 0: when to look for reducers again
  std::vector<uint32_t> offer_cursor_;  // rank 0: by slot, which candidate is next
  // Rank 0, by slot: no join is offered before offer_after_ns_; each join that did not happen
  // doubles the wait, up to four intervals (offer_backoff.h).
  std::vector<int64_t> offer_after_ns_;
  std::vector<int64_t> offer_backoff_ms_;
  // Slow reducers: the detector and its samples (every tick: room kept); rank 0, by slot, the
  // wait before its last offer after a drop as slow, and when its reducer last joined.
  SlowReducers slow_;
  std::vector<SlowReducers::Sample> slow_samples_;
  std::vector<int64_t> slow_wait_ms_;
  std::vector<int64_t> joined_ns_;
  std::vector<bool> slow_lost_;  // by slot: its last loss was a drop as slow
};

}  // namespace tally::worker_client
