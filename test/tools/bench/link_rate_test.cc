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

}  // namespace
}  // namespace tally::bench
