// SPDX-License-Identifier: Apache-2.0
// The GPU checks compare NCCL's results with values.h's reference exactly; these tests prove
// that is sound on any machine: the small float encoders match known bit patterns, and every
// input, partial result (in either order) and expected value is held exactly by its type.
#include "test/gpu/values.h"

#include <gtest/gtest.h>

#include <set>

namespace tally::gpucheck {
namespace {

uint64_t bitsOf(int e, int m, bool fn, double x) {
  uint64_t bits = ~uint64_t{0};
  EXPECT_TRUE(encodeSmallFloat(x, e, m, fn, &bits)) << x;
  return bits;
}

TEST(GpuValues, SmallFloatsMatchKnownBitPatterns) {
  // float16
  EXPECT_EQ(bitsOf(5, 10, false, 1.0), 0x3c00u);
  EXPECT_EQ(bitsOf(5, 10, false, -2.0), 0xc000u);
  EXPECT_EQ(bitsOf(5, 10, false, 2048.0), 0x6800u);
  EXPECT_EQ(bitsOf(5, 10, false, 65504.0), 0x7bffu);
  EXPECT_EQ(bitsOf(5, 10, false, 0.25), 0x3400u);
  // bfloat16
  EXPECT_EQ(bitsOf(8, 7, false, 1.0), 0x3f80u);
  EXPECT_EQ(bitsOf(8, 7, false, 256.0), 0x4380u);
  EXPECT_EQ(bitsOf(8, 7, false, -3.0), 0xc040u);
  // float8 e4m3 (finite, NaN only at S.1111.111) and e5m2
  EXPECT_EQ(bitsOf(4, 3, true, 1.0), 0x38u);
  EXPECT_EQ(bitsOf(4, 3, true, 16.0), 0x58u);
  EXPECT_EQ(bitsOf(4, 3, true, 448.0), 0x7eu);
  EXPECT_EQ(bitsOf(4, 3, true, -4.0), 0xc8u);
  EXPECT_EQ(bitsOf(5, 2, false, 1.0), 0x3cu);
  EXPECT_EQ(bitsOf(5, 2, false, 7.0), 0x47u);
  EXPECT_EQ(bitsOf(5, 2, false, 57344.0), 0x7bu);
  EXPECT_EQ(bitsOf(5, 2, false, 0.0), 0x00u);

  uint64_t bits = 0;
  EXPECT_FALSE(encodeSmallFloat(2049.0, 5, 10, false, &bits));  // needs 12 significant bits
  EXPECT_FALSE(encodeSmallFloat(257.0, 8, 7, false, &bits));
  EXPECT_FALSE(encodeSmallFloat(17.0, 4, 3, true, &bits));
  EXPECT_FALSE(encodeSmallFloat(480.0, 4, 3, true, &bits));     // S.1111.111 is NaN in e4m3
  EXPECT_FALSE(encodeSmallFloat(65536.0, 5, 2, false, &bits));  // the infinity exponent
  EXPECT_FALSE(encodeSmallFloat(9.0, 5, 2, false, &bits));
}

TEST(GpuValues, EverySmallFloatPatternDecodesAndEncodesBack) {
  struct Format {
    int e, m;
    bool fn;
  };
  for (const Format f : {Format{4, 3, true}, Format{5, 2, false}, Format{5, 10, false}}) {
    const uint64_t patterns = uint64_t{1} << (1 + f.e + f.m);
    int finite = 0;
    for (uint64_t bits = 0; bits < patterns; ++bits) {
      const double x = decodeSmallFloat(bits, f.e, f.m, f.fn);
      if (!std::isfinite(x)) continue;
      ++finite;
      uint64_t back = ~uint64_t{0};
      ASSERT_TRUE(encodeSmallFloat(x, f.e, f.m, f.fn, &back)) << bits;
      EXPECT_EQ(back, bits) << x;
    }
    // e4m3: 2 NaNs; e5m2 and float16: the top exponent (2 x 2^m patterns) is inf/NaN.
    EXPECT_EQ(finite, f.fn ? 254 : static_cast<int>(patterns - (uint64_t{2} << f.m)));
  }
  EXPECT_EQ(decodeSmallFloat(0x7e, 4, 3, true), 448.0);
  EXPECT_EQ(decodeSmallFloat(0x01, 5, 10, false), std::ldexp(1.0, -24));  // smallest subnormal
}

bool exact(int type, int64_t v) {
  unsigned char cell[8];
  return store(type, v, cell, 0) && load(type, cell, 0) == static_cast<double>(v);
}

int64_t combine(int op, int64_t a, int64_t b) {
  switch (op) {
    case kProd:
      return a * b;
    case kMax:
      return std::max(a, b);
    case kMin:
      return std::min(a, b);
    default:
      return a + b;
  }
}

TEST(GpuValues, InputsPartialResultsAndReferenceAreExactInEveryType) {
  for (int type = 0; type < kNumTypes; ++type) {
    const bool is_unsigned = typeInfo(type).kind == Kind::kUnsigned;
    for (int op = 0; op < kNumOps; ++op) {
      for (int n : {2, 3, 4, 8}) {
        for (size_t i = 0; i < 3000; ++i) {
          std::vector<int64_t> in;
          for (int r = 0; r < n; ++r) {
            in.push_back(inputValue(type, op, r, n, i, 7));
            ASSERT_TRUE(exact(type, in.back())) << typeInfo(type).name << " " << in.back();
            if (is_unsigned) {
              ASSERT_GE(in.back(), 0);
            }
          }
          int64_t forward = in[0], backward = in[n - 1];
          for (int k = 1; k < n; ++k) {
            forward = combine(op, forward, in[static_cast<size_t>(k)]);
            backward = combine(op, backward, in[static_cast<size_t>(n - 1 - k)]);
            ASSERT_TRUE(exact(type, forward) && exact(type, backward))
                << typeInfo(type).name << " " << opName(op) << " n=" << n;
          }
          const int64_t want = expectedValue(type, op, n, i, 7);
          ASSERT_TRUE(exact(type, want));
          if (op == kAvg) {
            ASSERT_EQ(forward, want * n) << "avg inputs must add up to n times the result";
            // NCCL scales each input by 1/n first when n is a power of two: still exact.
            if ((n & (n - 1)) == 0 && typeInfo(type).kind == Kind::kFloat) {
              double scaled_sum = 0;
              for (int64_t v : in) scaled_sum += static_cast<double>(v) / n;
              EXPECT_EQ(scaled_sum, static_cast<double>(want));
            }
          } else {
            ASSERT_EQ(forward, want);
          }
        }
      }
    }
  }
}

TEST(GpuValues, InputsVaryEnoughToCatchAWrongResult) {
  for (int type = 0; type < kNumTypes; ++type) {
    for (int op = 0; op < kNumOps; ++op) {
      std::set<int64_t> results;
      int missing_rank_visible = 0;
      for (size_t i = 0; i < 1000; ++i) {
        results.insert(expectedValue(type, op, 4, i, 7));
        // Leaving out the last rank's input changes the result on many elements.
        int64_t three = inputValue(type, op, 0, 4, i, 7);
        for (int r = 1; r < 3; ++r) three = combine(op, three, inputValue(type, op, r, 4, i, 7));
        missing_rank_visible += combine(op, three, inputValue(type, op, 3, 4, i, 7)) != three;
      }
      EXPECT_GE(results.size(), 3u) << typeInfo(type).name << " " << opName(op);
      EXPECT_GE(missing_rank_visible, 100) << typeInfo(type).name << " " << opName(op);
    }
  }
  // Ranks and seeds give different inputs.
  EXPECT_NE(inputValue(7, kSum, 0, 4, 5, 7), inputValue(7, kSum, 1, 4, 5, 7));
  EXPECT_NE(expectedValue(7, kSum, 4, 5, 7), expectedValue(7, kSum, 4, 5, 8));
}

TEST(GpuValues, AvgToleranceOnlyWhereNcclRounds) {
  EXPECT_EQ(avgTolerance(7, kAvg, 4, 10.0), 0.0);
  EXPECT_EQ(avgTolerance(2, kAvg, 3, 10.0), 0.0);  // integers divide exactly
  EXPECT_EQ(avgTolerance(7, kSum, 3, 10.0), 0.0);
  EXPECT_GT(avgTolerance(7, kAvg, 3, 10.0), 0.0);
  EXPECT_LT(avgTolerance(7, kAvg, 3, 10.0), 1e-5);
}

}  // namespace
}  // namespace tally::gpucheck
