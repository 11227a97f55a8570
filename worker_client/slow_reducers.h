// SPDX-License-Identifier: Apache-2.0
// Which reducer is far slower than its peers (docs/failover.md, "A slow reducer"): pure
// arithmetic over each slot's busy time, the time its link had slices out whose results had not
// landed. A call completes only when every slot's part has, so a slow reducer holds every call:
// its link is busy nearly all the time while its peers' links finish their parts and wait. Busy
// time against the peers', not a rate, makes the test relative: a network slow for every
// reducer alike, or a slow rank that every reducer waits for, keeps the links alike and drops
// nobody.
//
// The keeper feeds each slot's busy time at every tick; at the end of each window it compares
// the busiest slot with the median of the others. A slot busy for nearly the whole window and at
// least `factor` times the median, in `windows` windows in a row, is slow, if it is still heard
// from. A membership change starts over: the slot that takes a lost one's slices is busier for a
// while by design.
//
// Threads: none of its own; the keeper's thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tally::worker_client {

// How a drop as slow's reason starts (SlowReducers::Verdict::why), so that the keeper tells such a
// loss from others.
inline constexpr char kSlowerThanPeers[] = "slower than its peers";
inline bool droppedAsSlow(const std::string& reason) {
  return reason.compare(0, sizeof(kSlowerThanPeers) - 1, kSlowerThanPeers) == 0;
}

class SlowReducers {
 public:
  struct Settings {
    int64_t window_ns = 500 * 1000000ll;
    // Busy at least this many times the peers' median (0: never slow).
    int factor = 4;
    int windows = 3;  // in a row
  };
  // What one slot reports at a tick.
  struct Sample {
    bool live = false;   // served, and not dropped by this rank
    int64_t busy_ns = 0; // cumulative, from its current link (a new link starts from 0)
    // Heard from within the last window. A silent reducer (frozen, unreachable) is not slow
    // but gone, and TALLY_REDUCER_TIMEOUT_MS is its bound: it is never named here.
    bool heard = true;
    // Taken back lately after a drop as slow: two windows decide, not three, so that a reducer
    // still slow costs the calls a short stall each time it is tried again.
    bool probation = false;
  };
  struct Verdict {
    int64_t slot = -1;  // the slow slot, or -1
    std::string why;    // what was measured, for the loss's reason
  };

  explicit SlowReducers(Settings settings) : settings_(settings) {}
  int64_t windowNs() const { return settings_.window_ns; }

  // Starts over from the next sample (a membership change).
  void restart();
  // The samples at now_ns, one per slot. Returns a verdict at most once per slow episode: the
  // measurement starts over after one.
  Verdict sample(int64_t now_ns, const std::vector<Sample>& samples);

 private:
  Settings settings_;
  bool started_ = false;
  int64_t window_start_ns_ = 0;
  std::vector<int64_t> busy_at_start_;  // by slot, at the window's start
  std::vector<bool> live_at_start_;
  std::vector<int64_t> busy_;  // this window's, of the slots counted (room kept)
  // The slot slow in every window so far in a row, and over those windows: its busy time, its
  // peers' median busy time, and their length.
  int64_t candidate_ = -1;
  int in_a_row_ = 0;
  int64_t run_busy_ns_ = 0;
  int64_t run_peers_ns_ = 0;
  int64_t run_span_ns_ = 0;
};

}  // namespace tally::worker_client
