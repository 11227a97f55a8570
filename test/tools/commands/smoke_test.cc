// The `tally` and `tally-reducer` binaries as a user meets them: --help, --version, a mistyped
// command, bad options, and how a reducer that cannot start says so.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "test/support/command_run.h"
#include "tools/commands/suggest.h"

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
  EXPECT_NE(r.out.find("commands: env, bench, demo, launch, plan, doctor"), std::string::npos)
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
  EXPECT_EQ(tally::cli::editDistance("plan", "plan"), 0u);
  EXPECT_EQ(tally::cli::editDistance("plna", "plan"), 1u);
  EXPECT_EQ(tally::cli::editDistance("doctr", "doctor"), 1u);
  EXPECT_EQ(tally::cli::editDistance("", "env"), 3u);
  EXPECT_EQ(tally::cli::editDistance("kitten", "sitting"), 3u);
}

TEST(Suggest, NearestNameOnlyWhenPlausible) {
  const std::vector<std::string> names = {"bench", "demo", "env", "launch", "plan", "doctor"};
  EXPECT_EQ(tally::cli::nearestName("plna", names), "plan");
  EXPECT_EQ(tally::cli::nearestName("lanuch", names), "launch");
  EXPECT_EQ(tally::cli::nearestName("benc", names), "bench");
  EXPECT_EQ(tally::cli::nearestName("xylophone", names), "");
  EXPECT_EQ(tally::cli::nearestName("zz", names), "");
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
