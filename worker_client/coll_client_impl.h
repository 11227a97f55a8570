// Inside CollClient (coll_client.h): the client object (coll_client.cc: handles, connect, posts,
// close; coll_failover.cc: the keeper thread and membership changes) and its per-reducer links
// (link.h), of two kinds: ThreadedLink (coll_link.h) and RawLink (coll_raw_link.h). Not a public
// interface.
//
// Data flow: a post numbers the call (seq), cuts it into slices and queues each on the slot the
// placement gives (placement.h), under post_mu_ so every link sees calls in seq order. A link
// sends each slice's header and payload straight from the user's buffer, with at most `window`
// slices outstanding (sent, result not landed), and reads each result straight into the user's
// recv buffer. A call is done when every slice is committed: every rank has landed it
// (docs/failover.md, "Commit before done").
//
// Failover: a link that loses its reducer tells the client (linkLost); the keeper thread, one per
// client, runs the membership changes with the other ranks through the reducers (Relay), places
// the lost reducer's slices again and, on rank 0, decides (coordinator.h). It also sends Pings
// on silent links and drops a reducer silent for TALLY_REDUCER_TIMEOUT_MS.
//
// Errors stick: the first error that fails the communicator (an Error of communicator scope, a
// timeout, too few reducers left) closes every connection (so nothing more is written into user
// buffers) and is then returned by every unfinished and later request.
//
// Caller memory: only a posted call's slices touch its buffers, on a link's threads or under its
// lock (see link.h); abort() joins the link threads after closing, and a retired link (a lost
// reducer) is quiet before its slices are placed again, so nothing touches a buffer after the
// request reported done or failed.
//
// Lock order: post_mu_ -> links_mu_ -> a link's locks (ThreadedLink: send_mu_ -> mu_; RawLink:
// mu_). inbox_mu_ and Shared::mu are leaves.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/crc32c.h"
#include "common/log.h"
#include "common/small_pool.h"
#include "worker_client/call.h"
#include "worker_client/coll_client.h"
#include "worker_client/coll_connect.h"
#include "worker_client/ledger.h"
#include "worker_client/link_owner.h"
#include "worker_client/placement.h"
#include "worker_client/relay_seal.h"
#include "protocol/slicing.h"
#include "protocol/wire.h"
#include "transport/transport.h"

namespace tally::worker_client {
namespace wire = protocol::wire;
using protocol::Span;

class Link;
class Progress;
class Coordinator;

// A failover event for the keeper thread.
struct FailoverEvent {
  enum class Kind { kLinkLost, kRelay, kJoined };
  Kind kind = Kind::kLinkLost;
  uint32_t slot = 0;  // the link it came from
  Status why;         // kLinkLost; kJoined: how the join went
  uint64_t join = 0;  // kJoined: which join (Join::id)
  wire::Relay relay;  // kRelay
};

// How this client opens a link to a reducer taken in later (a Join): what connect() used.
struct LinkSettings {
  bool raw = false;  // RawLinks (TCP with TALLY_COLL_PROGRESS thread or poll)
  auth::JobToken token;
  const crc32c::Crc32c* crc = nullptr;
  wire::Hello hello;  // this rank's Hello, for every reducer alike but the slot and epoch
};

class CollClientImpl final : public CollClient, public LinkOwner {
 public:
  CollClientImpl(const CollOptions& options, int rank, int nranks);
  ~CollClientImpl() override;

  Status iallreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                    CollRequest* req) override;
  Status iallgather(const void* send, void* recv, const CollWindow& window,
                    CollRequest* req) override;
  Status ireducescatter(const void* send, void* recv, const CollWindow& window, DataType type,
                        ReduceOp op, CollRequest* req) override;
  void close() override;
  void abort(const Status& why) override;
  int rank() const override { return rank_; }  // CollClient and LinkOwner
  int nranks() const override { return nranks_; }
  transport::ZerocopyCounts zerocopyCounts() const override;
  const CollOptions& options() const override { return options_; }

  // Links (and the progress thread RawLinks share, when there are any) are added by connect()
  // before start(), one per slot in slot order.
  void addLink(std::shared_ptr<Link> link) { links_.push_back(std::move(link)); }
  void setProgress(std::shared_ptr<Progress> progress);
  void setCommunicator(const wire::CommId& comm) { comm_ = comm; }
  // The seal on this communicator's relays (relay_seal.h); none unless the job has a token.
  void setRelaySeal(const RelaySeal& seal) { relay_seal_ = seal; }
  void setLinkSettings(LinkSettings settings) { link_settings_ = std::move(settings); }
  // Starts the links, the progress thread and the keeper; fails as Link::start does.
  Status start();
  // Makes `st` the client's sticky error (the first one wins), after closing every connection.
  // Before closing, each reducer is sent an Error with the cause, waiting at most wait_ms (or
  // until abort() hurries) for them to go out.
  void fail(const Status& st, int64_t wait_ms);
  // LinkOwner (link_owner.h), for the links. silentTooLong: half of TALLY_REDUCER_TIMEOUT_MS,
  // never when that is 0.
  void fail(const Status& st) override { fail(st, kFailWaitMs); }
  void linkLost(uint32_t slot, const Status& why) override;
  void relayed(uint32_t slot, const wire::Relay& relay) override;
  bool closing() const override { return closing_.load(std::memory_order_acquire); }
  bool silentTooLong(int64_t heard_ns, int64_t now_ns) const override {
    return options_.reducer_timeout_ms > 0 &&
           now_ns - heard_ns > options_.reducer_timeout_ms * 1000000 / 2;
  }
  bool hurrying() const override { return hurry_.load(std::memory_order_acquire); }

