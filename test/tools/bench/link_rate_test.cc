// SPDX-License-Identifier: Apache-2.0
// The Mb/s an emulated node's NIC would report for each way tc writes a rate.
#include "tools/bench/link_rate.h"

#include <gtest/gtest.h>

namespace tally::bench {
namespace {

TEST(LinkRate, TcRatesInMegabitsASecond) {
  const struct {
    const char* rate;
    int64_t mbps;
  } cases[] = {
      {"1gbit", 1000},  {"400mbit", 400},   {"200Mbit", 200},     {"2.5gbit", 2500},
      {"100gbit", 100000}, {"1tbit", 1000000}, {"500kbit", 1},     {"1499kbit", 1},
      {"1500kbit", 2},  {"1000000bit", 1},  {"100mbps", 800},     {"1gbps", 8000},
      {"125kbps", 1},   {"1bit", 1},
  };
  for (const auto& c : cases) EXPECT_EQ(rateMbps(c.rate), c.mbps) << c.rate;
}

// What --emulate refuses: no number, two dots, an unknown or missing unit, a rate of 0.
TEST(LinkRate, RefusesWhatTcWouldNot) {
  for (const char* bad : {"", "fast", "mbit", "1.2.3mbit", "1mb", "100", "1 gbit", "0mbit",
                          "0.0gbit", "-1gbit"}) {
    double bits = -1;
    EXPECT_FALSE(parseTcRate(bad, &bits)) << bad;
    EXPECT_EQ(bits, -1) << bad;
    EXPECT_EQ(rateMbps(bad), 0) << bad;
  }
  double bits = 0;
  ASSERT_TRUE(parseTcRate("1.5GBit", &bits));
  EXPECT_EQ(bits, 1.5e9);
}

// The rate of a slowed link (--fault slow-reducer, --slow-factor), as tc reads it back.
TEST(LinkRate, DividedRatesInWholeBits) {
  const struct {
    const char* rate;
    double factor;
    const char* divided;
  } cases[] = {
      {"400mbit", 10, "40mbit"}, {"400mbit", 3, "133333333bit"}, {"1gbit", 2.5, "400mbit"},
      {"1gbit", 1, "1gbit"},     {"200mbit", 8, "25mbit"},       {"100mbps", 10, "80mbit"},
      {"500kbit", 4, "125kbit"}, {"1.5gbit", 1000, "1500kbit"},  {"10bit", 100, "1bit"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(dividedRate(c.rate, c.factor), c.divided) << c.rate << " / " << c.factor;
    double bits = 0;
    EXPECT_TRUE(parseTcRate(dividedRate(c.rate, c.factor), &bits)) << c.rate;
  }
  EXPECT_EQ(dividedRate("fast", 10), "");
  EXPECT_EQ(dividedRate("400mbit", 0), "");
  EXPECT_EQ(dividedRate("400mbit", -2), "");
}

}  // namespace
}  // namespace tally::bench
