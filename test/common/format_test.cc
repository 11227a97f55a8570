// SPDX-License-Identifier: Apache-2.0
// formatBytes (common/sizes.h): the largest binary unit that divides the count exactly.
#include <gtest/gtest.h>

#include "common/sizes.h"

namespace tally {
namespace {

TEST(FormatBytes, LargestExactBinaryUnit) {
  EXPECT_EQ(formatBytes(0), "0 B");
  EXPECT_EQ(formatBytes(1000), "1000 B");
  EXPECT_EQ(formatBytes(1024), "1 KiB");
  EXPECT_EQ(formatBytes(1536), "1536 B");
  EXPECT_EQ(formatBytes(256 * 1024), "256 KiB");
  EXPECT_EQ(formatBytes(3 << 20), "3 MiB");
  EXPECT_EQ(formatBytes((1ull << 20) + 1024), "1025 KiB");
  EXPECT_EQ(formatBytes(64ull << 30), "65536 MiB");
}

}  // namespace
}  // namespace tally
