// SPDX-License-Identifier: Apache-2.0
// The summary tally-kernels-bench prints (tools/bench/kernels_bench_summary.h): bytes counted
// per row, fractions taken against the copy of the same bytes, targets marked.
#include "tools/bench/kernels_bench_summary.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tally::bench {
namespace {

BenchCase sumCase(const std::string& type, int elem_bytes, int k, size_t bytes) {
  BenchCase c;
  c.kernel = "reduce";
  c.type_name = type;
  c.elem_bytes = elem_bytes;
  c.inputs = k;
  c.buffer_bytes = bytes;
  c.name = "sum/" + type + "/" + std::to_string(k) + "in/" + sizeLabel(bytes);
  return c;
}

BenchCase copyCase(int k, size_t bytes) {
  BenchCase c;
  c.kernel = "memcpy";
  c.inputs = k;
  c.buffer_bytes = bytes;
  c.name = "copy/" + std::to_string(k) + "in/" + sizeLabel(bytes);
  return c;
}

constexpr size_t kMiB = size_t{1} << 20;

TEST(KernelsBenchSummary, CountsReadsAndTheWriteAndCopiesTheSameBytes) {
  const BenchCase sum = sumCase("float32", 4, 8, 32 * kMiB);
  EXPECT_DOUBLE_EQ(sum.movedBytes(), 9.0 * 32 * kMiB);
  EXPECT_DOUBLE_EQ(sum.usefulBytes(), 8.0 * 32 * kMiB);
  const BenchCase copy = copyCase(8, 32 * kMiB);
  EXPECT_EQ(copy.copyBytes(), 9 * 16 * kMiB);
  EXPECT_DOUBLE_EQ(copy.movedBytes(), sum.movedBytes());
  EXPECT_DOUBLE_EQ(copy.usefulBytes(), 9.0 * 16 * kMiB);
  EXPECT_EQ(copyCase(2, 256 * 1024).copyBytes(), size_t{384} * 1024);
}

TEST(KernelsBenchSummary, FractionOfTheMatchingCopyAndTargets) {
  const std::vector<BenchCase> cases = {
      copyCase(8, 32 * kMiB), copyCase(2, 32 * kMiB), sumCase("float32", 4, 8, 32 * kMiB),
      sumCase("bfloat16", 2, 8, 32 * kMiB), sumCase("float16", 2, 2, 32 * kMiB),
      sumCase("f8e4m3", 1, 8, 32 * kMiB)};
  const std::vector<Measurement> measured = {
      {"copy/8in/32MiB", 40e9}, {"copy/2in/32MiB", 20e9},
      {"sum/float32/8in/32MiB", 34e9},   // 0.85 of its copy: met (>= 0.80)
      {"sum/bfloat16/8in/32MiB", 18e9},  // 0.45: not met (>= 0.50)
      {"sum/float16/2in/32MiB", 15e9},   // 0.75 of the k = 2 copy, no target
      {"sum/f8e4m3/8in/32MiB", 4e9}};
  const std::vector<SummaryRow> rows = summarize(cases, measured);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_DOUBLE_EQ(*rows[0].copy_fraction, 1.0);
  EXPECT_DOUBLE_EQ(rows[2].moved_gbs, 34.0);
  EXPECT_NEAR(rows[2].useful_gbs, 34.0 * 8 / 9, 1e-9);
  EXPECT_NEAR(*rows[2].copy_fraction, 0.85, 1e-12);
  EXPECT_TRUE(rows[2].targetMet());
  EXPECT_NEAR(*rows[3].copy_fraction, 0.45, 1e-12);
  EXPECT_DOUBLE_EQ(*rows[3].target, 0.50);
  EXPECT_FALSE(rows[3].targetMet());
  EXPECT_NEAR(*rows[4].copy_fraction, 0.75, 1e-12);
  EXPECT_FALSE(rows[4].target.has_value());
  EXPECT_FALSE(rows[5].target.has_value());

  const std::string table = formatSummary(rows, "avx512");
  EXPECT_NE(table.find("Summary: sums on avx512"), std::string::npos) << table;
  EXPECT_NE(table.find(">= 0.80 met"), std::string::npos) << table;
  EXPECT_NE(table.find(">= 0.50 NOT MET"), std::string::npos) << table;
  EXPECT_NE(table.find("0.85"), std::string::npos) << table;
}

TEST(KernelsBenchSummary, MedianOfRepetitionsAndMissingBaseline) {
  const std::vector<BenchCase> cases = {sumCase("float32", 4, 8, 256 * 1024),
                                        sumCase("float32", 4, 4, 256 * 1024)};
  const std::vector<Measurement> measured = {{"sum/float32/8in/256KiB", 10e9},
                                             {"sum/float32/8in/256KiB", 30e9},
                                             {"sum/float32/8in/256KiB", 20e9}};
  const std::vector<SummaryRow> rows = summarize(cases, measured);
  ASSERT_EQ(rows.size(), 1u);  // the k = 4 case never ran
  EXPECT_DOUBLE_EQ(rows[0].moved_gbs, 20.0);
  EXPECT_FALSE(rows[0].copy_fraction.has_value());
  EXPECT_FALSE(rows[0].targetMet());
  EXPECT_NE(formatSummary(rows, "generic").find("unknown (no copy)"), std::string::npos);
}

TEST(KernelsBenchSummary, TargetsAreTheIssues) {
  EXPECT_DOUBLE_EQ(*targetFraction("float32", 8), 0.80);
  EXPECT_DOUBLE_EQ(*targetFraction("bfloat16", 8), 0.50);
  EXPECT_DOUBLE_EQ(*targetFraction("float16", 8), 0.50);
  EXPECT_FALSE(targetFraction("float32", 4).has_value());
  EXPECT_FALSE(targetFraction("f8e5m2", 8).has_value());
  EXPECT_EQ(sizeLabel(256 * 1024), "256KiB");
  EXPECT_EQ(sizeLabel(32 * kMiB), "32MiB");
  EXPECT_EQ(sizeLabel(1000), "1000B");
}

}  // namespace
}  // namespace tally::bench
