// SPDX-License-Identifier: Apache-2.0
// The built `tally` and `tally-reducer` given command lines they cannot parse: one line on stderr
// in Tally's words that names the option (with the nearest one for a typo) or what a value must
// be, and the exit status each command documents for a bad command line. And `tally help
// COMMAND`, which prints what `tally COMMAND --help` prints.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test/support/command_run.h"

namespace {

using tally::test::CommandRun;
using tally::test::runCommand;

// The program run with a clean environment (no TALLY_ variable of the host's leaks in).
std::string tally(const std::string& args) {
  return std::string("env -i '") + TALLY_BIN + "' " + args;
}
std::string reducer(const std::string& args) {
  return std::string("env -i '") + TALLY_REDUCER_BIN + "' " + args;
}
CommandRun stdoutOf(const std::string& command) {
  return runCommand("(" + command + " 2>/dev/null)");
}
CommandRun stderrOf(const std::string& command) {
  return runCommand("(" + command + " 2>&1 >/dev/null)");
}

struct Case {
  std::string args;
  int status;
  std::string says;  // the whole of stderr, without its newline
};

void expectEach(const std::vector<Case>& cases, std::string (*program)(const std::string&)) {
  for (const Case& c : cases) {
    const CommandRun r = stderrOf(program(c.args));
    EXPECT_EQ(r.status, c.status) << c.args << ":\n" << r.out;
    EXPECT_EQ(r.out, c.says + "\n") << c.args;
  }
}

TEST(TallyCommandLine, AMistypedOptionOfEachCommandNamesTheNearest) {
  expectEach(
      {
          {"bench --worker 3", 2, "tally bench: unknown option --worker; did you mean --workers?"},
          {"demo --worker 3", 2, "tally demo: unknown option --worker; did you mean --workers?"},
          {"plan --bukcet 64M", 2, "tally plan: unknown option --bukcet; did you mean --bucket?"},
          {"doctor --timout 5s", 3,
           "tally doctor: unknown option --timout; did you mean --timeout?"},
          {"env --markdwn", 2, "tally env: unknown option --markdwn; did you mean --markdown?"},
          {"launch --dry-rn -- true", 2,
           "tally launch: unknown option --dry-rn; did you mean --dry-run? Otherwise put `--` "
           "before the command: tally launch [--dry-run] -- CMD ARGS..."},
          {"--verison", 2, "tally: unknown option --verison; did you mean --version?"},
      },
      tally);
}

TEST(TallyCommandLine, AMissingOrBadValueNamesTheOptionAndWhatItTakes) {
  expectEach(
      {
          {"plan --predict-only --hosts 2 --link 1gbit --bucket", 2,
           "tally plan: --bucket needs a value: bytes of the all-reduce to predict, K/M/G binary "
           "units (default 64M)"},
          {"bench --workers 1", 2,
           "tally bench: --workers: expected an integer from 2 to 64, got '1'"},
          {"bench --workers many", 2,
           "tally bench: --workers: expected an integer from 2 to 64, got 'many'"},
          {"plan --mtu abc", 2, "tally plan: --mtu: expected an integer, got 'abc'"},
          {"doctor --probe-seconds 99", 3,
           "tally doctor: --probe-seconds: expected a number from 0 to 60, got '99'"},
          {"doctor extra", 3,
           "tally doctor: unexpected argument 'extra': doctor takes options only"},
      },
      tally);
  // tally plan --json puts the error in its JSON too.
  const CommandRun json = stdoutOf(tally("plan --json --mtu abc"));
  EXPECT_EQ(json.status, 2);
  EXPECT_EQ(json.out, "{\"error\": \"--mtu: expected an integer, got 'abc'\"}\n");
}

TEST(TallyCommandLine, HelpCommandPrintsTheCommandsHelp) {
  for (const char* command : {"bench", "demo", "env", "launch", "plan", "doctor"}) {
    const CommandRun help = stdoutOf(tally(std::string("help ") + command));
    const CommandRun flag = stdoutOf(tally(std::string(command) + " --help"));
    EXPECT_EQ(help.status, 0) << command;
    EXPECT_EQ(flag.status, 0) << command;
    EXPECT_FALSE(flag.out.empty()) << command;
    EXPECT_EQ(help.out, flag.out) << command;
  }
  const CommandRun top = stdoutOf(tally("help"));
  EXPECT_EQ(top.status, 0);
  EXPECT_EQ(top.out, stdoutOf(tally("--help")).out);
  // The usage line says "tally", not the path it was run by.
  EXPECT_NE(stdoutOf(tally("bench --help")).out.find("Usage: tally bench [OPTIONS]"),
            std::string::npos);
  const CommandRun typo = stderrOf(tally("help bnech"));
  EXPECT_EQ(typo.status, 2);
  EXPECT_NE(typo.out.find("tally: unknown command 'bnech'; did you mean 'bench'?"),
            std::string::npos)
      << typo.out;
}

TEST(ReducerCommandLine, ErrorsNameTheOptionAndWhatItTakes) {
  expectEach(
      {
          {"--lisen :0", 2, "tally-reducer: error: unknown option --lisen; did you mean --listen?"},
          {"", 2,
           "tally-reducer: error: --listen is required: HOST:PORT to listen on (port 0 "
           "picks one)"},
          {"--listen :0 --transport rdma", 2,
           "tally-reducer: error: --transport: expected one of auto, tcp, ofi, verbs, got 'rdma'"},
          {"--listen :0 --threads", 2,
           "tally-reducer: error: --threads needs a value: an integer from 1 to 1024 (event-loop "
           "threads, each serving many connections (default: the number of cores, at most 64))"},
      },
      reducer);
}

// The help, and so the man page made from it on the build machine, says "the number of cores",
// never the core count of the machine that printed it.
TEST(ReducerCommandLine, ThreadsDefaultIsNoMachinesCoreCount) {
  const CommandRun help = stdoutOf(reducer("--help"));
  ASSERT_EQ(help.status, 0);
  const size_t at = help.out.find("  --threads ");
  ASSERT_NE(at, std::string::npos) << help.out;
  const std::string entry = help.out.substr(at, help.out.find("\n  --", at + 1) - at);
  EXPECT_EQ(entry.find(']') + 1, entry.find_first_of(" \n", entry.find(']'))) << entry;
  EXPECT_NE(entry.find("the number of cores"), std::string::npos) << entry;
}

}  // namespace
