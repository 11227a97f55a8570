// common/sizes.h: parseBytes and the rounded formatter (the exact one is in format_test.cc).
#include "common/sizes.h"

#include <gtest/gtest.h>

#include <string>

namespace tally {
namespace {

uint64_t bytesOf(const std::string& text) {
  uint64_t v = 0;
  const Status st = parseBytes(text, &v);
  EXPECT_TRUE(st.isOk()) << text << ": " << st.message();
  return v;
}

TEST(ParseBytes, CountsAndBinaryUnits) {
  EXPECT_EQ(bytesOf("0"), 0u);
  EXPECT_EQ(bytesOf("4096"), 4096u);
  EXPECT_EQ(bytesOf("17B"), 17u);
  EXPECT_EQ(bytesOf("64K"), 64u << 10);
  EXPECT_EQ(bytesOf("64k"), 64u << 10);
  EXPECT_EQ(bytesOf("64KB"), 64u << 10);
  EXPECT_EQ(bytesOf("64KiB"), 64u << 10);
  EXPECT_EQ(bytesOf("4M"), 4u << 20);
  EXPECT_EQ(bytesOf("4 mib"), 4u << 20);
  EXPECT_EQ(bytesOf("1G"), 1ull << 30);
  EXPECT_EQ(bytesOf(" 2 GB "), 2ull << 30);
  EXPECT_EQ(bytesOf("2T"), 2ull << 40);
  EXPECT_EQ(bytesOf("3tib"), 3ull << 40);
  EXPECT_EQ(bytesOf("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(bytesOf("16777215T"), 16777215ull << 40);  // the largest whole count of TiB
}

TEST(ParseBytes, RefusesBadTextAndLeavesOutputAlone) {
  for (const char* bad : {"", " ", "K", "-1", "1.5M", "64X", "64KK", "64 K B", "1P", "4M extra",
                          "16777216T", "18446744073709551616"}) {
    uint64_t v = 99;
    const Status st = parseBytes(bad, &v);
    EXPECT_EQ(st.code(), StatusCode::kInvalidUsage) << bad;
    EXPECT_NE(st.message().find(std::string("'") + bad + "'"), std::string::npos) << st.message();
    EXPECT_EQ(v, 99u) << bad;
  }
  uint64_t v = 0;
  EXPECT_NE(parseBytes("64X", &v).message().find("such as 4096, 64K"), std::string::npos);
  EXPECT_NE(parseBytes("16777216T", &v).message().find("out of range"), std::string::npos);
}

TEST(FormatBytes, SeparatorGoesBetweenNumberAndUnit) {
  EXPECT_EQ(formatBytes(256 * 1024, ""), "256KiB");
  EXPECT_EQ(formatBytes(32u << 20, ""), "32MiB");
  EXPECT_EQ(formatBytes(1000, ""), "1000B");
  EXPECT_EQ(formatBytes(2048, "_"), "2_KiB");
}

TEST(FormatBytes, ReadsBackThroughParseBytes) {
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{1023}, uint64_t{1024}, uint64_t{1536},
                     uint64_t{3} << 20, (uint64_t{1} << 20) + 1024, uint64_t{64} << 30}) {
    uint64_t back = 0;
    ASSERT_TRUE(parseBytes(formatBytes(n), &back).isOk()) << formatBytes(n);
    EXPECT_EQ(back, n);
  }
}

TEST(FormatBytesApprox, TwoDecimalsInTheLargestUnit) {
  EXPECT_EQ(formatBytesApprox(0), "0 B");
  EXPECT_EQ(formatBytesApprox(17), "17 B");
  EXPECT_EQ(formatBytesApprox(1023), "1023 B");
  EXPECT_EQ(formatBytesApprox(1024), "1.00 KiB");
  EXPECT_EQ(formatBytesApprox(12 * 1024), "12.00 KiB");
  EXPECT_EQ(formatBytesApprox(1536), "1.50 KiB");
  EXPECT_EQ(formatBytesApprox((1u << 20) - 1), "1024.00 KiB");  // rounds up, stays in KiB
  EXPECT_EQ(formatBytesApprox(1u << 20), "1.00 MiB");
  EXPECT_EQ(formatBytesApprox(6034333409ull), "5.62 GiB");
  EXPECT_EQ(formatBytesApprox(1ull << 40), "1.00 TiB");
  EXPECT_EQ(formatBytesApprox(1ull << 50), "1.00 PiB");
  EXPECT_EQ(formatBytesApprox(1ull << 60), "1024.00 PiB");  // PiB is the largest unit
  EXPECT_EQ(formatBytesApprox(UINT64_MAX), "16384.00 PiB");
}

}  // namespace
}  // namespace tally
