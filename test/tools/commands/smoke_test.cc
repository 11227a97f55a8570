// SPDX-License-Identifier: Apache-2.0
// The `tally` and `tally-reducer` binaries as a user meets them: --help, --version, a mistyped
// command, bad options, and how a reducer that cannot start says so.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "common/suggest.h"
#include "test/support/command_run.h"

namespace {

using tally::test::CommandRun;
CommandRun run(const std::string& command) { return tally::test::runCommand(command); }

std::string projectVersion() {
  // The one source of truth is CMake's project(); the test reads the same line.
  FILE* f = std::fopen(TALLY_SOURCE_DIR "/CMakeLists.txt", "r");
  if (f == nullptr) return "";
  char line[512];
  std::string version;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    const std::string s = line;
    const size_t at = s.find("project(tally VERSION ");
    if (at == std::string::npos) continue;
    const size_t begin = at + std::string("project(tally VERSION ").size();
    version = s.substr(begin, s.find(' ', begin) - begin);
    break;
  }
  std::fclose(f);
  return version;
}

TEST(TallyCommand, HelpListsEverySubcommand) {
  const CommandRun help = run(std::string(TALLY_BIN) + " --help");
  EXPECT_EQ(help.status, 0);
  for (const char* name : {"bench", "demo", "env", "launch", "plan", "doctor"}) {
    EXPECT_NE(help.out.find(name), std::string::npos) << name << " missing from:\n" << help.out;
  }
}

TEST(TallyCommand, VersionIsTheProjectVersion) {
  const std::string version = projectVersion();
  ASSERT_FALSE(version.empty()) << "no project(tally VERSION ...) in CMakeLists.txt";
  const CommandRun tally = run(std::string(TALLY_BIN) + " --version");
  EXPECT_EQ(tally.status, 0) << tally.out;
  EXPECT_EQ(tally.out, "tally " + version + "\n");
  const CommandRun reducer = run(std::string(TALLY_REDUCER_BIN) + " --version");
  EXPECT_EQ(reducer.status, 0) << reducer.out;
  EXPECT_EQ(reducer.out, "tally-reducer " + version + "\n");
}

