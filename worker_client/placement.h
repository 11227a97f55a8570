// SPDX-License-Identifier: Apache-2.0
// Where each slice of a CollNet call goes, as a function of the call, the slice and the
// communicator's list of membership changes only (docs/failover.md, "Placement"), so that every
// rank that knows the same changes places every slice alike.
//
// At formation slice j of call c goes to slot (c + j) mod R, class normal. A change Lost(s) with
// boundary K moves the slices that sit in slot s to the live slots, spread evenly over them,
// and leaves every other slice where it is (stickiness); a moved slice of a call below K is a
// recovery slice of that change's epoch, one of a call from K on is normal. A change Join(s)
// with boundary K places calls from K on afresh over the live slots; calls below K keep their
// place.
//
// Not thread safe: the client calls it under its post lock.
#pragma once

#include <cstdint>
#include <vector>

namespace tally::worker_client {

struct MembershipChange {
  enum class Kind { kLost, kJoin };
  Kind kind = Kind::kLost;
  uint32_t epoch = 0;     // 1, 2, ... in the order every rank applies them
  uint32_t slot = 0;
  uint64_t boundary = 0;  // K: the first call placed as normal under this change
};

struct Placement {
  bool placed = false;  // false: no slot was live for it
  uint32_t slot = 0;
  uint32_t epoch = 0;   // 0: normal; else a recovery slice of that epoch
  bool operator==(const Placement&) const = default;
};

class PlacementMap {
 public:
  explicit PlacementMap(uint32_t slots);

  // Appends a change; epochs must grow (an epoch may pass with no change: a void join), and a
  // Lost slot must be live (a Join's empty).
  // False when the change does not fit (the caller's bug): nothing changes then.
  bool apply(const MembershipChange& change);

  // Where slice `slice` of call `call` goes under every change up to and including epoch
  // `upto`.
  Placement place(uint64_t call, uint64_t slice, uint32_t upto = UINT32_MAX) const;

  // The boundary of epoch `epoch`'s change; UINT64_MAX when there is none.
  uint64_t boundaryOf(uint32_t epoch) const;
  // The first epoch after `after` whose change is Lost(slot); 0 when there is none.
  uint32_t lostAfter(uint32_t slot, uint32_t after) const;

  // Forgets the changes no call from `first_call` on depends on: every change before the last
  // Join whose boundary is at most first_call (a Join places its calls afresh, so what came
  // before it no longer matters to them). Call it with the oldest call any slice may still be
  // placed for (posted and not yet given back, or later); place() and the epoch queries then
  // answer as before for every call and epoch from there. Keeps the walk per slice short in a
  // long job whose reducers come and go.
  void compact(uint64_t first_call);

  uint32_t slots() const { return slots_; }
  uint32_t epoch() const { return changes_.empty() ? forgotten_epoch_ : changes_.back().epoch; }
  // After every change.
  bool live(uint32_t slot) const { return slot < slots_ && live_[slot]; }
  uint32_t liveCount() const;
  const std::vector<MembershipChange>& changes() const { return changes_; }

 private:
  struct Step {
    MembershipChange change;
    std::vector<uint32_t> live;  // the live slots after it, in slot order
  };
  const uint32_t slots_;
  std::vector<MembershipChange> changes_;
  std::vector<Step> steps_;
  std::vector<bool> live_;
  uint32_t forgotten_epoch_ = 0;  // the last epoch compact() let go of
};

}  // namespace tally::worker_client
