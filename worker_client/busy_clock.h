// SPDX-License-Identifier: Apache-2.0
// How long, in all, a link has had slices out whose results had not landed (Link::busyNs, what
// SlowReducers compares between reducers). The link calls begin() when its first slice goes out
// and end() when its last result lands (or the link ends), under its own lock; the keeper reads
// total() from its thread without one.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace tally::worker_client {

class BusyClock {
 public:
  // Nothing was out, now something is (the link's lock held).
  void begin(int64_t now_ns) {
    if (since_ns_.load(std::memory_order_relaxed) != 0) return;
    write(total_ns_.load(std::memory_order_relaxed), now_ns);
  }
  // Nothing is out any more (the link's lock held). Idempotent.
  void end(int64_t now_ns) {
    const int64_t since = since_ns_.load(std::memory_order_relaxed);
    if (since == 0) return;
    write(total_ns_.load(std::memory_order_relaxed) + std::max<int64_t>(0, now_ns - since), 0);
  }
  // The busy time up to now_ns. Any thread: a read that overlaps a write is tried again (a
  // sequence count, odd while a write is under way).
  int64_t total(int64_t now_ns) const {
    for (;;) {
      const uint64_t seq = seq_.load(std::memory_order_acquire);
      const int64_t since = since_ns_.load(std::memory_order_acquire);
      const int64_t total = total_ns_.load(std::memory_order_acquire);
      if ((seq & 1) != 0 || seq_.load(std::memory_order_acquire) != seq) continue;
      return total + (since != 0 && now_ns > since ? now_ns - since : 0);
    }
  }

 private:
  void write(int64_t total, int64_t since) {
    seq_.fetch_add(1, std::memory_order_acq_rel);
    total_ns_.store(total, std::memory_order_release);
    since_ns_.store(since, std::memory_order_release);
    seq_.fetch_add(1, std::memory_order_acq_rel);
  }

  std::atomic<uint64_t> seq_{0};
  std::atomic<int64_t> since_ns_{0};  // 0: nothing out
  std::atomic<int64_t> total_ns_{0};
};

}  // namespace tally::worker_client
