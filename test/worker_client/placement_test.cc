// Placement (worker_client/placement.h): stickiness, recovery classes, balance, joins.
#include "worker_client/placement.h"

#include <gtest/gtest.h>

#include <map>

namespace tally::worker_client {
namespace {

using Kind = MembershipChange::Kind;

TEST(Placement, FormationIsRoundRobinFromTheCall) {
  PlacementMap m(4);
  for (uint64_t c = 0; c < 10; ++c) {
    for (uint64_t j = 0; j < 9; ++j) {
      EXPECT_EQ(m.place(c, j), (Placement{true, static_cast<uint32_t>((c + j) % 4), 0}));
    }
  }
}

TEST(Placement, ALostSlotMovesOnlyItsSlicesAndSpreadsThemEvenly) {
  PlacementMap m(5);
  ASSERT_TRUE(m.apply({Kind::kLost, 1, 2, 100}));
  std::map<uint32_t, int> moved;
  for (uint64_t c = 0; c < 200; ++c) {
    for (uint64_t j = 0; j < 8; ++j) {
      const uint32_t before = static_cast<uint32_t>((c + j) % 5);
      const Placement p = m.place(c, j);
      ASSERT_TRUE(p.placed);
      if (before != 2) {
        EXPECT_EQ(p, (Placement{true, before, 0})) << c << " " << j;  // sticky
        continue;
      }
      EXPECT_NE(p.slot, 2u);
      EXPECT_EQ(p.epoch, c < 100 ? 1u : 0u) << c;  // recovery below the boundary
      moved[p.slot]++;
    }
  }
  ASSERT_EQ(moved.size(), 4u);
  for (auto& [slot, n] : moved) EXPECT_NEAR(n, 80, 2) << "slot " << slot;
}

TEST(Placement, UptoIgnoresLaterChanges) {
  PlacementMap m(3);
  ASSERT_TRUE(m.apply({Kind::kLost, 1, 0, 50}));
  ASSERT_TRUE(m.apply({Kind::kLost, 2, 1, 60}));
  for (uint64_t c = 0; c < 40; ++c) {
    const Placement early = m.place(c, 0, 0);
    EXPECT_EQ(early.slot, c % 3);
    const Placement one = m.place(c, 0, 1);
    if (c % 3 == 0) {
      EXPECT_EQ(one.epoch, 1u);
      EXPECT_NE(one.slot, 0u);
    }
    const Placement all = m.place(c, 0);
    EXPECT_EQ(all.slot, 2u);  // the only slot left
    if (c % 3 == 2) {
      EXPECT_EQ(all.epoch, 0u);
    }
    if (c % 3 == 1 || (c % 3 == 0 && one.slot == 1)) {
      EXPECT_EQ(all.epoch, 2u) << c;
    }
  }
  EXPECT_EQ(m.lostAfter(1, 1), 2u);
  EXPECT_EQ(m.lostAfter(1, 2), 0u);
  EXPECT_EQ(m.lostAfter(0, 0), 1u);
}

TEST(Placement, NoSlotLeft) {
  PlacementMap m(1);
  ASSERT_TRUE(m.apply({Kind::kLost, 1, 0, 5}));
  EXPECT_FALSE(m.place(3, 0).placed);
  EXPECT_EQ(m.liveCount(), 0u);
}

TEST(Placement, JoinPlacesLaterCallsAfreshAndKeepsEarlierOnes) {
  PlacementMap m(3);
  ASSERT_TRUE(m.apply({Kind::kLost, 1, 1, 10}));
  ASSERT_TRUE(m.apply({Kind::kJoin, 2, 1, 30}));
  for (uint64_t c = 0; c < 60; ++c) {
    for (uint64_t j = 0; j < 4; ++j) {
      const Placement p = m.place(c, j);
      const Placement before = m.place(c, j, 1);
      if (c < 30) {
        EXPECT_EQ(p, before);
      } else {
        EXPECT_EQ(p, (Placement{true, static_cast<uint32_t>((c + j) % 3), 0}));
      }
    }
  }
}

TEST(Placement, RefusesChangesThatDoNotFit) {
  PlacementMap m(2);
  EXPECT_FALSE(m.apply({Kind::kLost, 0, 0, 1}));  // epoch 0 is the formation
  EXPECT_FALSE(m.apply({Kind::kJoin, 1, 0, 1}));  // slot 0 is live
  EXPECT_FALSE(m.apply({Kind::kLost, 1, 5, 1}));  // no such slot
  ASSERT_TRUE(m.apply({Kind::kLost, 1, 0, 1}));
  EXPECT_FALSE(m.apply({Kind::kLost, 2, 0, 1}));  // lost already
  EXPECT_FALSE(m.apply({Kind::kJoin, 1, 0, 1}));  // epochs only grow
  EXPECT_TRUE(m.apply({Kind::kJoin, 3, 0, 9}));   // epoch 2 passed with no change
  EXPECT_EQ(m.epoch(), 3u);
}

}  // namespace
}  // namespace tally::worker_client
