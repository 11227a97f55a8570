// SPDX-License-Identifier: Apache-2.0
// SlowReducers (worker_client/slow_reducers.h) on its own: which slot is far slower than its
// peers, from each slot's busy time fed at ticks as the keeper does.
#include "worker_client/slow_reducers.h"

#include <gtest/gtest.h>

#include <vector>

namespace tally::worker_client {
namespace {

constexpr int64_t kMs = 1000000;

// Feeds `ticks` ticks of 100 ms in which slot s is busy busy_pct[s] percent of each tick;
// returns the first verdict's slot (or -1) and its reason.
struct Feed {
  SlowReducers slow;
  std::vector<SlowReducers::Sample> samples;
  int64_t now = 1000 * kMs;

  explicit Feed(size_t slots, SlowReducers::Settings s = {}) : slow(s), samples(slots) {
    for (auto& x : samples) x.live = true;
  }
  SlowReducers::Verdict ticks(int n, const std::vector<int>& busy_pct, int* at = nullptr) {
    for (int i = 0; i < n; ++i) {
      now += 100 * kMs;
      for (size_t s = 0; s < samples.size(); ++s) samples[s].busy_ns += busy_pct[s] * kMs;
      SlowReducers::Verdict v = slow.sample(now, samples);
      if (v.slot >= 0) {
        if (at != nullptr) *at = i;
        return v;
      }
    }
    return {};
  }
};

TEST(SlowReducers, AReducerTenTimesSlowerIsNamedAfterThreeWindows) {
  Feed r(3);
  int at = -1;
  SlowReducers::Verdict v = r.ticks(40, {10, 100, 10}, &at);
  EXPECT_EQ(v.slot, 1);
  // The first tick starts the measurement; then three windows of 500 ms.
  EXPECT_EQ(at, 15);
  EXPECT_NE(v.why.find("busy 1500 of 1500 ms, 10.0 times their median (150 ms)"),
            std::string::npos)
      << v.why;
}

TEST(SlowReducers, PeersThatWaitIdleMakeItSlowToo) {
  Feed r(2);
  SlowReducers::Verdict v = r.ticks(40, {100, 0});
  EXPECT_EQ(v.slot, 0);
  EXPECT_NE(v.why.find("while theirs were idle"), std::string::npos) << v.why;
}

TEST(SlowReducers, AUniformlySlowNetworkDropsNobody) {
  Feed r(4);
  EXPECT_EQ(r.ticks(200, {100, 100, 100, 100}).slot, -1);
}

TEST(SlowReducers, TwiceAsSlowIsNotFarSlower) {
  Feed r(3);
  EXPECT_EQ(r.ticks(200, {50, 100, 50}).slot, -1);
  Feed r4(3);
  EXPECT_EQ(r4.ticks(200, {26, 100, 26}).slot, -1);  // just under 4 times
}

TEST(SlowReducers, ABusyWindowBetweenIdleOnesIsNotEnough) {
  Feed r(3);
  EXPECT_EQ(r.ticks(1, {0, 0, 0}).slot, -1);
  for (int round = 0; round < 20; ++round) {
    EXPECT_EQ(r.ticks(10, {10, 100, 10}).slot, -1);  // two slow windows
    EXPECT_EQ(r.ticks(5, {10, 10, 10}).slot, -1);    // then an even one
  }
}

TEST(SlowReducers, AnotherSlotSlowStartsTheCountOver) {
  Feed r(3);
  EXPECT_EQ(r.ticks(11, {10, 100, 10}).slot, -1);  // the start and two windows of slot 1
  int at = -1;
  SlowReducers::Verdict v = r.ticks(40, {100, 10, 10}, &at);
  EXPECT_EQ(v.slot, 0);
  EXPECT_EQ(at, 14);  // three whole windows of slot 0
}

TEST(SlowReducers, NotBusyMostOfTheWindowIsNotHoldingCalls) {
  Feed r(3);
  // Far more than its peers, but the calls come seldom: nobody waits for it long.
  EXPECT_EQ(r.ticks(200, {1, 80, 1}).slot, -1);
}

TEST(SlowReducers, SlotsNotLiveAreLeftOutAndOneAloneHasNoPeers) {
  Feed r(3);
  r.samples[0].live = false;
  r.samples[2].live = false;
  EXPECT_EQ(r.ticks(200, {0, 100, 0}).slot, -1);
  r.samples[2].live = true;
  EXPECT_EQ(r.ticks(40, {0, 100, 5}).slot, 1);
}

TEST(SlowReducers, ANewLinkStartsFromZeroWithoutAFalseWindow) {
  Feed r(3);
  EXPECT_EQ(r.ticks(12, {10, 100, 10}).slot, -1);
  r.samples[1].busy_ns = 0;  // slot 1 lost and taken back: its new link counts from 0
  EXPECT_EQ(r.ticks(4, {10, 10, 10}).slot, -1);
  EXPECT_EQ(r.ticks(40, {10, 10, 10}).slot, -1);
}

TEST(SlowReducers, RestartForgetsTheWindowsSoFar) {
  Feed r(3);
  EXPECT_EQ(r.ticks(14, {10, 100, 10}).slot, -1);
  r.slow.restart();
  int at = -1;
  EXPECT_EQ(r.ticks(40, {10, 100, 10}, &at).slot, 1);
  EXPECT_EQ(at, 15);
}

TEST(SlowReducers, ASilentReducerIsLeftToTheTimeout) {
  Feed r(3);
  r.samples[1].heard = false;  // frozen: busy, as its slices are out, but not a byte comes
  EXPECT_EQ(r.ticks(200, {0, 100, 0}).slot, -1);
  r.samples[1].heard = true;  // bytes again, slowly
  EXPECT_EQ(r.ticks(40, {0, 100, 0}).slot, 1);
}

TEST(SlowReducers, OnProbationTwoWindowsDecide) {
  Feed r(3);
  r.samples[1].probation = true;
  int at = -1;
  EXPECT_EQ(r.ticks(40, {10, 100, 10}, &at).slot, 1);
  EXPECT_EQ(at, 10);  // the start, then two windows
}

TEST(SlowReducers, FactorZeroIsOff) {
  SlowReducers::Settings s;
  s.factor = 0;
  Feed r(3, s);
  EXPECT_EQ(r.ticks(200, {0, 100, 0}).slot, -1);
}

TEST(SlowReducers, AfterAVerdictTheMeasurementStartsOver) {
  Feed r(3);
  int at = -1;
  EXPECT_EQ(r.ticks(40, {10, 100, 10}, &at).slot, 1);
  EXPECT_EQ(r.ticks(40, {10, 100, 10}, &at).slot, 1);
  EXPECT_EQ(at, 15);
}

}  // namespace
}  // namespace tally::worker_client