  // fail()'s wait for the Error messages: found by a link thread (no NCCL thread waits on it),
  // and on the abort path (closeColl, deregMr), where NCCL's proxy thread waits.
  static constexpr int64_t kFailWaitMs = 200;
  static constexpr int64_t kAbortWaitMs = 5;
  // close() with no call in flight: how long the Bye may take to go out.
  static constexpr int64_t kByeWaitMs = 50;
  const std::shared_ptr<Shared>& shared() const override { return shared_; }

 private:
  const CollOptions options_;
  const int rank_;
  const int nranks_;
  wire::CommId comm_;
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  // Declared before links_: RawLinks stop it in their destructors. Shared with shared_->poller
  // in poll mode.
  std::shared_ptr<Progress> progress_;
  // By slot. A lost slot keeps its ended link until a join replaces it; a replaced link, and one
  // a join opened and did not use, is detached (Link::detach) and kept in retired_ until nothing
  // it shared can reach it (a progress round may still hold an event for it), then dropped by
  // the keeper, which frees its socket and buffers.
  std::vector<std::shared_ptr<Link>> links_;
  std::vector<std::shared_ptr<Link>> retired_;
  // Detaches `link` (retired, its books taken) into retired_ (links_mu_ held).
  void keepRetiredLocked(std::shared_ptr<Link> link);
  // Drops the retired links nothing can reach any more (the keeper, each tick).
  void dropRetired();
  // Lets the placement forget the changes no live call depends on (the keeper, each tick, once
  // there are more than a few).
  void compactPlacement();
  // Replacing an entry of links_ (with post_mu_), fail()'s reading, and zerocopyCounts().
  mutable std::mutex links_mu_;
  std::vector<std::shared_ptr<Link>> linkSnapshot();
  // The same into *out, reusing its room (the keeper's, every tick: nothing allocated).
  void snapshotLinks(std::vector<std::shared_ptr<Link>>* out);

  // Posting (post_mu_).
  std::mutex post_mu_;
  uint64_t next_seq_ = 0;
  PlacementMap placement_;
  // A membership change is being agreed: posts wait (a NULL request) until its decision.
  bool hold_ = false;
  // Calls below this may pass max_requests: a rank that is behind must reach the boundary.
  uint64_t catch_up_until_ = 0;
  // Decided epochs whose recovery slices wait for their boundary, in epoch order, and the
  // slices parked for each (docs/failover.md, steps 4 and 5).
  struct Boundary {
    uint32_t epoch = 0;
    uint64_t call = 0;
  };
  std::deque<Boundary> boundaries_;
  std::map<uint32_t, std::vector<SliceTask>> parked_;
  // Calls kept for reuse (guarded by post_mu_): one only this list holds is free again.
  std::vector<std::shared_ptr<Call>> calls_;
  std::shared_ptr<Call> freeCallLocked();
  // What every post shares: checks, numbering, cutting into slices, queueing. `result_bytes` is
  // what the request reports when done.
  Status post(const CallSpec& spec, size_t result_bytes, CollRequest* req);
  // Queues the slices parked for every epoch whose boundary next_seq_ has reached (post_mu_).
  void flushBoundariesLocked();
  // Queues epoch `epoch`'s parked slices on their slots, in (call, slice) order; a slice whose
  // slot a later epoch lost waits for that epoch instead (post_mu_).
  void flushEpochLocked(uint32_t epoch);
  // Fails with `why`, then joins every link's threads (close_mu_ held).
  void abortLocked(const Status& why);
  std::mutex fail_mu_;
  std::atomic<bool> closing_{false};
  std::atomic<bool> hurry_{false};
  std::mutex close_mu_;
  bool closed_ = false;  // close() or abort() ran (guarded by close_mu_)

