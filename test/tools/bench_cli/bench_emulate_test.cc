// SPDX-License-Identifier: Apache-2.0
// `tally bench --emulate`: a short run on 200 Mbit/s links (2 workers, 2 reducers, 3 sizes), the
// interrupted run that must leave no namespace behind, and the refusal without root. The runs
// need root, network namespaces and iproute2; without them they skip with the reason.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test/tools/bench_cli/run_tally.h"

namespace tally::bench::test {
namespace {

using nlohmann::json;

// Why emulation cannot run here, or empty when it can: root, `ip` and `tc`, and a namespace that
// can really be made (containers without CAP_SYS_ADMIN refuse).
std::string cannotEmulate() {
  if (::geteuid() != 0) return "not root";
  if (commandOutput("command -v ip").empty() || commandOutput("command -v tc").empty())
    return "iproute2 (ip, tc) is not installed";
  const std::string name = "tlytest" + std::to_string(::getpid());
  std::string made = commandOutput("ip netns add " + name + " 2>&1 && echo MADE");
  commandOutput("ip netns delete " + name + " 2>/dev/null");
  if (made.find("MADE") == std::string::npos) return "cannot create a network namespace: " + made;
  return "";
}

// Names of the namespaces a bench with this pid made (EmulatedCluster names them tly<pid>-...).
std::string namespacesOf(pid_t pid) {
  std::string prefix = "tly" + std::to_string(pid) + "-";
  std::string found;
  for (const std::string& line : {commandOutput("ip netns list 2>/dev/null")}) {
    size_t at = 0;
    while ((at = line.find(prefix, at)) != std::string::npos) {
      size_t end = line.find_first_of(" \n", at);
      found += line.substr(at, end - at) + " ";
      at = end == std::string::npos ? line.size() : end;
    }
  }
  return found;
}

TEST(BenchEmulate, ShortRunOnCappedLinks) {
  std::string why = cannotEmulate();
  if (!why.empty()) GTEST_SKIP() << "emulated cluster unavailable: " << why;
  const std::string path = tempPath("emulated.json");
  std::vector<std::string> args = smallRun(
      {"--reducers", "2", "--sizes", "64K,256K,1M", "--emulate", "200mbit", "--json", path});
#ifdef TALLY_TEST_GLOO_BENCH
  args.insert(args.end(), {"--algo", "all", "--gloo-bench", TALLY_TEST_GLOO_BENCH});
  const size_t expected_rows = 12;
#else
  args.insert(args.end(), {"--algo", "both"});
  const size_t expected_rows = 6;
#endif
  TallyRun run = runTally(args, 90);
  ASSERT_FALSE(run.timed_out) << run.out << run.err;
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("200mbit link in its own network namespace, TCP cubic"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("(198.18."), std::string::npos) << run.out;  // reducers in their nodes
  EXPECT_EQ(namespacesOf(run.pid), "") << "left behind";
  json j = json::parse(readFile(path), nullptr, false);
  ASSERT_TRUE(j.is_object()) << readFile(path);
  EXPECT_EQ(j["options"]["emulate"], "200mbit");
  EXPECT_EQ(j["options"]["emulate_cc"], "cubic");
  ASSERT_EQ(j["rows"].size(), expected_rows);
  for (const json& row : j["rows"]) {
    ASSERT_TRUE(row["present"].get<bool>()) << row;
    EXPECT_EQ(row["wrong"], 0) << row;
    // 200 Mbit/s is 0.025 GB/s each way; at 1 MiB the cap shows (loopback is 10x faster even on
    // a busy machine). The slack covers the token bucket's burst.
    if (row["bytes"] == 1048576) {
      EXPECT_LT(row["busbw_gbs"].get<double>(), 0.025 * 1.5) << row;
    }
    // The reducers run in their own network namespaces; their CPU is still read (by pid).
    EXPECT_GT(row["worker_cpu_s_per_gib"].get<double>(), 0) << row;
    if (row["algo"] == "rs") {
      EXPECT_GT(row["reducer_cpu_s_per_gib"].get<double>(), 0) << row;
    } else {
      EXPECT_EQ(row["reducer_cpu_s_per_gib"].get<double>(), 0) << row;
    }
  }
  std::remove(path.c_str());
}

TEST(BenchEmulate, InterruptRemovesTheCluster) {
  std::string why = cannotEmulate();
  if (!why.empty()) GTEST_SKIP() << "emulated cluster unavailable: " << why;
  // Long enough to be interrupted: 400 iterations of 4 MiB at 100 Mbit/s take minutes.
  std::string during_run;
  TallyRun run = runTally(smallRun({"--sizes", "4M", "-n", "400", "--emulate", "100mbit"}), 60, {},
                          [&](pid_t pid, double seconds) {
                            std::string names = namespacesOf(pid);
                            // Wait until the workers are under way (the table header is printed
                            // after the reducers start), then interrupt.
                            if (names.empty() || seconds < 2.0) return false;
                            during_run = names;
                            ::kill(pid, SIGINT);
                            return true;
                          });
  EXPECT_FALSE(during_run.empty()) << "the namespaces never appeared: " << run.err;
  EXPECT_EQ(run.status, 130) << run.out << run.err;
  EXPECT_NE(run.err.find("cleaning up"), std::string::npos) << run.err;
  EXPECT_LT(run.seconds, 30);
  EXPECT_EQ(namespacesOf(run.pid), "") << "left behind after SIGINT";
}

TEST(BenchEmulate, RefusedWithoutRoot) {
  std::vector<std::string> args = smallRun({"--emulate", "1gbit"});
  TallyRun run;
  if (::geteuid() == 0) {
    // As root, drop to nobody for this run when setpriv is there.
    if (commandOutput("command -v setpriv").empty()) GTEST_SKIP() << "root, and no setpriv";
    // The binary runs as nobody through setpriv: runTally execs tally, so wrap it in `sh -c`.
    std::string cmd =
        "setpriv --reuid=65534 --regid=65534 --clear-groups " + std::string(TALLY_TEST_TALLY);
    for (size_t i = 0; i < args.size(); ++i) cmd += " '" + args[i] + "'";
    std::string out = commandOutput(cmd + " 2>&1; echo \"exit=$?\"");
    if (out.find("not found (use --plugin)") != std::string::npos)
      GTEST_SKIP() << "the build tree is not readable by nobody";
    EXPECT_NE(out.find("exit=2"), std::string::npos) << out;
    EXPECT_NE(out.find("--emulate needs root"), std::string::npos) << out;
    return;
  }
  run = runTally(args, 30);
  EXPECT_EQ(run.status, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("--emulate needs root"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace tally::bench::test
