// SPDX-License-Identifier: Apache-2.0
// tally launch end to end: the built `tally` binary run with an explicit environment. --dry-run
// for every pool, CMD's arguments passed through untouched, a real exec seeing the variables, a
// real tally-reducer in pool 2, and the error exits (malformed spec, no command, exec failure).
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "test/tools/commands/launch_test_util.h"

namespace tally::commands {
namespace {

using test::clusterSpec;
using test::runLaunch;
using test::tfConfig;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kPlugin = std::filesystem::path(TALLY_PLUGIN_PATH).lexically_normal().string();

std::string exportsFor(int rank, const std::string& reducers) {
  return "export NCCL_NET_PLUGIN='" + kPlugin +
         "'\n"
         "export NCCL_NET_PLUGIN_REF_COUNT='1'\n"
         "export NCCL_COLLNET_ENABLE='1'\n"
         "export TALLY_REDUCERS='" +
         reducers +
         "'\n"
         "export MASTER_ADDR='primary-0'\n"
         "export MASTER_PORT='2222'\n"
         "export WORLD_SIZE='3'\n"
         "export RANK='" +
         std::to_string(rank) + "'\n";
}

TEST(LaunchRun, DryRunWorker) {
  test::RunResult r = runLaunch({"--dry-run", "--", "python", "train.py", "--lr", "1"},
                                {"CLUSTER_SPEC=" + clusterSpec("workerpool1", 1)});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  EXPECT_EQ(r.out,
            "# tally launch: worker (CLUSTER_SPEC workerpool1 index 1, trial 7), CollNet rank 2 "
            "of 3, reducers from CLUSTER_SPEC workerpool2\n" +
                exportsFor(2, "reducer-0:2222,reducer-1:2222") + "exec python train.py --lr 1\n");
  EXPECT_EQ(r.err, "");
}

TEST(LaunchRun, DryRunPrimaryKeepsUserValues) {
  test::RunResult r = runLaunch(
      {"--dry-run", "--", "python", "train.py"},
      {"CLUSTER_SPEC=" + clusterSpec("workerpool0", 0), "NCCL_COLLNET_ENABLE=1", "RANK=it's"});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# tally launch: primary (CLUSTER_SPEC workerpool0 index 0, trial "
                               "7), CollNet rank 0 of 3"));
  EXPECT_THAT(r.out, HasSubstr("# kept NCCL_COLLNET_ENABLE='1', set by the environment\n"));
  EXPECT_THAT(r.out, HasSubstr("# kept RANK='it'\\''s', set by the environment\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("NCCL_ALGO")));
  EXPECT_THAT(r.out, Not(HasSubstr("export RANK")));
  EXPECT_THAT(r.out, HasSubstr("export WORLD_SIZE='3'\n"));
}

TEST(LaunchRun, DryRunReducerAndEvaluator) {
  test::RunResult r = runLaunch({"--dry-run", "--", "python", "train.py"},
                                {"CLUSTER_SPEC=" + clusterSpec("workerpool2", 1)});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# tally launch: reducer (CLUSTER_SPEC workerpool2 index 1"));
  EXPECT_THAT(r.out,
              HasSubstr("is not run\nexec " + std::filesystem::path(TALLY_REDUCER_BIN).string() +
                        " --listen 0.0.0.0:2222\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("export")));

  r = runLaunch({"--dry-run", "--", "python", "eval.py"},
                {"CLUSTER_SPEC=" + clusterSpec("workerpool3", 2)});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# tally launch: evaluator (CLUSTER_SPEC workerpool3 index 2"));
  EXPECT_THAT(r.out, HasSubstr("\nexport NCCL_NET_PLUGIN='none'\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("COLLNET")));
  EXPECT_THAT(r.out, HasSubstr("\nexec python eval.py\n"));
  // "none" is no library: nothing is missing.
  EXPECT_THAT(r.out, Not(HasSubstr("missing")));
  EXPECT_THAT(r.out, Not(HasSubstr("WARNING")));
}

// TALLY_REDUCER_ARGS reaches tally-reducer in pool 2, after launch's own --listen.
TEST(LaunchRun, ReducerArgsFromTheEnvironment) {
  test::RunResult r = runLaunch(
      {"--dry-run"}, {"CLUSTER_SPEC=" + clusterSpec("workerpool2", 0),
                      "TALLY_REDUCER_ARGS=--threads 16 --metrics 0.0.0.0:9464 --token-file "
                      "'/etc/tally/job token'"});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(" --listen 0.0.0.0:2222 --threads 16 --metrics 0.0.0.0:9464 "
                               "--token-file '/etc/tally/job token'\n"));
  r = runLaunch({"--dry-run"}, {"CLUSTER_SPEC=" + clusterSpec("workerpool2", 0),
                                "TALLY_REDUCER_ARGS=--listen 0.0.0.0:1"});
  EXPECT_EQ(r.exitCode(), 2);
  EXPECT_THAT(r.err, HasSubstr("TALLY_REDUCER_ARGS must not set --listen"));
}

TEST(LaunchRun, DryRunEveryTfConfigRole) {
  for (const char* type : {"chief", "worker", "ps", "evaluator"}) {
    SCOPED_TRACE(type);
    test::RunResult r =
        runLaunch({"--dry-run", "--", "python", "train.py"}, {"TF_CONFIG=" + tfConfig(type, 0)});
    ASSERT_EQ(r.exitCode(), 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr(std::string("(TF_CONFIG ") + type + " index 0)"));
    const bool rank = std::string(type) == "chief" || std::string(type) == "worker";
    EXPECT_EQ(r.out.find("export TALLY_REDUCERS='tf-ps-0:2222'\n") != std::string::npos, rank);
    EXPECT_EQ(r.out.find("export MASTER_ADDR='tf-chief-0'\n") != std::string::npos, rank);
    if (rank) {
      EXPECT_THAT(r.out, HasSubstr(std::string("export RANK='") +
                                   (std::string(type) == "chief" ? "0" : "1") + "'\n"));
    }
  }
}

TEST(LaunchRun, ExecSeesTheVariablesAndEveryArgument) {
  test::RunResult r =
      runLaunch({"--", "sh", "-c",
                 "echo \"$RANK $WORLD_SIZE $NCCL_COLLNET_ENABLE $TALLY_REDUCERS\"; "
                 "printf '<%s>' \"$@\"",
                 "sh", "--lr", "1", "--", "--dry-run", "a b"},
                {"CLUSTER_SPEC=" + clusterSpec("workerpool1", 1), "MASTER_PORT=2999"});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  EXPECT_EQ(r.out, "2 3 1 reducer-0:2222,reducer-1:2222\n<--lr><1><--><--dry-run><a b>");
  EXPECT_THAT(r.err, HasSubstr("tally launch: worker (CLUSTER_SPEC workerpool1 index 1"));
  EXPECT_THAT(r.err, HasSubstr("tally launch: set NCCL_NET_PLUGIN=" + kPlugin + "\n"));
  EXPECT_THAT(r.err, HasSubstr("tally launch: kept MASTER_PORT=2999, set by the environment\n"));
}

TEST(LaunchRun, WithoutSpecRunsTheCommandUnchanged) {
  test::RunResult r =
      runLaunch({"--", "sh", "-c", "echo \"${RANK-unset} ${NCCL_NET_PLUGIN-unset}\""}, {});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  EXPECT_EQ(r.out, "unset unset\n");
  EXPECT_THAT(r.err, HasSubstr("tally launch: no CLUSTER_SPEC or TF_CONFIG"));
}

TEST(LaunchRun, ErrorsRunNothing) {
  const std::string marker = "echo RAN";
  // Malformed spec: the variable and field are named, exit 2.
  test::RunResult r =
      runLaunch({"--", "sh", "-c", marker}, {"CLUSTER_SPEC=" + clusterSpec("workerpool1", 7)});
  EXPECT_EQ(r.exitCode(), 2);
  EXPECT_THAT(r.err, HasSubstr("CLUSTER_SPEC"));
  EXPECT_THAT(r.err, HasSubstr("task.index"));
  EXPECT_EQ(r.out, "");
  r = runLaunch({"--", "sh", "-c", marker}, {"TF_CONFIG={\"cluster\": 3}"});
  EXPECT_EQ(r.exitCode(), 2);
  EXPECT_THAT(r.err, HasSubstr("TF_CONFIG"));
  EXPECT_EQ(r.out, "");
  // No command for a worker.
  r = runLaunch({}, {"CLUSTER_SPEC=" + clusterSpec("workerpool1", 0)});
  EXPECT_EQ(r.exitCode(), 2);
  EXPECT_THAT(r.err, HasSubstr("no command to run"));
  // CMD's options without `--` would be taken apart: refused.
  r = runLaunch({"sh", "-c", marker}, {});
  EXPECT_EQ(r.exitCode(), 2);
  EXPECT_THAT(r.err, HasSubstr("put `--` before the command"));
  EXPECT_EQ(r.out, "");
  // exec failure.
  r = runLaunch({"--", "/nonexistent/tally-launch-test"}, {});
  EXPECT_EQ(r.exitCode(), 127);
  EXPECT_THAT(r.err, HasSubstr("cannot run /nonexistent/tally-launch-test: No such file"));
}

// A training image in the reducer pool has `tally` but no tally-reducer: launch says which image
// the pool needs instead of a bare "cannot run", and runs nothing.
TEST(LaunchRun, ReducerPoolWithoutTallyReducerNamesTheReducerImage) {
  // `tally` alone in a folder, as the training image installs it (tally-tools, no tally-reducer).
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("tally-no-reducer-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(std::filesystem::create_directories(dir));
  const std::filesystem::path tally = dir / "tally";
  std::filesystem::copy_file(TALLY_BIN, tally);
  const std::vector<std::string> env = {"CLUSTER_SPEC=" + clusterSpec("workerpool2", 0),
                                        test::kPath};
  const std::string why = "this image has no tally-reducer (" + (dir / "tally-reducer").string() +
                          "): run the reducer pool on the reducer image "
                          "(docker/reducer.Dockerfile), or install the tally-reducer package";

  test::Child run;
  ASSERT_TRUE(run.start({tally.string(), "launch", "--", "sh", "-c", "echo RAN"}, env));
  test::RunResult r = run.finish(20000);
  EXPECT_EQ(r.exitCode(), 127) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tally launch: reducer (CLUSTER_SPEC workerpool2 index 0"));
  EXPECT_THAT(r.err, HasSubstr("tally launch: cannot run the reducer: " + why));
  EXPECT_THAT(r.out, Not(HasSubstr("RAN")));

  test::Child dry;
  ASSERT_TRUE(dry.start({tally.string(), "launch", "--dry-run"}, env));
  r = dry.finish(20000);
  EXPECT_EQ(r.exitCode(), 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# WARNING: " + why));
  std::filesystem::remove_all(dir);
}

// A port nobody listens on right now (bound and released).
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST(LaunchRun, ReducerPoolStartsTallyReducerOnItsPort) {
  const int port = freePort();
  ASSERT_GT(port, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  test::Child child;
  ASSERT_TRUE(child.start(
      {TALLY_BIN, "launch", "--", "sh", "-c", "echo RAN"},
      {"CLUSTER_SPEC=" + clusterSpec("workerpool2", 0, "\"" + address + "\", \"other:1\""),
       test::kPath}));
  // Every address at the spec's port: the spec's host is where the workers reach it.
  const bool ready = child.waitForOutput(
      "tally-reducer listening on 0.0.0.0:" + std::to_string(port) + "\n", 15000);
  child.signal(SIGTERM);
  test::RunResult r = child.finish(10000);
  ASSERT_TRUE(ready) << "stdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_FALSE(r.timed_out);
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.status;
  EXPECT_THAT(r.out, Not(HasSubstr("RAN")));
  EXPECT_THAT(r.err, HasSubstr("tally launch: reducer (CLUSTER_SPEC workerpool2 index 0"));
  EXPECT_THAT(r.err, HasSubstr("(sh -c 'echo RAN') is not run"));
}

}  // namespace
}  // namespace tally::commands
