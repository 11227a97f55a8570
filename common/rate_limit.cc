#include "common/rate_limit.h"

namespace tally {

bool RateLimitedLog::noteAt(Clock::time_point now, uint64_t* count) {
  std::lock_guard<std::mutex> lock(mu_);
  ++total_;
  ++unlogged_;
  if (logged_ && now - last_line_ < interval_) return false;
  logged_ = true;
  last_line_ = now;
  *count = unlogged_;
  unlogged_ = 0;
  return true;
}

uint64_t RateLimitedLog::total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

}  // namespace tally
