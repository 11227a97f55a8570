#include "common/rate_limit.h"

#include <gtest/gtest.h>

namespace tally {
namespace {

using std::chrono::milliseconds;

TEST(RateLimitedLog, OneLinePerIntervalCountingTheRest) {
  RateLimitedLog limit(milliseconds(1000));
  const auto t0 = RateLimitedLog::Clock::time_point{} + std::chrono::hours(1);
  uint64_t count = 0;
  ASSERT_TRUE(limit.noteAt(t0, &count));
  EXPECT_EQ(count, 1u);
  for (int i = 1; i <= 9; ++i) {
    count = 77;
    EXPECT_FALSE(limit.noteAt(t0 + milliseconds(100 * i - 1), &count));
    EXPECT_EQ(count, 77u);  // untouched when nothing is to be logged
  }
  ASSERT_TRUE(limit.noteAt(t0 + milliseconds(1000), &count));
  EXPECT_EQ(count, 10u);  // the nine held back and this one
  EXPECT_FALSE(limit.noteAt(t0 + milliseconds(1500), &count));
  ASSERT_TRUE(limit.noteAt(t0 + milliseconds(5000), &count));
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(limit.total(), 13u);
}

}  // namespace
}  // namespace tally
