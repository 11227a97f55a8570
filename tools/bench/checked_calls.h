// SPDX-License-Identifier: Apache-2.0
// Which calls of a timed run `tally bench` and tally-gloo-bench check against the reference.
//
// Every warm-up call, and the last timed call: the timed calls go back to back, as nccl-tests
// times them. A check between two timed calls would let the ranks that finish checking first
// start the next call, timer running, and wait in it for the ranks still checking; the slowest
// rank's mean, which is what both benches report, then carries that wait. On 2 cores at
// 1 Gbit/s that was up to 2% of a 64 MiB reduction server call (docs/bench.md). Header-only, so its
// unit test needs no bench.
#pragma once

namespace tally::bench {

// Whether call `index` (0-based, the warm-up calls first) of `warmup` + `iters` is checked.
inline bool checkedCall(int index, int warmup, int iters) {
  return index < warmup || index == warmup + iters - 1;
}

}  // namespace tally::bench
