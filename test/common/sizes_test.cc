// SPDX-License-Identifier: Apache-2.0
// common/sizes.h: parseBytes, the rounded formatter (the exact one is in format_test.cc) and the
// duration parser every duration flag and variable goes through.
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

// ---- durations -------------------------------------------------------------------------------

constexpr int64_t kMs = 1000000;  // ns
constexpr int64_t kS = 1000 * kMs;

int64_t nsOf(const std::string& text, DurationUnit bare = DurationUnit::kNone) {
  int64_t v = -1;
  const Status st = parseDuration(text, bare, &v);
  EXPECT_TRUE(st.isOk()) << text << ": " << st.message();
  return v;
}

// The message for a refused value, after checking that *out was left alone.
std::string refusal(const std::string& text, DurationUnit bare = DurationUnit::kNone) {
  int64_t v = 99;
  const Status st = parseDuration(text, bare, &v);
  EXPECT_EQ(st.code(), StatusCode::kInvalidUsage) << text;
  EXPECT_EQ(v, 99) << text;
  return st.message();
}

TEST(ParseDuration, EveryUnit) {
  EXPECT_EQ(nsOf("7ns"), 7);
  EXPECT_EQ(nsOf("50us"), 50000);
  EXPECT_EQ(nsOf("500ms"), 500 * kMs);
  EXPECT_EQ(nsOf("5s"), 5 * kS);
  EXPECT_EQ(nsOf("2m"), 120 * kS);
  EXPECT_EQ(nsOf("2min"), 120 * kS);
  EXPECT_EQ(nsOf("1h"), 3600 * kS);
  EXPECT_EQ(nsOf(" 10 s "), 10 * kS);  // spaces around either part, as parseBytes allows
}

TEST(ParseDuration, FractionsAreExact) {
  EXPECT_EQ(nsOf("1.5s"), 1500 * kMs);
  EXPECT_EQ(nsOf("0.2ms"), 200000);
  EXPECT_EQ(nsOf("0.001s"), kMs);
  EXPECT_EQ(nsOf("1.25h"), 4500 * kS);
  EXPECT_EQ(nsOf("0.123456789s"), 123456789);
  EXPECT_EQ(nsOf("0.999999999h"), 3599999996400);
  EXPECT_EQ(nsOf("1.5ns"), 1);  // below a nanosecond is dropped
  EXPECT_NE(refusal("1.1234567891s").find("at most 9 digits after the point"), std::string::npos);
}

// A bare number is refused, with the accepted forms in the message, unless the setting's name
// carries the unit; 0 is zero in every unit.
TEST(ParseDuration, BareNumberIsRefusedWithTheAcceptedForms) {
  for (const char* bare : {"5", "60", "1.5", " 500 "}) {
    const std::string m = refusal(bare);
    EXPECT_NE(m.find(std::string("'") + bare + "' has no unit"), std::string::npos) << m;
    EXPECT_NE(m.find("500ms, 5s or 2m"), std::string::npos) << m;
  }
  EXPECT_EQ(nsOf("0"), 0);
  EXPECT_EQ(nsOf("0.0"), 0);
  EXPECT_EQ(nsOf("5", DurationUnit::kMilliseconds), 5 * kMs);
  EXPECT_EQ(nsOf("50", DurationUnit::kMicroseconds), 50000);
  EXPECT_EQ(nsOf("2", DurationUnit::kSeconds), 2 * kS);
  EXPECT_EQ(nsOf("1.5", DurationUnit::kMilliseconds), 1500000);
  // A written unit wins over the name's.
  EXPECT_EQ(nsOf("30s", DurationUnit::kMilliseconds), 30 * kS);
}

TEST(ParseDuration, RefusesNegativeGarbageAndOverflow) {
  EXPECT_NE(refusal("-5s").find("cannot be negative"), std::string::npos);
  EXPECT_NE(refusal(" -1", DurationUnit::kMilliseconds).find("cannot be negative"),
            std::string::npos);
  for (const char* bad : {"", " ", "s", "soon", "5x", "5 sec", "5ss", "5s extra", "1..5s", "1.s",
                          ".5s", "+5s", "5s5", "1e3ms", "0x10s", "5S"}) {
    const std::string m = refusal(bad);
    EXPECT_NE(m.find(std::string("expected a duration such as 500ms, 5s or 2m (units ns, us, ms, "
                                 "s, m, h), got '") +
                     bad + "'"),
              std::string::npos)
        << bad << ": " << m;
  }
  // INT64_MAX ns is 9223372036854775807: about 292 years.
  EXPECT_EQ(nsOf("9223372036854775807ns"), INT64_MAX);
  EXPECT_EQ(nsOf("9223372036.854775807s"), INT64_MAX);
  for (const char* big :
       {"9223372036854775808ns", "9223372036.854775808s", "2562048h", "99999999999999999999999s",
        "18446744073709551616", "18446744073709551615ms"}) {
    EXPECT_NE(refusal(big, DurationUnit::kMilliseconds).find("out of range"), std::string::npos)
        << big;
  }
}

TEST(ParseDurationMs, WholeMillisecondsOnly) {
  int64_t ms = -1;
  ASSERT_TRUE(parseDurationMs("1.5s", DurationUnit::kNone, &ms).isOk());
  EXPECT_EQ(ms, 1500);
  ASSERT_TRUE(parseDurationMs("300000", DurationUnit::kMilliseconds, &ms).isOk());
  EXPECT_EQ(ms, 300000);
  ASSERT_TRUE(parseDurationMs("2000us", DurationUnit::kNone, &ms).isOk());
  EXPECT_EQ(ms, 2);
  ASSERT_TRUE(parseDurationMs("0.001s", DurationUnit::kNone, &ms).isOk());
  EXPECT_EQ(ms, 1);
  // Counted in milliseconds, not in ns: past what int64 holds in ns, up to INT64_MAX ms.
  ASSERT_TRUE(parseDurationMs("10000000000000", DurationUnit::kMilliseconds, &ms).isOk());
  EXPECT_EQ(ms, 10000000000000);
  ASSERT_TRUE(parseDurationMs("9223372036854775807ms", DurationUnit::kNone, &ms).isOk());
  EXPECT_EQ(ms, INT64_MAX);
  EXPECT_NE(parseDurationMs("9223372036854775808ms", DurationUnit::kNone, &ms)
                .message()
                .find("out of range"),
            std::string::npos);
  EXPECT_NE(
      parseDurationMs("9223372036854776s", DurationUnit::kNone, &ms).message().find("out of range"),
      std::string::npos);
  ms = 7;
  for (const char* bad : {"1.5ms", "200us", "1ns"}) {
    const Status st = parseDurationMs(bad, DurationUnit::kNone, &ms);
    EXPECT_NE(st.message().find("a whole number of milliseconds"), std::string::npos) << bad;
    EXPECT_EQ(ms, 7);
  }
  const Status st = parseDurationMs("60", DurationUnit::kNone, &ms);
  EXPECT_NE(st.message().find("'60' has no unit"), std::string::npos) << st.message();
  EXPECT_EQ(ms, 7);
}

}  // namespace
}  // namespace tally
