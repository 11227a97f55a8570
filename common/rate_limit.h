// Counting repeated events and logging them at most once per interval: a flood of identical
// failures (accept() out of descriptors, connections dropped for lack of threads) becomes one
// line per interval that says how many there were, instead of a line each.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace tally {

class RateLimitedLog {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RateLimitedLog(std::chrono::milliseconds interval) : interval_(interval) {}

  // Counts one event. True when the caller should log it now: the first event, then the first
  // one after each interval. *count is then the number of events this line stands for (itself
  // and those not logged since the last line); it is left alone when the result is false.
  bool note(uint64_t* count) { return noteAt(Clock::now(), count); }
  bool noteAt(Clock::time_point now, uint64_t* count);

  // Every event noted so far.
  uint64_t total() const;

 private:
  const std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  bool logged_ = false;
  Clock::time_point last_line_;
  uint64_t unlogged_ = 0;
  uint64_t total_ = 0;
};

}  // namespace tally
