// SPDX-License-Identifier: Apache-2.0
#include "worker_client/placement.h"

#include <algorithm>
#include <cstddef>

namespace tally::worker_client {

PlacementMap::PlacementMap(uint32_t slots) : slots_(slots), live_(slots, true) {}

uint32_t PlacementMap::liveCount() const {
  return static_cast<uint32_t>(std::count(live_.begin(), live_.end(), true));
}

bool PlacementMap::apply(const MembershipChange& change) {
  if (change.epoch <= epoch() || change.slot >= slots_) return false;
  const bool lost = change.kind == MembershipChange::Kind::kLost;
  if (live_[change.slot] != lost) return false;
  live_[change.slot] = !lost;
  Step step;
  step.change = change;
  for (uint32_t s = 0; s < slots_; ++s) {
    if (live_[s]) step.live.push_back(s);
  }
  changes_.push_back(change);
  steps_.push_back(std::move(step));
  return true;
}

Placement PlacementMap::place(uint64_t call, uint64_t slice, uint32_t upto) const {
  const uint64_t k = call + slice;
  Placement p;
  p.slot = static_cast<uint32_t>(k % slots_);
  p.placed = true;
  for (const Step& step : steps_) {
    const MembershipChange& c = step.change;
    if (c.epoch > upto) break;
    const uint64_t n = step.live.size();
    if (c.kind == MembershipChange::Kind::kLost) {
      if (p.slot != c.slot) continue;
      if (n == 0) return Placement{};
      // The slices of one lost slot are every R-th of (call + slice): k / R numbers them one by
      // one, so they rotate over the survivors. The lost slot's index offsets the rotation, so
      // two lost slots do not pile their slices onto the same survivor.
      p.slot = step.live[(k / slots_ + c.slot) % n];
      p.epoch = call < c.boundary ? c.epoch : 0;
    } else if (call >= c.boundary) {
      p.slot = step.live[k % n];
      p.epoch = 0;
    }
  }
  return p;
}

void PlacementMap::compact(uint64_t first_call) {
  size_t keep_from = 0;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const MembershipChange& c = steps_[i].change;
    if (c.boundary > first_call) break;  // boundaries grow with the epochs
    if (c.kind == MembershipChange::Kind::kJoin) keep_from = i;
  }
  if (keep_from == 0) return;
  forgotten_epoch_ = steps_[keep_from - 1].change.epoch;
  steps_.erase(steps_.begin(), steps_.begin() + static_cast<std::ptrdiff_t>(keep_from));
  changes_.erase(changes_.begin(), changes_.begin() + static_cast<std::ptrdiff_t>(keep_from));
}

uint64_t PlacementMap::boundaryOf(uint32_t epoch) const {
  for (const MembershipChange& c : changes_) {
    if (c.epoch == epoch) return c.boundary;
  }
  return UINT64_MAX;
}

uint32_t PlacementMap::lostAfter(uint32_t slot, uint32_t after) const {
  for (const MembershipChange& c : changes_) {
    if (c.epoch > after && c.slot == slot && c.kind == MembershipChange::Kind::kLost) {
      return c.epoch;
    }
  }
  return 0;
}

}  // namespace tally::worker_client
