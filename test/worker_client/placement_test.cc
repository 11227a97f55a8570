// SPDX-License-Identifier: Apache-2.0
// Placement (worker_client/placement.h): stickiness, recovery classes, balance, joins,
// compaction.
#include "worker_client/placement.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

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

// A reducer that comes and goes for a long job: a loss and a rejoin per 50 calls, two slots
// flapping at times. Compacting at the oldest live call answers place(), boundaryOf() and
// lostAfter() exactly as the whole history does for every call from there and every epoch a
// live call can be placed under, and keeps the history short.
TEST(Placement, CompactForgetsOnlyWhatNoLiveCallNeeds) {
  constexpr uint32_t kSlots = 5;
  PlacementMap whole(kSlots);
  PlacementMap compacted(kSlots);
  std::mt19937_64 rng(7);
  uint32_t epoch = 0;
  uint64_t call = 0;
  for (int round = 0; round < 300; ++round) {
    const uint32_t slot = static_cast<uint32_t>(rng() % kSlots);
    call += 20 + rng() % 30;
    MembershipChange lost{Kind::kLost, ++epoch, slot, call};
    if (!whole.live(slot) || whole.liveCount() == 1) continue;
    ASSERT_TRUE(whole.apply(lost));
    ASSERT_TRUE(compacted.apply(lost));
    call += 10 + rng() % 20;
    MembershipChange join{Kind::kJoin, ++epoch, slot, call};
    ASSERT_TRUE(whole.apply(join));
    ASSERT_TRUE(compacted.apply(join));
    // The oldest live call trails the newest by a few boundaries.
    const uint64_t first = call > 120 ? call - 120 : 0;
    compacted.compact(first);
    ASSERT_LE(compacted.changes().size(), 16u) << "round " << round;
    for (uint64_t c = first; c < call + 60; c += 7) {
      for (uint64_t j = 0; j < 11; ++j) {
        ASSERT_EQ(compacted.place(c, j), whole.place(c, j)) << "call " << c << " slice " << j;
        // Under the epoch of each change still kept (what applying a recovery epoch asks).
        for (const MembershipChange& kept : compacted.changes()) {
          ASSERT_EQ(compacted.place(c, j, kept.epoch), whole.place(c, j, kept.epoch));
        }
      }
    }
    for (const MembershipChange& kept : compacted.changes()) {
      EXPECT_EQ(compacted.boundaryOf(kept.epoch), whole.boundaryOf(kept.epoch));
      for (uint32_t s = 0; s < kSlots; ++s) {
        EXPECT_EQ(compacted.lostAfter(s, kept.epoch), whole.lostAfter(s, kept.epoch));
      }
    }
    EXPECT_EQ(compacted.epoch(), whole.epoch());
    EXPECT_EQ(compacted.liveCount(), whole.liveCount());
  }
  EXPECT_GT(whole.changes().size(), 400u);
}

// Nothing is forgotten while a live call is older than every Join's boundary, and a history of
// losses alone (bounded by the slots) stays whole.
TEST(Placement, CompactKeepsWhatAnOlderCallNeeds) {
  PlacementMap m(3);
  ASSERT_TRUE(m.apply({Kind::kLost, 1, 0, 10}));
  ASSERT_TRUE(m.apply({Kind::kJoin, 2, 0, 20}));
  ASSERT_TRUE(m.apply({Kind::kLost, 3, 1, 30}));
  m.compact(19);
  EXPECT_EQ(m.changes().size(), 3u);
  m.compact(25);  // the Join at 20 is the first change calls from 25 need
  ASSERT_EQ(m.changes().size(), 2u);
  EXPECT_EQ(m.changes().front().epoch, 2u);
  EXPECT_EQ(m.epoch(), 3u);
  PlacementMap losses(4);
  ASSERT_TRUE(losses.apply({Kind::kLost, 1, 0, 10}));
  ASSERT_TRUE(losses.apply({Kind::kLost, 2, 1, 20}));
  losses.compact(1000);
  EXPECT_EQ(losses.changes().size(), 2u);
}

}  // namespace
}  // namespace tally::worker_client
