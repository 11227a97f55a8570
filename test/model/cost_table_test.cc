// SPDX-License-Identifier: Apache-2.0
// The tuner's edit of an NCCL-shaped cost table (model/cost_table.h): which entries change, which
// stay, and the choice NCCL would make from the result.
#include "model/cost_table.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tally::model {
namespace {

constexpr int kAlgos = 7;
constexpr int kProtos = 3;

struct Table {
  float cost[kAlgos][kProtos];
  Table() {
    for (int a = 0; a < kAlgos; ++a) {
      for (int p = 0; p < kProtos; ++p) cost[a][p] = 100.0f + 10.0f * a + p;
    }
  }
  float* data() { return &cost[0][0]; }
};

CollNetSetup withReducers(int64_t reducers) {
  CollNetSetup s;
  s.ranks = 8;
  s.nodes = 8;
  s.reducers = reducers;
  return s;
}

TEST(CostTable, WritesOnlyTheEnabledCollNetSimpleEntries) {
  Table t;
  const Table before = t;
  t.cost[kAlgoCollNetDirect][kProtoSimple] = kIgnoredCost;  // no NVSwitch: NCCL disabled it
  const uint64_t bytes = 8ull << 20;
  EXPECT_EQ(applyCollNetCosts(withReducers(8), kFuncAllReduce, bytes, t.data(), kAlgos, kProtos),
            1);
  // NCCL's ring cost scaled by the model's rs/ring ratio.
  double ring = -1;
  const double rs = collNetAllReduceMicros(withReducers(8), bytes, &ring);
  const float want =
      static_cast<float>(ringCostInTable(&before.cost[0][0], kAlgos, kProtos) * rs / ring);
  ASSERT_GT(want, 0);
  EXPECT_FLOAT_EQ(t.cost[kAlgoCollNetChain][kProtoSimple], want);
  EXPECT_EQ(t.cost[kAlgoCollNetDirect][kProtoSimple], kIgnoredCost);
  for (int a = 0; a < kAlgos; ++a) {
    for (int p = 0; p < kProtos; ++p) {
      if (a == kAlgoCollNetChain && p == kProtoSimple) continue;
      if (a == kAlgoCollNetDirect && p == kProtoSimple) continue;
      EXPECT_EQ(t.cost[a][p], before.cost[a][p]) << a << "/" << p;
    }
  }
}

TEST(CostTable, LeavesTheTableAloneWithoutReducersOrForOtherCollectives) {
  for (int coll : {0, 1, 2, 3}) {
    Table t;
    const Table before = t;
    EXPECT_EQ(applyCollNetCosts(withReducers(8), coll, 1 << 20, t.data(), kAlgos, kProtos), 0);
    EXPECT_TRUE(std::equal(t.data(), t.data() + kAlgos * kProtos, before.cost[0])) << coll;
  }
  Table t;
  const Table before = t;
  EXPECT_EQ(applyCollNetCosts(withReducers(0), kFuncAllReduce, 1 << 20, t.data(), kAlgos, kProtos),
            0);
  EXPECT_TRUE(std::equal(t.data(), t.data() + kAlgos * kProtos, before.cost[0]));
  // NCCL 2.21's table has 6 algorithms: the CollNet rows are at the same places.
  float six[6][kProtos];
  std::fill(&six[0][0], &six[0][0] + 6 * kProtos, 5.0f);
  EXPECT_EQ(applyCollNetCosts(withReducers(8), kFuncAllReduce, 1 << 20, &six[0][0], 6, kProtos), 2);
  EXPECT_EQ(six[kAlgoRing][kProtoSimple], 5.0f);
}

TEST(CostTable, CheapestEntryIsNcclsPick) {
  Table t;
  int algo = -1, proto = -1;
  ASSERT_TRUE(cheapestEntry(t.data(), kAlgos, kProtos, &algo, &proto));
  EXPECT_EQ(algo, 0);
  EXPECT_EQ(proto, 0);
  t.cost[0][0] = kIgnoredCost;
  t.cost[4][2] = 1.0f;
  ASSERT_TRUE(cheapestEntry(t.data(), kAlgos, kProtos, &algo, &proto));
  EXPECT_EQ(algo, 4);
  EXPECT_EQ(proto, 2);
  std::fill(t.data(), t.data() + kAlgos * kProtos, kIgnoredCost);
  EXPECT_FALSE(cheapestEntry(t.data(), kAlgos, kProtos, &algo, &proto));
}

TEST(ChooseAllReduce, RingBelowTheCrossoverCollNetFromIt) {
  // 4 hosts and 4 reducers on 1 Gb/s links, where the model has a crossover (collnet_test.cc).
  CollNetSetup s = withReducers(4);
  s.ranks = s.nodes = 4;
  s.link_mbps = 1000;
  const uint64_t cross = collNetCrossoverBytes(s);
  ASSERT_GT(cross, 1024u);
  EXPECT_EQ(chooseAllReduce(s, cross / 2).algorithm, kAlgoRing);
  EXPECT_EQ(chooseAllReduce(s, cross).algorithm, kAlgoCollNetChain);
  EXPECT_EQ(chooseAllReduce(s, 1ull << 30).algorithm, kAlgoCollNetChain);
  // Without reducers the ring, at every size.
  for (uint64_t bytes = 1024; bytes <= (1ull << 30); bytes *= 4) {
    EXPECT_EQ(chooseAllReduce(withReducers(0), bytes).algorithm, kAlgoRing) << bytes;
  }
}

}  // namespace
}  // namespace tally::model
