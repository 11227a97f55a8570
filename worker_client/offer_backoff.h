// SPDX-License-Identifier: Apache-2.0
// How long rank 0 waits before it offers an empty slot's reducer a join again (keeper_join.cc,
// docs/failover.md, "Join"). Pure arithmetic, tested on its own.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tally::worker_client {

// A join that did not happen doubles the wait before the next offer of that slot, from one
// TALLY_REJOIN_INTERVAL_MS up to four: a reducer that accepts connections and then refuses the
// Hello (another job's, a full one) would otherwise cost every rank an opening each interval,
// while a reducer that was frozen and goes on again is taken back within four intervals (a
// frozen one's joins already end only by their bound, TALLY_REDUCER_TIMEOUT_MS). A join that
// happened starts over from no wait.
inline constexpr int64_t kMaxOfferBackoffIntervals = 4;

inline int64_t nextOfferBackoffMs(int64_t previous_ms, int64_t interval_ms, bool joined) {
  if (joined) return 0;
  return std::min(kMaxOfferBackoffIntervals * interval_ms, std::max(interval_ms, 2 * previous_ms));
}

// A reducer dropped as slow (slow_reducers.h) still answers, so a join would take it back at
// once, only for it to be dropped again a couple of seconds later, each round costing every call
// a stall. Its first offer waits eight intervals; a reducer dropped as slow again within its wait
// of being taken back waits twice as long, up to 32 intervals (32 s by default): a reducer that
// stays slow costs a stall every half minute or so, and one that recovered is back within that.
inline constexpr int64_t kMinSlowOfferIntervals = 8;
inline constexpr int64_t kMaxSlowOfferIntervals = 32;

// `previous_ms`: the wait before its last join (0: none); `again`: dropped as slow again within
// that wait of joining.
inline int64_t nextSlowOfferWaitMs(int64_t previous_ms, int64_t interval_ms, bool again) {
  const int64_t first = kMinSlowOfferIntervals * interval_ms;
  if (!again || previous_ms <= 0) return first;
  return std::min(kMaxSlowOfferIntervals * interval_ms, std::max(first, 2 * previous_ms));
}

}  // namespace tally::worker_client
