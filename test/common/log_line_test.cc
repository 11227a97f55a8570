// SPDX-License-Identifier: Apache-2.0
// The stderr sinks' lines (common/log.h formatLine): the reducer's carry a UTC timestamp to the
// millisecond, the plain ones none.
#include <gtest/gtest.h>

#include <string>

#include "common/log.h"

namespace tally::log {
namespace {

TEST(LogLine, TimestampedInUtcToTheMillisecond) {
  // 2026-12-06 22:10:05.042 UTC.
  const int64_t ms = 1796595005042;
  EXPECT_EQ(formatLine(Level::kWarn, "/src/reducer/session.cc", 42, "peer lost", ms),
            "2026-12-06T22:10:05.042Z tally WARN session.cc:42 peer lost");
  EXPECT_EQ(formatLine(Level::kInfo, "loop.cc", 7, "x", 0),
            "1970-01-01T00:00:00.000Z tally INFO loop.cc:7 x");
}

TEST(LogLine, PlainWithoutATimestamp) {
  EXPECT_EQ(formatLine(Level::kWarn, "/a/b/coll_client.cc", 699, "remote error", -1),
            "tally WARN coll_client.cc:699 remote error");
}

}  // namespace
}  // namespace tally::log
