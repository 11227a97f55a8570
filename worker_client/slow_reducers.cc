// SPDX-License-Identifier: Apache-2.0
#include "worker_client/slow_reducers.h"

#include <algorithm>
#include <cstdio>

namespace tally::worker_client {

namespace {
constexpr int64_t kNsPerMs = 1000000;
// On probation: two windows, so that a reducer just taken back, whose first calls may be slow
// (cold buffers, a TCP window to open), is not dropped for its first window alone.
constexpr int kProbationWindows = 2;
}  // namespace

void SlowReducers::restart() {
  started_ = false;
  candidate_ = -1;
  in_a_row_ = 0;
  run_busy_ns_ = run_peers_ns_ = run_span_ns_ = 0;
}

SlowReducers::Verdict SlowReducers::sample(int64_t now_ns, const std::vector<Sample>& samples) {
  Verdict v;
  if (settings_.factor <= 0) return v;
  const size_t n = samples.size();
  if (started_ && busy_at_start_.size() == n && now_ns - window_start_ns_ < settings_.window_ns) {
    return v;
  }
  const int64_t window = now_ns - window_start_ns_;
  const bool measured = started_ && busy_at_start_.size() == n;
  // This window's busy time per slot; a slot that came or went during it is left out (a new
  // link starts from 0).
  busy_.clear();
  int64_t top = -1;
  int64_t top_busy = -1;
  if (measured) {
    for (size_t s = 0; s < n; ++s) {
      if (!samples[s].live || !live_at_start_[s] || samples[s].busy_ns < busy_at_start_[s]) {
        continue;
      }
      const int64_t b = samples[s].busy_ns - busy_at_start_[s];
      busy_.push_back(b);
      if (b > top_busy) {
        top_busy = b;
        top = static_cast<int64_t>(s);
      }
    }
  }
  started_ = true;
  window_start_ns_ = now_ns;
  busy_at_start_.resize(n);
  live_at_start_.resize(n);
  for (size_t s = 0; s < n; ++s) {
    busy_at_start_[s] = samples[s].busy_ns;
    live_at_start_[s] = samples[s].live;
  }
  if (busy_.size() < 2) {
    candidate_ = -1;
    in_a_row_ = 0;
    return v;
  }
  // The median of the others: the busiest taken out once.
  busy_.erase(std::find(busy_.begin(), busy_.end(), top_busy));
  std::nth_element(busy_.begin(), busy_.begin() + busy_.size() / 2, busy_.end());
  const int64_t median = busy_[busy_.size() / 2];
  // Busy for nearly all of the window (it holds the calls) and far more than its peers.
  const bool slow = top_busy * 10 >= window * 9 && top_busy >= settings_.factor * median &&
                    samples[top].heard;
  if (!slow || top != candidate_) {
    in_a_row_ = 0;
    run_busy_ns_ = run_peers_ns_ = run_span_ns_ = 0;
  }
  candidate_ = slow ? top : -1;
  if (!slow) return v;
  ++in_a_row_;
  run_busy_ns_ += top_busy;
  run_peers_ns_ += median;
  run_span_ns_ += window;
  if (in_a_row_ < (samples[top].probation ? kProbationWindows : settings_.windows)) return v;
  v.slot = top;
  char text[200];
  if (run_peers_ns_ > 0) {
    std::snprintf(text, sizeof(text),
                  "%s: its link was busy %lld of %lld ms, %.1f times their median (%lld ms)",
                  kSlowerThanPeers,
                  static_cast<long long>(run_busy_ns_ / kNsPerMs),
                  static_cast<long long>(run_span_ns_ / kNsPerMs),
                  static_cast<double>(run_busy_ns_) / static_cast<double>(run_peers_ns_),
                  static_cast<long long>(run_peers_ns_ / kNsPerMs));
  } else {
    std::snprintf(text, sizeof(text),
                  "%s: its link was busy %lld of %lld ms while theirs were idle",
                  kSlowerThanPeers,
                  static_cast<long long>(run_busy_ns_ / kNsPerMs),
                  static_cast<long long>(run_span_ns_ / kNsPerMs));
  }
  v.why = text;
  restart();
  return v;
}

}  // namespace tally::worker_client