  // The keeper thread (coll_failover.cc) and what it alone touches.
  void keeperLoop();
  void stopKeeper();
  void handleEvent(FailoverEvent& ev);
  void handleLinkLost(uint32_t slot, const Status& why);
  void handleControl(uint32_t from, const wire::Control& c);
  void onPropose(const wire::Control& c);
  void onDecide(const wire::Control& c);
  void onReport(uint32_t from, const wire::Control& c);
  void applyLost(const wire::Control& c);
  // Whether an orphan of the epoch being applied is sent at once, not at the boundary: a slice
  // of an early call below F (docs/failover.md, "Small calls"), the same set on every rank.
  bool sentAtOnce(const SliceTask& t, uint64_t first_call) const;
  // Sends those (post_mu_), sorted, on the placement of `epoch`, as its prompt recovery slices.
  void sendPromptLocked(uint32_t epoch, std::vector<SliceTask> tasks);
  // Joins (coll_rejoin.cc): rank 0 looks for a reducer for an empty slot; every rank opens a
  // link to it on a proposal (on a thread of the join's own), reports, and installs it on the
  // decision.
  void offerJoins(int64_t now_ns);
  void startJoin(const wire::Control& c);
  void onJoined(const FailoverEvent& ev);
  void onJoinedFailed(const wire::Control& c, const std::string& why);
  void applyJoin(const wire::Control& c);
  // Lets go of the join under way without waiting for its thread: a thread still opening is
  // kept in dropped_joins_ until it reports (the keeper must not stop for it: its heartbeats
  // are what notice a frozen reducer meanwhile).
  void dropJoin();
  // After the keeper stopped: tells every join thread to give up and waits for it (each ends
  // soon after, well before its deadline).
  void endJoins();
  // Rank 0: how a join of `slot` ended, for the wait before the next offer.
  void joinOutcome(uint32_t slot, bool joined);
  void heartbeat(int64_t now_ns);
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
  uint32_t liveLinks();
  // A membership change is being agreed (this rank dropped a reducer, reported, or, on rank 0,
  // gathers reports).
  bool changeUnderWay() const;

  std::thread keeper_;
  std::mutex inbox_mu_;
  std::condition_variable inbox_cv_;
  std::deque<FailoverEvent> inbox_;
  bool keeper_stop_ = false;
  // By slot (inbox_mu_): relays that came through it since this rank last applied a decision.
  // More than the ranks can have sent meanwhile (relayLimit) is a reducer replaying or
  // inventing them: it is dropped, and what it sends beyond is not queued.
  std::vector<uint32_t> relays_since_decision_;
  uint32_t relays_counted_from_ = 0;  // that decision's epoch (inbox_mu_)
  uint32_t relayLimit() const;
  // Keeper-thread state.
  std::unique_ptr<Coordinator> coordinator_;  // rank 0 only
  uint32_t decided_epoch_ = 0;
  uint32_t proposed_epoch_ = 0;  // the epoch of the proposal this rank reported on
  int64_t waiting_since_ns_ = 0; // reported, waiting for the decision (0: not waiting)
  // This rank dropped a reducer and waits for rank 0 to propose it: since its Suspect, or since
  // the last proposal or decision while a Suspect of its is still pending (0: none pending).
  int64_t suspect_since_ns_ = 0;
  bool suspicionPending() const;
  int64_t round_since_ns_ = 0;   // rank 0: the round under way began
  std::vector<bool> suspected_;  // by slot: this rank dropped it, the decision is pending
  std::vector<std::string> lost_reasons_;  // by slot: why this rank dropped it
  // By slot: the epoch its reducer joined at (0: it formed with the communicator). A Suspect
  // from before it is about the reducer that was there before (late, or replayed).
  std::vector<uint32_t> joined_at_;
  // The books of the slot the proposal under way loses, taken when this rank froze.
  std::vector<LedgerEntry> orphans_;
  log::RateLimitedLog warnings_;  // refused failover messages
  std::vector<int64_t> ping_sent_ns_;  // by slot: the first Ping since the reducer was heard
  uint64_t ping_token_ = 0;
  std::vector<std::shared_ptr<Link>> keeper_links_;  // the keeper's copy of links_
  LinkSettings link_settings_;
  RelaySeal relay_seal_;
  std::vector<std::string> addresses_;  // by slot: the reducer serving it now, or last
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
  // Waits for a join's thread (ended, or ending by its deadline) and retires the link it opened,
  // saying why.
  void closeJoin(Join& join, const char* why);
  std::unique_ptr<Join> join_;
  std::vector<std::unique_ptr<Join>> dropped_joins_;  // threads still opening, no longer wanted
  uint64_t last_join_id_ = 0;
  int64_t next_offer_ns_ = 0;            // rank 0: when to look for reducers again
  std::vector<uint32_t> offer_cursor_;   // rank 0: by slot, which candidate is next
  // Rank 0, by slot: no join is offered before offer_after_ns_; each join that did not happen
  // doubles the wait, up to four intervals (offer_backoff.h).
  std::vector<int64_t> offer_after_ns_;
  std::vector<int64_t> offer_backoff_ms_;
};

}  // namespace tally::worker_client