TEST(TallyCommand, UnknownCommandNamesTheNearestAndTheList) {
  const CommandRun r = run(std::string(TALLY_BIN) + " plna --spec job.json");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("tally: unknown command 'plna'; did you mean 'plan'?"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("commands: env, bench, demo, launch, plan, doctor, help"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("A subcommand is required"), std::string::npos) << r.out;

  // Nothing near: no guess, still the list.
  const CommandRun far = run(std::string(TALLY_BIN) + " xylophone");
  EXPECT_EQ(far.status, 2);
  EXPECT_NE(far.out.find("tally: unknown command 'xylophone'\n"), std::string::npos) << far.out;
  EXPECT_EQ(far.out.find("did you mean"), std::string::npos) << far.out;
}

TEST(TallyCommand, NoCommandIsAUsageError) {
  const CommandRun r = run(TALLY_BIN);
  EXPECT_EQ(r.status, 2) << r.out;
}

TEST(Suggest, EditDistanceCountsSwapsAsOneEdit) {
  EXPECT_EQ(tally::editDistance("plan", "plan"), 0u);
  EXPECT_EQ(tally::editDistance("plna", "plan"), 1u);
  EXPECT_EQ(tally::editDistance("doctr", "doctor"), 1u);
  EXPECT_EQ(tally::editDistance("", "env"), 3u);
  EXPECT_EQ(tally::editDistance("kitten", "sitting"), 3u);
}

TEST(Suggest, NearestNameOnlyWhenPlausible) {
  const std::vector<std::string> names = {"bench", "demo", "env", "launch", "plan", "doctor"};
  EXPECT_EQ(tally::nearestName("plna", names), "plan");
  EXPECT_EQ(tally::nearestName("lanuch", names), "launch");
  EXPECT_EQ(tally::nearestName("benc", names), "bench");
  EXPECT_EQ(tally::nearestName("xylophone", names), "");
  EXPECT_EQ(tally::nearestName("zz", names), "");
}

// One rule for every duration flag: a flag whose name carries no unit refuses a bare number
// ("--timeout 5" could be 5 ms or 5 s), exits with the command's status for a bad command line
// before anything runs, and names the flag and the forms it takes. The _MS variables, whose
// name carries the unit, keep reading a bare number as milliseconds.
TEST(TallyCommand, DurationFlagsRefuseABareNumber) {
  const std::string tally = std::string("env -i '") + TALLY_BIN + "' ";
  const std::string bench = "bench --sizes 4K --workers 2 --reducers 1 --algo rs -n 1 -w 0 ";
  const struct {
    std::string args;
    int status;  // the command's exit status for a bad command line
    std::string says;
  } cases[] = {
      {"doctor --timeout 5", 3,
       "tally doctor: --timeout: '5' has no unit; write a duration with one, such as 500ms, 5s "
       "or 2m"},
      {bench + "--timeout 60", 2,
       "tally bench: --timeout: '60' has no unit; write a duration with one, such as 500ms, 5s "
       "or 2m"},
      {bench + "--fault kill-reducer@1s --duration 10", 2,
       "--duration: '10' has no unit; write a duration with one, such as 500ms, 5s or 2m"},
      {bench + "--fault kill-reducer@5", 2,
       "\"kill-reducer@5\": '5' has no unit; write a duration with one, such as 500ms, 5s or 2m"},
      {"plan --predict-only --hosts 4 --reducers 4 --link 200mbit --latency 50", 2,
       "--latency: '50' has no unit; write a duration with one, such as 500ms, 5s or 2m"},
      {"doctor --timeout 0s", 3, "tally doctor: --timeout: expected a duration above zero"},
      {bench + "--timeout 0", 2, "--timeout: expected a duration above zero"},
  };
  for (const auto& c : cases) {
    const CommandRun r = run(tally + c.args);
    EXPECT_EQ(r.status, c.status) << c.args << ":\n" << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.args << ":\n" << r.out;
    EXPECT_EQ(r.out.find("PASS"), std::string::npos) << "ran anyway: " << c.args;
    EXPECT_EQ(r.out.find("all results"), std::string::npos) << "ran anyway: " << c.args;
  }
  // With a unit, the same flags parse (plan then runs; its prediction needs nothing else).
  EXPECT_EQ(run(tally + "plan --predict-only --hosts 4 --reducers 4 --link 200mbit --latency "
                        "0.05ms")
                .status,
            0);
  // The unit in the name: a bare number is milliseconds, and `tally env` accepts it.
  const CommandRun env = run("env -i TALLY_TIMEOUT_MS=5000 TALLY_CONNECT_TIMEOUT_MS=30s '" +
                             std::string(TALLY_BIN) + "' env");
  EXPECT_EQ(env.status, 0) << env.out;
  EXPECT_EQ(env.out.find("not valid"), std::string::npos) << env.out;
}

TEST(TallyReducer, FatalStartErrorsArePrintedAsErrors) {
  // Port 1 on a non-local address cannot be bound; a bad TALLY_ variable is a usage error.
  const CommandRun bind = run(std::string(TALLY_REDUCER_BIN) + " --listen 192.0.2.1:1");
  EXPECT_EQ(bind.status, 1) << bind.out;
  EXPECT_NE(bind.out.find("tally-reducer: error: cannot serve on 192.0.2.1:1"), std::string::npos)
      << bind.out;
  EXPECT_EQ(bind.out.find("WARN"), std::string::npos) << bind.out;

  const CommandRun bad =
      run("TALLY_SOCKET_NSOCKS=99 " + std::string(TALLY_REDUCER_BIN) + " --listen 127.0.0.1:0");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("tally-reducer: error: TALLY_SOCKET_NSOCKS=99"), std::string::npos)
      << bad.out;
  EXPECT_EQ(bad.out.find("WARN"), std::string::npos) << bad.out;

  const CommandRun token =
      run(std::string(TALLY_REDUCER_BIN) + " --listen 127.0.0.1:0 --token-file /nonexistent/token");
  EXPECT_EQ(token.status, 2) << token.out;
  EXPECT_NE(token.out.find("tally-reducer: error: "), std::string::npos) << token.out;
}

}  // namespace

namespace {

// `tally env` lists every variable, then each refused value with its reason, and exits 1 for
// them: the same rules the plugin and doctor apply (common/params.cc).
TEST(TallyEnv, ReportsEveryRefusedValue) {
  const CommandRun good = run("env -i TALLY_SOCKET_NSOCKS=4 " + std::string(TALLY_BIN) + " env");
  EXPECT_EQ(good.status, 0) << good.out;
  EXPECT_NE(good.out.find("TALLY_SOCKET_NSOCKS"), std::string::npos) << good.out;
  EXPECT_EQ(good.out.find("not valid"), std::string::npos) << good.out;

  const CommandRun bad =
      run("env -i TALLY_SOCKET_NSOCKS=99 TALLY_TRANSPORT=rdma " + std::string(TALLY_BIN) + " env");
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("tally env: TALLY_SOCKET_NSOCKS=99 is not valid: expected 1 to 16"),
            std::string::npos)
      << bad.out;
  EXPECT_NE(bad.out.find("tally env: TALLY_TRANSPORT=rdma is not valid: expected one of auto, "
                         "tcp, ofi, verbs"),
            std::string::npos)
      << bad.out;
  // The listing is still printed, so the user sees every value.
  EXPECT_NE(bad.out.find("TALLY_COLL_WINDOW"), std::string::npos) << bad.out;

  const CommandRun unparsable =
      run("env -i TALLY_TIMEOUT_MS=soon " + std::string(TALLY_BIN) + " env");
  EXPECT_EQ(unparsable.status, 1) << unparsable.out;
  EXPECT_NE(unparsable.out.find("tally env: TALLY_TIMEOUT_MS='soon' is not valid"),
            std::string::npos)
      << unparsable.out;
}

}  // namespace
