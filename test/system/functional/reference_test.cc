// SPDX-License-Identifier: Apache-2.0
// The reference the functional tests and the demo check against (tools/driver/reference.h):
// its inputs are exact in every type and its expected result agrees with tally::reduce.
#include "tools/driver/reference.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/float_formats.h"
#include "kernels/kernels.h"

namespace tally::driver {
namespace {

TEST(Reference, EncodeExactAgreesWithTheConverters) {
  const double values[] = {0, 1, -1, 2, 0.5, -0.5, 0.25, 3, 7, -8, 16, 256, 1.5, 0.00390625};
  for (double v : values) {
    uint16_t h = 0, b = 0;
    uint8_t e4 = 0, e5 = 0;
    encodeExact(DataType::kFloat16, v, &h);
    encodeExact(DataType::kBfloat16, v, &b);
    EXPECT_EQ(h, floatToHalf(static_cast<float>(v))) << v;
    EXPECT_EQ(b, floatToBfloat16(static_cast<float>(v))) << v;
    if (v <= 16) {  // exact in both float8 formats only in this range
      encodeExact(DataType::kFloat8e4m3, v, &e4);
      EXPECT_EQ(e4, floatToFp8e4m3(static_cast<float>(v))) << v;
      EXPECT_EQ(fp8e4m3ToFloat(e4), static_cast<float>(v)) << v;
    }
    if (v <= 8 && v != 0.00390625) {
      encodeExact(DataType::kFloat8e5m2, v, &e5);
      EXPECT_EQ(e5, floatToFp8e5m2(static_cast<float>(v))) << v;
    }
  }
  // A float8 e4m3 subnormal: 2^-8 = 2 x 2^-9.
  uint8_t sub = 0;
  encodeExact(DataType::kFloat8e4m3, 0.00390625, &sub);
  EXPECT_EQ(sub, 0x02);
}

// For every type and op, combining the ranks' inputs with the kernels gives the reference.
TEST(Reference, ExpectedMatchesKernelsForEveryTypeAndOp) {
  const size_t count = 1000;
  for (int nranks : {2, 3, 8}) {
    for (int t = 0; t < kNumDataTypes; ++t) {
      for (int o = 0; o < kNumReduceOps; ++o) {
        auto type = static_cast<DataType>(t);
        auto op = static_cast<ReduceOp>(o);
        size_t bytes = count * dataTypeSize(type);
        std::vector<std::vector<char>> inputs(static_cast<size_t>(nranks),
                                              std::vector<char>(bytes));
        std::vector<const void*> srcs;
        for (int r = 0; r < nranks; ++r) {
          fillInput(type, op, r, nranks, 42, count, inputs[static_cast<size_t>(r)].data());
          srcs.push_back(inputs[static_cast<size_t>(r)].data());
        }
        std::vector<char> got(bytes), expected(bytes);
        reduce(type, op, got.data(), srcs.data(), nranks, count);
        fillExpected(type, op, nranks, 42, count, expected.data());
        size_t first = 0;
        size_t bad = countMismatches(type, got.data(), expected.data(), count, &first);
        EXPECT_EQ(bad, 0u) << reduceOpName(op) << " nranks " << nranks << " "
                           << (bad ? describeElement(type, got.data(), expected.data(), first)
                                   : "");
      }
    }
  }
}

TEST(Reference, InputsDifferByRankAndSeed) {
  std::vector<float> a(64), b(64), c(64);
  fillInput(DataType::kFloat32, ReduceOp::kSum, 0, 4, 1, 64, a.data());
  fillInput(DataType::kFloat32, ReduceOp::kSum, 1, 4, 1, 64, b.data());
  fillInput(DataType::kFloat32, ReduceOp::kSum, 0, 4, 2, 64, c.data());
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
}

}  // namespace
}  // namespace tally::driver
