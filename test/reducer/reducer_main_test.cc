// SPDX-License-Identifier: Apache-2.0
// tally-reducer as a process: the ready line, SIGTERM, bad arguments.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "test/support/reducer_child.h"

namespace {

using tally::reducer::test::reapReducer;
using tally::reducer::test::ReducerChild;
using tally::reducer::test::spawnReducer;

TEST(ReducerMainTest, PrintsReadyLineAndStopsOnSigterm) {
  ReducerChild c = spawnReducer({"--listen", "127.0.0.1:0", "--threads", "2"});
  ASSERT_GT(c.pid, 0);
  char line[256] = {};
  ASSERT_NE(fgets(line, sizeof(line), c.out), nullptr);
  std::string s(line);
  EXPECT_EQ(s.rfind("tally-reducer listening on 127.0.0.1:", 0), 0u) << s;
  EXPECT_NE(s.substr(s.rfind(':') + 1), "0\n") << s;
  kill(c.pid, SIGTERM);
  EXPECT_EQ(reapReducer(c.pid), 0);
  fclose(c.out);
}

TEST(ReducerMainTest, BadArgumentsExitTwo) {
  for (auto args : std::vector<std::vector<std::string>>{
           {}, {"--listen", "127.0.0.1:0", "--threads", "0"}, {"--bogus"},
           {"--listen", "127.0.0.1:0", "--window", "x"}}) {
    ReducerChild c = spawnReducer(args);
    ASSERT_GT(c.pid, 0);
    EXPECT_EQ(reapReducer(c.pid), 2);
    fclose(c.out);
  }
}

}  // namespace
