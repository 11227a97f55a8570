// SPDX-License-Identifier: Apache-2.0
// `tally env` run as a user runs it, with exactly the environment given: every value the plugin
// would refuse at start-up and every TALLY_ name it does not know is a line "tally env: ..." on
// stderr naming the variable, and the exit status is 1 (common/params.h, findParamProblems).
#include <gtest/gtest.h>

#include <string>

#include "test/support/command_run.h"

namespace tally::commands {
namespace {

test::CommandRun tallyEnv(const std::string& assignments) {
  return test::runCommand("env -i " + assignments + " '" + TALLY_BIN + "' env");
}

TEST(TallyEnvCommand, RefusesWhatThePluginRefuses) {
  const struct {
    const char* assignment;
    const char* line;  // the start of the line that must be printed
  } cases[] = {
      {"TALLY_COLL_WINDOW=100000",
       "tally env: TALLY_COLL_WINDOW=100000 is not valid: expected 1 to 4096"},
      {"TALLY_REDUCERS=host-without-port",
       "tally env: TALLY_REDUCERS=host-without-port is not valid: bad address"},
      {"TALLY_JOB_TOKEN_FILE=/nonexistent/tally-token",
       "tally env: TALLY_JOB_TOKEN_FILE=/nonexistent/tally-token is not valid: "},
      {"TALLY_REDUCER=r0:2222",
       "tally env: TALLY_REDUCER is not a Tally variable; did you mean TALLY_REDUCERS?"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.assignment);
    const test::CommandRun run = tallyEnv(c.assignment);
    EXPECT_EQ(run.status, 1) << run.out;
    EXPECT_NE(run.out.find(c.line), std::string::npos) << run.out;
    // The listing is still printed in full.
    EXPECT_NE(run.out.find("TALLY_REJOIN_INTERVAL_MS"), std::string::npos) << run.out;
  }
  // A misspelled secret's value is never printed.
  const test::CommandRun secret = tallyEnv("TALLY_JOB_TOKN=do-not-print-this-secret");
  EXPECT_EQ(secret.status, 1) << secret.out;
  EXPECT_EQ(secret.out.find("do-not-print-this-secret"), std::string::npos) << secret.out;
}

TEST(TallyEnvCommand, GoodValuesAndSchedulerVariablesPass) {
  const test::CommandRun run = tallyEnv(
      "TALLY_COLL_WINDOW=16 TALLY_REDUCERS=r0:2222,r1:2222 TALLY_JOBSET_NAME=train "
      "NCCL_ALGO=ring");
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_EQ(run.out.find("tally env: "), std::string::npos) << run.out;
}

TEST(TallyEnvCommand, HelpStatesTheExitStatus) {
  const test::CommandRun run = test::runCommand(std::string("'") + TALLY_BIN + "' env --help");
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("Exit status: 0"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace tally::commands
