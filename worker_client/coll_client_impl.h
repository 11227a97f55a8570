// SPDX-License-Identifier: Apache-2.0
// Inside CollClient (coll_client.h): the client object (coll_client.cc: handles, connect, posts,
// close; coll_posting.cc: what the keeper asks of posting), its keeper (keeper.h: membership)
// and its per-reducer links (link.h), of two kinds: ThreadedLink (coll_link.h) and RawLink
// (coll_raw_link.h). Not a public interface.
//
// Data flow: a post numbers the call (seq), cuts it into slices and queues each on the slot the
// placement gives (placement.h), under post_mu_ so every link sees calls in seq order. A link
// sends each slice's header and payload straight from the user's buffer, with at most `window`
// slices outstanding (sent, result not landed), and reads each result straight into the user's
// recv buffer. A call is done when every slice is committed: every rank has landed it
// (docs/failover.md, "Commit before done").
//
// Failover: a link that loses its reducer tells the client (linkLost), which passes it to the
// keeper; the keeper runs the membership changes with the other ranks through the reducers
// (Relay) and, on rank 0, decides (coordinator.h); it asks posting (posting.h) to hold calls, to
// place the lost reducer's slices again, and to install a joined link. It also sends Pings on
// silent links and drops a reducer silent for TALLY_REDUCER_TIMEOUT_MS.
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
// mu_). The keeper's inbox_mu_ and Shared::mu are leaves.
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
#include "worker_client/keeper.h"
#include "worker_client/ledger.h"
#include "worker_client/link_owner.h"
#include "worker_client/posting.h"
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

class CollClientImpl final : public CollClient, public LinkOwner, public Posting {
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
  // Sets up the keeper (before any link reports a loss: connect reports the reducers that could
  // not be joined before start).
  void makeKeeper(KeeperSettings settings);
  // Starts the links, the progress thread and the keeper; fails as Link::start does.
  Status start();
  // Makes `st` the client's sticky error (the first one wins), after closing every connection.
  // Before closing, each reducer is sent an Error with the cause, waiting at most wait_ms (or
  // until abort() hurries) for them to go out.
  void fail(const Status& st, int64_t wait_ms);
  // LinkOwner (link_owner.h), for the links. silentTooLong: half of TALLY_REDUCER_TIMEOUT_MS,
  // never when that is 0.
  void fail(const Status& st) override { fail(st, kFailWaitMs); }
  void linkLost(uint32_t slot, const Status& why) override { keeper_->linkLost(slot, why); }
  void relayed(uint32_t slot, const wire::Relay& relay) override {
    keeper_->relayed(slot, relay);
  }
  // LinkOwner and Posting.
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

  // Posting (posting.h), for the keeper: coll_posting.cc.
  uint64_t holdCalls() override;
  uint64_t nextCall() override;
  void releaseCalls() override;
  LossApplied applyLoss(const wire::Control& c, std::vector<LedgerEntry> orphans) override;
  uint32_t installLink(const wire::Control& c, std::shared_ptr<Link> link) override;
  bool live(uint32_t slot) const override { return placement_.live(slot); }
  void compactPlacement() override;
  void snapshotLinks(std::vector<std::shared_ptr<Link>>* out) override;
  std::shared_ptr<Link> linkAt(uint32_t slot) override;
  std::shared_ptr<Link> newLink(uint32_t slot, const std::string& address,
                                std::unique_ptr<transport::Connection> conn, Fd fd,
                                int window) override;
  Status startLink(const std::shared_ptr<Link>& link) override;
  void keepRetired(std::shared_ptr<Link> link) override;
  void dropRetired() override;
  void failCommunicator(const Status& st) override { fail(st); }

 private:
  const CollOptions options_;
  const int rank_;
  const int nranks_;
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
  // Replacing an entry of links_ (with post_mu_), fail()'s reading, and zerocopyCounts().
  mutable std::mutex links_mu_;
  std::vector<std::shared_ptr<Link>> linkSnapshot();
  // The checksum new links use (TALLY_CHECKSUM; null when off).
  const crc32c::Crc32c* link_crc_ = nullptr;

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
  // Whether an orphan of the epoch being applied is sent at once, not at the boundary: a slice
  // of an early call below F (docs/failover.md, "Small calls"), the same set on every rank.
  bool sentAtOnce(const SliceTask& t, uint64_t first_call) const;
  // Sends those (post_mu_), sorted, on the placement of `epoch`, as its prompt recovery slices.
  void sendPromptLocked(uint32_t epoch, std::vector<SliceTask> tasks);
  // Fails with `why`, then joins every link's threads (close_mu_ held).
  void abortLocked(const Status& why);
  std::mutex fail_mu_;
  std::atomic<bool> closing_{false};
  std::atomic<bool> hurry_{false};
  std::mutex close_mu_;
  bool closed_ = false;  // close() or abort() ran (guarded by close_mu_)

  // Declared last: it stops (stop(), or its destructor) before anything it asks of posting goes.
  std::unique_ptr<Keeper> keeper_;
};

}  // namespace tally::worker_client
