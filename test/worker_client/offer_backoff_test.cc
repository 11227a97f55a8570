// SPDX-License-Identifier: Apache-2.0
// Rank 0's wait before it offers an empty slot a join again (worker_client/offer_backoff.h).
#include "worker_client/offer_backoff.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace tally::worker_client {
namespace {

TEST(OfferBackoff, DoublesFromOneIntervalUpToFour) {
  std::vector<int64_t> waits;
  int64_t wait = 0;
  for (int i = 0; i < 6; ++i) {
    wait = nextOfferBackoffMs(wait, 1000, false);
    waits.push_back(wait);
  }
  EXPECT_EQ(waits, (std::vector<int64_t>{1000, 2000, 4000, 4000, 4000, 4000}));
}

TEST(OfferBackoff, AJoinStartsOver) {
  EXPECT_EQ(nextOfferBackoffMs(4000, 1000, true), 0);
  EXPECT_EQ(nextOfferBackoffMs(0, 1000, false), 1000);
}

TEST(OfferBackoff, FollowsTheInterval) {
  EXPECT_EQ(nextOfferBackoffMs(0, 250, false), 250);
  EXPECT_EQ(nextOfferBackoffMs(250, 250, false), 500);
  EXPECT_EQ(nextOfferBackoffMs(800, 250, false), 1000);
  // A wait from a longer interval before (the setting is per process, but the arithmetic holds)
  // is cut to four of the current one.
  EXPECT_EQ(nextOfferBackoffMs(30000, 1000, false), 4000);
}

TEST(SlowOfferWait, StartsAtEightIntervalsAndDoublesOnlyWhenDroppedAgainSoon) {
  EXPECT_EQ(nextSlowOfferWaitMs(0, 1000, false), 8000);
  EXPECT_EQ(nextSlowOfferWaitMs(0, 1000, true), 8000);  // no wait before: the first
  EXPECT_EQ(nextSlowOfferWaitMs(8000, 1000, true), 16000);
  EXPECT_EQ(nextSlowOfferWaitMs(16000, 1000, true), 32000);
  EXPECT_EQ(nextSlowOfferWaitMs(32000, 1000, true), 32000);  // at most 32 intervals
  // Dropped as slow long after it joined: a new episode, back to the first wait.
  EXPECT_EQ(nextSlowOfferWaitMs(32000, 1000, false), 8000);
  EXPECT_EQ(nextSlowOfferWaitMs(400, 200, true), 1600);
}

}  // namespace
}  // namespace tally::worker_client
