// SPDX-License-Identifier: Apache-2.0
// RateLimitedLog (common/log.h): one line per interval, and the next line written says how many
// were withheld.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"

namespace tally::log {
namespace {

using Clock = RateLimitedLog::Clock;
using std::chrono::milliseconds;

TEST(RateLimitedLog, OneLinePerIntervalWithTheWithheldCount) {
  RateLimitedLog limiter(milliseconds(1000));
  const Clock::time_point t0 = Clock::now();
  uint64_t suppressed = 99;
  ASSERT_TRUE(limiter.admit(t0, &suppressed));  // the first line always goes out
  EXPECT_EQ(suppressed, 0u);
  for (int i = 1; i <= 5; ++i) EXPECT_FALSE(limiter.admit(t0 + milliseconds(i * 100), &suppressed));
  ASSERT_TRUE(limiter.admit(t0 + milliseconds(1000), &suppressed));
  EXPECT_EQ(suppressed, 5u);
  // The interval runs from the last line written, and the count starts again.
  EXPECT_FALSE(limiter.admit(t0 + milliseconds(1999), &suppressed));
  ASSERT_TRUE(limiter.admit(t0 + milliseconds(2000), &suppressed));
  EXPECT_EQ(suppressed, 1u);
  // A quiet spell: the next line goes out at once, with nothing withheld.
  ASSERT_TRUE(limiter.admit(t0 + milliseconds(60000), &suppressed));
  EXPECT_EQ(suppressed, 0u);
}

// note() is admit() for callers that write their own line: its count includes the event itself.
TEST(RateLimitedLog, NoteCountsTheLineItselfAndTheWithheldOnes) {
  RateLimitedLog limiter(milliseconds(60000));
  uint64_t count = 0;
  ASSERT_TRUE(limiter.note(&count));
  EXPECT_EQ(count, 1u);
  count = 77;
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(limiter.note(&count));
  EXPECT_EQ(count, 77u);  // untouched when nothing is to be written
  uint64_t suppressed = 0;
  ASSERT_TRUE(limiter.admit(Clock::now() + milliseconds(60000), &suppressed));
  EXPECT_EQ(suppressed, 4u);
}

TEST(RateLimitedLog, ConcurrentCallersAdmitOneLineAndCountTheRest) {
  RateLimitedLog limiter(milliseconds(60000));
  const Clock::time_point t0 = Clock::now();
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        uint64_t s = 0;
        if (limiter.admit(t0, &s)) admitted++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 1);
  uint64_t suppressed = 0;
  ASSERT_TRUE(limiter.admit(t0 + milliseconds(60000), &suppressed));
  EXPECT_EQ(suppressed, 3999u);
}

std::mutex g_mu;
std::vector<std::string> g_lines;

void capture(Level, unsigned long, const char*, int, const char* message) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_lines.emplace_back(message);
}

TEST(RateLimitedLog, WarnWritesTheFirstLineAndReportsTheWithheldOnes) {
  g_lines.clear();
  setSink(&capture, Level::kWarn);
  RateLimitedLog limiter(milliseconds(200));
  for (int i = 0; i < 10; ++i) TALLY_WARN_LIMITED(limiter, "dropped peer %d", i);
  std::this_thread::sleep_for(milliseconds(250));
  TALLY_WARN_LIMITED(limiter, "dropped peer %d", 10);
  setSink(&stderrSink, Level::kWarn);
  ASSERT_EQ(g_lines.size(), 2u);
  EXPECT_EQ(g_lines[0], "dropped peer 0");
  EXPECT_EQ(g_lines[1], "dropped peer 10 (and 9 more like it since the last such line)");
}

}  // namespace
}  // namespace tally::log
