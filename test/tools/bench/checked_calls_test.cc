// SPDX-License-Identifier: Apache-2.0
// Which calls the benches check (tools/bench/checked_calls.h): every warm-up call and the last
// timed one, none of the timed calls before it.
#include "tools/bench/checked_calls.h"

#include <gtest/gtest.h>

#include <vector>

namespace tally::bench {
namespace {

std::vector<int> checkedOf(int warmup, int iters) {
  std::vector<int> checked;
  for (int i = 0; i < warmup + iters; ++i) {
    if (checkedCall(i, warmup, iters)) checked.push_back(i);
  }
  return checked;
}

TEST(CheckedCalls, EveryWarmUpAndTheLastTimedCall) {
  EXPECT_EQ(checkedOf(2, 5), (std::vector<int>{0, 1, 6}));
  EXPECT_EQ(checkedOf(1, 3), (std::vector<int>{0, 3}));
}

TEST(CheckedCalls, WithoutWarmUpOnlyTheLastTimedCall) {
  EXPECT_EQ(checkedOf(0, 4), (std::vector<int>{3}));
}

TEST(CheckedCalls, OneTimedCallIsChecked) {
  EXPECT_EQ(checkedOf(0, 1), (std::vector<int>{0}));
  EXPECT_EQ(checkedOf(3, 1), (std::vector<int>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace tally::bench
