// SPDX-License-Identifier: Apache-2.0
// protocol/slicing.h: how a call is cut, checked against hand-computed cuts.
#include "protocol/slicing.h"

#include <gtest/gtest.h>

namespace tally::protocol {
namespace {

struct Case {
  uint64_t count;
  uint64_t elt;
  uint64_t max_slice_bytes;
  uint64_t reducers;
  uint64_t want;  // elements per slice
};

TEST(Slicing, CutsEachCallIntoSeveralSlicesPerReducer) {
  const Case cases[] = {
      // 1 MiB of float32 (NCCL's largest CollNet call) over 4 reducers: 32 slices of 32 KiB.
      {262144, 4, 256 << 10, 4, 8192},
      // The same over 2 reducers: 16 slices of 64 KiB.
      {262144, 4, 256 << 10, 2, 16384},
      // 64 MiB over 2 reducers: 16 even pieces would be 4 MiB; capped at TALLY_SLICE_BYTES.
      {16777216, 4, 256 << 10, 2, 65536},
      // Small calls never go under 32 KiB slices (8192 float32): 64 KiB is 2 slices.
      {16384, 4, 256 << 10, 4, 8192},
      // A call smaller than one minimum slice is one slice, of any size.
      {7, 4, 256 << 10, 4, 8192},
      // A TALLY_SLICE_BYTES under the minimum wins: slices are never larger than asked.
      {262144, 4, 4096, 4, 1024},
      // 1-byte types: 1 MiB of int8 over 8 reducers is 64 pieces of 16 KiB, raised to 32 KiB.
      {1 << 20, 1, 256 << 10, 8, 32768},
      // 8-byte types: 3 MiB of float64 over 3 reducers is 24 pieces of 128 KiB.
      {393216, 8, 256 << 10, 3, 16384},
      // An element larger than the max slice still makes progress: one element a slice.
      {10, 8, 4, 1, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.count << " x " << c.elt << " B, max " << c.max_slice_bytes
                                    << ", " << c.reducers << " reducers");
    EXPECT_EQ(sliceElements(c.count, c.elt, c.max_slice_bytes, c.reducers), c.want);
  }
}

TEST(Slicing, FastLinksAndLoopbackGetFewerLargerSlices) {
  const uint64_t kMax = 256 << 10;
  const SlicePlan slow = choosePlan(kMax, 0, 0, false, 200);
  EXPECT_EQ(slow.per_reducer, kSlicesPerReducer);
  EXPECT_EQ(slow.min_slice_bytes, kMinSliceBytes);
  EXPECT_EQ(slow.max_slice_bytes, kMax);
  for (const SlicePlan& fast :
       {choosePlan(kMax, 0, 0, true, 0), choosePlan(kMax, 0, 0, false, 100000)}) {
    EXPECT_EQ(fast.per_reducer, kFastSlicesPerReducer);
    EXPECT_EQ(fast.min_slice_bytes, kFastMinSliceBytes);
  }
  // Settings win over the link.
  const SlicePlan set = choosePlan(kMax, 5, 48 << 10, true, 0);
  EXPECT_EQ(set.per_reducer, 5u);
  EXPECT_EQ(set.min_slice_bytes, uint64_t{48} << 10);
  // A 1 MiB float call over 2 reducers: 16 slices of 64 KiB on a slow link, 4 of 256 KiB on a
  // fast one.
  const uint64_t count = (1 << 20) / 4;
  EXPECT_EQ(sliceElements(count, 4, slow, 2), count / 16);
  EXPECT_EQ(sliceElements(count, 4, choosePlan(kMax, 0, 0, true, 0), 2), count / 4);
  // A slice plan never cuts below its smallest slice, nor above the largest.
  EXPECT_EQ(sliceElements(count, 4, set, 8), (uint64_t{48} << 10) / 4);
  EXPECT_EQ(sliceElements(count * 64, 4, set, 1), kMax / 4);
}

// Below kFastLinkMbps: 32 KiB slices while a millisecond of the link is at most 128 KiB
// (1048 Mbit/s), 128 KiB above; 64 KiB is never chosen.
TEST(Slicing, SlowLinkSlicesGrowWithTheLinkSpeed) {
  const struct {
    int mbps;
    uint64_t want;
  } cases[] = {{0, 32 << 10},     {-5, 32 << 10},     {100, 32 << 10},   {400, 32 << 10},
               {1000, 32 << 10},  {1048, 32 << 10},   {1049, 128 << 10}, {10000, 128 << 10},
               {24999, 128 << 10}};
  for (const auto& c : cases) {
    EXPECT_EQ(slowLinkMinSliceBytes(c.mbps), c.want) << c.mbps << " Mb/s";
    const SlicePlan p = choosePlan(256 << 10, 0, 0, false, c.mbps);
    EXPECT_EQ(p.min_slice_bytes, c.want) << c.mbps << " Mb/s";
    EXPECT_EQ(p.per_reducer, kSlicesPerReducer) << c.mbps << " Mb/s";
  }
  // A 1 MiB float call over 4 reducers: 32 slices of 32 KiB at 1 Gbit/s, 8 of 128 KiB at
  // 10 Gbit/s.
  const uint64_t count = (1 << 20) / 4;
  EXPECT_EQ(sliceElements(count, 4, choosePlan(256 << 10, 0, 0, false, 1000), 4), count / 32);
  EXPECT_EQ(sliceElements(count, 4, choosePlan(256 << 10, 0, 0, false, 10000), 4), count / 8);
}

TEST(Slicing, ZeroReducersCountsAsOne) {
  EXPECT_EQ(sliceElements(1 << 20, 4, 256 << 10, 0), sliceElements(1 << 20, 4, 256 << 10, 1));
}

// All-gather and reduce-scatter windows: 3 ranks of 10 elements, the vector is [0, 30).
TEST(Slicing, RankPartsOfAWindow) {
  // The window [8, 23): rank 0 owns [8, 10), rank 1 all of [10, 20), rank 2 [20, 23); offsets
  // are window-relative.
  EXPECT_EQ(rankPart(0, 10, 8, 15), (Span{0, 2}));
  EXPECT_EQ(rankPart(1, 10, 8, 15), (Span{2, 10}));
  EXPECT_EQ(rankPart(2, 10, 8, 15), (Span{12, 3}));
  // A window inside one rank's part misses the others.
  EXPECT_EQ(rankPart(1, 10, 12, 5), (Span{0, 5}));
  EXPECT_EQ(rankPart(0, 10, 12, 5).count, 0u);
  EXPECT_EQ(rankPart(2, 10, 12, 5).count, 0u);
  // Window edges on part edges.
  EXPECT_EQ(rankPart(1, 10, 10, 10), (Span{0, 10}));
  EXPECT_EQ(rankPart(0, 10, 10, 10).count, 0u);
  EXPECT_EQ(rankPart(2, 10, 10, 10).count, 0u);
  // The whole vector.
  EXPECT_EQ(rankPart(2, 10, 0, 30), (Span{20, 10}));
}

TEST(Slicing, PiecesOfASliceAndSlicesOfACall) {
  EXPECT_EQ(sliceSpan(10, 4, 0), (Span{0, 4}));
  EXPECT_EQ(sliceSpan(10, 4, 2), (Span{8, 2}));
  EXPECT_EQ(sliceSpan(10, 4, 3).count, 0u);
  // The part [2, 12) cuts slices [0, 4), [4, 8), [8, 12), [12, 15).
  const Span part{2, 10};
  EXPECT_EQ(pieceOf(Span{0, 4}, part), (Span{2, 2}));
  EXPECT_EQ(pieceOf(Span{4, 4}, part), (Span{4, 4}));
  EXPECT_EQ(pieceOf(Span{8, 4}, part), (Span{8, 4}));
  // An empty piece sits at its slice's start, whichever side it misses on.
  EXPECT_EQ(pieceOf(Span{12, 3}, part), (Span{12, 0}));
  EXPECT_EQ(pieceOf(Span{0, 2}, part), (Span{0, 0}));
  EXPECT_EQ(pieceOf(Span{0, 4}, Span{4, 0}), (Span{0, 0}));
  // Every element of a window belongs to exactly one rank's piece of its slice.
  const uint64_t nranks = 4, rank_count = 7, offset = 5, total = 19, per_slice = 3;
  for (uint64_t j = 0; j * per_slice < total; ++j) {
    const Span slice = sliceSpan(total, per_slice, j);
    uint64_t covered = 0;
    for (uint64_t r = 0; r < nranks; ++r) {
      const Span piece = pieceOf(slice, rankPart(r, rank_count, offset, total));
      covered += piece.count;
      if (piece.count > 0) {
        EXPECT_GE(piece.offset, slice.offset);
        EXPECT_LE(piece.offset + piece.count, slice.offset + slice.count);
      }
    }
    EXPECT_EQ(covered, slice.count) << "slice " << j;
  }
}

}  // namespace
}  // namespace tally::protocol
