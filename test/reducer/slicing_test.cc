// reducer/slicing.h: how a call is cut, checked against hand-computed cuts.
#include "reducer/slicing.h"

#include <gtest/gtest.h>

namespace tally::reducer {
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

TEST(Slicing, ZeroReducersCountsAsOne) {
  EXPECT_EQ(sliceElements(1 << 20, 4, 256 << 10, 0), sliceElements(1 << 20, 4, 256 << 10, 1));
}

}  // namespace
}  // namespace tally::reducer
