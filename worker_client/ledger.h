// SPDX-License-Identifier: Apache-2.0
// One reducer link's books of the slices it carries, from queueing to commit (docs/failover.md,
// "Commit before done"): queued (waiting for a credit), sent, landed (the whole result is in the
// receive buffer) and committed (a Commit from the reducer said every rank has landed it). A
// slice leaves the books only when committed, which counts it done in its call, or when the link
// is lost (takeAll), to be placed again.
//
// Both kinds of link keep one, under their own lock; the ledger has none of its own.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/small_pool.h"
#include "common/status.h"
#include "protocol/wire.h"
#include "worker_client/call.h"

namespace tally::worker_client {

// A slice the link has sent (or is writing).
struct LedgerEntry {
  SliceTask task;
  bool landed = false;
  // Some bytes of its result were written into the receive buffer (an in-place call's input
  // there is then gone).
  bool touched = false;
  // RawLink: the count of messages queued on the socket once its header and payload were.
  uint64_t last_message = 0;
};

// The slices sent for in-place calls that are done only once committed (call.h): their input
// is in the receive buffer, which their results overwrite as they land. A loss that must sum such
// a slice again after its result began to land fails the communicator (docs/failover.md).
struct InPlaceOut {
  uint32_t sent = 0;     // sent and not committed
  uint32_t touched = 0;  // of those, some of the result is in the receive buffer
};

class SliceLedger {
 public:
  using Key = std::pair<uint64_t, uint32_t>;  // (call seq, slice)

  // Queued slices, in the order they go out.
  void enqueue(SliceTask task);
  bool queueEmpty() const { return queue_.empty(); }
  SliceTask popQueued();
  size_t queued() const { return queue_.size(); }
  // Queued prompt slices (SliceTask::prompt), which go out ahead of the others, in their order.
  void enqueuePrompt(SliceTask task);
  bool promptQueueEmpty() const { return prompt_.empty(); }
  SliceTask popPrompt();

  // A slice goes out (taken from the queue, or posted at once): its record. The reference
  // stays valid until the slice is committed or taken.
  LedgerEntry& record(SliceTask task, bool from_queue);
  // The record of a slice sent and not committed; null if there is none.
  LedgerEntry* find(uint64_t seq, uint32_t slice);
  // Its whole result is in the receive buffer (an early call's slice is done then).
  void land(LedgerEntry* entry);

  // A Commit from the reducer (a message, or carried by a result): erases every slice it
  // covers (each counted done in its call). One that raises nothing is stale and changes
  // nothing. Not ok: it covers a slice that has not landed here, or passes this rank's own last
  // Ack, a protocol violation; nothing changes then.
  Status commit(const wire::AckPoint& point, const std::string& reducer);
  // The last Commit taken.
  const wire::AckPoint& committed() const { return committed_; }

  // Zero-copy sends (RawLink with TALLY_ZEROCOPY, docs/datapath.md): the kernel may read a
  // slice's payload from the caller's buffer until the link's queue releases its messages, which
  // can be after its Commit. A committed slice whose last_message is past the count released is
  // held (its call not counted done, an early call's record and copy not free) until release()
  // reaches it. Links without zero-copy never call these: their last_message stays 0.
  void release(uint64_t messages_released);
  // The connection is gone and the kernel reads no more of these pages: every held slice goes.
  void releaseAll();
  size_t held() const { return held_.size(); }

  // What this rank may acknowledge: the first call with a normal slice here that has not
  // landed (at most posted_through, the calls whose slices are all cut), and the last recovery
  // epoch whose slices here have all landed (at most applied_epoch, the last whose recovery
  // slices were all sent).
  wire::AckPoint ackPoint(uint64_t posted_through, uint32_t applied_epoch) const;
  // The Ack to send now, if any: one that covers a landed slice no earlier Ack covered (an Ack
  // that covers nothing new would only cost the reducer work). It is then taken as sent.
  // Called after results land, and after the client published more posted calls or an epoch
  // (a result can land before its call's posting is published).
  // With only_urgent (an Ack on its own, not carried by a slice): only when a call waits for it:
  // a landed slice of a call that is done only once committed, or of a recovery epoch. An early
  // call's slices (call.h) are done already, so their Ack waits to go along with later traffic;
  // the Ack of any later call covers them too.
  std::optional<wire::AckPoint> nextAck(uint64_t posted_through, uint32_t applied_epoch,
                                        bool only_urgent = false);

  // Every slice in the books (queued ones first, prompt then others, then records in order),
  // leaving them empty: the link is lost and they are placed again.
  std::vector<LedgerEntry> takeAll();
  size_t recorded() const { return entries_.size(); }
  InPlaceOut inPlaceOut() const;
  bool empty() const { return queue_.empty() && prompt_.empty() && entries_.empty(); }

 private:
  // A committed slice whose messages the kernel may still read.
  struct Held {
    uint64_t last_message = 0;
    std::shared_ptr<Call> call;
    bool count_done = false;  // not an early call's (those were counted at landing)
  };
  // Lets a held slice go: counts it done in its call if it was not yet.
  static void letGo(Held& h);

  // Counts a slice that has not landed, by call (normal) or by epoch (recovery).
  void countUnlanded(const SliceTask& task);
  void uncountUnlanded(const SliceTask& task);

  std::deque<SliceTask, PoolAllocator<SliceTask>> queue_;
  std::deque<SliceTask, PoolAllocator<SliceTask>> prompt_;  // empty but after a loss, briefly
  std::map<Key, LedgerEntry, std::less<Key>, PoolAllocator<std::pair<const Key, LedgerEntry>>>
      entries_;
  // Normal slices not landed, per call, in call order (calls are queued in order).
  std::deque<std::pair<uint64_t, uint32_t>, PoolAllocator<std::pair<uint64_t, uint32_t>>>
      unlanded_calls_;
  std::map<uint32_t, uint32_t> unlanded_epochs_;  // recovery slices not landed, per epoch
  size_t recovery_entries_ = 0;                   // records of recovery slices
  wire::AckPoint committed_;
  wire::AckPoint acked_;  // the last Ack sent
  uint64_t released_ = 0;   // messages the link's queue has let go of
  std::vector<Held> held_;  // committed, not yet released; few (at most the slices in flight)
  // The latest landed normal slice's call and recovery slice's epoch (0 and none: nothing yet).
  uint64_t landed_call_ = 0;
  bool landed_any_call_ = false;
  // The latest landed normal slice of a call done only once committed (not early).
  uint64_t urgent_call_ = 0;
  bool urgent_any_ = false;
  uint32_t landed_epoch_ = 0;
};

// Counts one slice of its call done (committed, or landed for an early call); the last one
// completes the call.
void completeSlice(Call* call);

}  // namespace tally::worker_client
