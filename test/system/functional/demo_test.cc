// SPDX-License-Identifier: Apache-2.0
// `tally demo` end to end, small: the command the project's main job runs must start reducers and
// workers, check every result and exit 0.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "test/support/cluster.h"

namespace tally::functional {
namespace {

TEST(Demo, SmallRunIsCorrectAndExitsZero) {
#ifndef TALLY_TEST_TALLY
  GTEST_SKIP() << "the tally command was not built";
#else
  if (pluginPath().empty() || reducerPath().empty())
    GTEST_SKIP() << "plugin or tally-reducer was not built";
  std::string cmd = "timeout 150 " + std::string(TALLY_TEST_TALLY) + " demo --plugin " +
                    pluginPath() + " --reducer " + reducerPath() +
                    " --workers 3 --reducers 2 --sizes 4K,256K,1M --iters 2 --warmup 1 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("all results correct"), std::string::npos) << out;
  EXPECT_NE(out.find("1 MiB"), std::string::npos) << out;
#endif
}

}  // namespace
}  // namespace tally::functional
