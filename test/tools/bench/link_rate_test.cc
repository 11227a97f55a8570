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

}  // namespace
}  // namespace tally::bench
