// SPDX-License-Identifier: Apache-2.0
// `tally bench --fault`: the fault list's grammar (good lists get past it, each kind of bad item
// exits 2 naming it), a loopback run that kills a reducer and restarts it, one that freezes and
// resumes a reducer, and on an emulated cluster (root only) a kill and restart and a slowed and
// healed link.
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

TEST(BenchFault, GoodListsPassTheParser) {
  // The plugin is checked after the fault list: a list that parses reaches that check.
  const std::vector<std::vector<std::string>> lists = {
      {"--fault", "kill-reducer:1@5s,restart@15s", "--reducers", "2"},
      {"--fault", "stop-reducer@500ms,cont-reducer@1.5s"},
      {"--fault", "kill-reducer:0@1m, restart-reducer:0@90s"},
      {"--fault", "restart@3s,kill-reducer@1s"},  // sorted by time first
      {"--fault", "kill-reducer@1s,restart@2s,kill-reducer@3s,restart@4s", "--duration", "5s"},
      {"--fault", "slow-reducer:1@2s,heal-reducer:1@4s", "--reducers", "2", "--emulate", "400mbit"},
      {"--fault", "slow-reducer@1s,kill-reducer@2s,heal-reducer@3s,restart@4s", "--emulate",
       "1gbit", "--slow-factor", "2.5"},
      {"--fault", "slow-reducer@1s,heal-reducer@2s,slow-reducer@3s", "--emulate", "200mbit",
       "--slow-factor", "100"},
  };
  for (const auto& list : lists) {
    std::vector<std::string> args = list;
    args.insert(args.end(), {"--plugin", "/nonexistent/libnccl-net-tally.so"});
    TallyRun run = runTally(smallRun(args), 30);
    EXPECT_EQ(run.status, 2) << list[1] << ": " << run.err;
    EXPECT_NE(run.err.find("not found (use --plugin)"), std::string::npos)
        << list[1] << ": " << run.err;
  }
}

TEST(BenchFault, BadItemsExitTwoNamingThem) {
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{"--fault", "kill-reduce@5s"}, "\"kill-reduce@5s\": unknown event \"kill-reduce\""},
      {{"--fault", "slow@5s"}, "restart, slow-reducer or heal-reducer)"},
      {{"--fault", "kill-reducer:x@5s"}, "\"kill-reducer:x@5s\": reducer \"x\" is not an index"},
      {{"--fault", "kill-reducer:-1@5s"}, "\"kill-reducer:-1@5s\": reducer \"-1\""},
      {{"--fault", "kill-reducer:1"}, "\"kill-reducer:1\": no time"},
      {{"--fault", "kill-reducer@5"}, "\"kill-reducer@5\": '5' has no unit"},
      {{"--fault", "kill-reducer@5d"},
       "\"kill-reducer@5d\": expected a duration such as 500ms, 5s or 2m"},
      {{"--fault", "kill-reducer@s"}, "\"kill-reducer@s\": expected a duration"},
      {{"--fault", "kill-reducer@1..5s"}, "expected a duration such as 500ms, 5s or 2m (units "},
      {{"--fault", "kill-reducer@-1s"}, "\"kill-reducer@-1s\": a duration cannot be negative"},
      {{"--fault", "kill-reducer@1s@2s"}, "\"kill-reducer@1s@2s\": more than one '@'"},
      {{"--fault", "kill-reducer@1s,,restart@2s"}, "--fault: an empty item"},
      {{"--fault", "restart@3s"}, "\"restart@3s\": no reducer was killed before it"},
      {{"--fault", "restart-reducer:0@3s,kill-reducer:0@5s"},
       "\"restart-reducer:0@3s\": reducer 0 was not killed before it"},
      {{"--fault", "cont-reducer@3s"}, "\"cont-reducer@3s\": reducer 0 is not stopped"},
      {{"--fault", "kill-reducer@1s,stop-reducer@2s"}, "\"stop-reducer@2s\": reducer 0 is not"},
      {{"--fault", "kill-reducer@1s,kill-reducer@2s"}, "\"kill-reducer@2s\": reducer 0 is already"},
      {{"--fault", "kill-reducer:5@1s"}, "\"kill-reducer:5@1s\": there is no reducer 5"},
      {{"--fault", "kill-reducer@30s", "--duration", "20s"},
       "\"kill-reducer@30s\": at or after the end of the run (--duration 20s)"},
      {{"--fault", "kill-reducer@1s", "--algo", "ring"}, "--algo must include rs"},
      {{"--fault", "kill-reducer@1s", "--duration", "10"}, "--duration: '10' has no unit"},
      {{"--fault", "kill-reducer@1s", "--duration", "700s"}, "is not below --timeout"},
      {{"--duration", "10s"}, "--duration: only with --fault"},
      {{"--fault", "slow-reducer:0@1s"},
       "\"slow-reducer:0@1s\": needs --emulate RATE (it changes the rate of the reducer's "
       "emulated link)"},
      {{"--fault", "slow-reducer@1s,heal-reducer@2s"}, "\"slow-reducer@1s\": needs --emulate"},
      {{"--fault", "heal-reducer@1s", "--emulate", "400mbit"},
       "\"heal-reducer@1s\": reducer 0's link is not slowed"},
      {{"--fault", "slow-reducer@1s,heal-reducer@2s,heal-reducer@3s", "--emulate", "400mbit"},
       "\"heal-reducer@3s\": reducer 0's link is not slowed"},
      {{"--fault", "slow-reducer@1s,slow-reducer@2s", "--emulate", "400mbit"},
       "\"slow-reducer@2s\": reducer 0's link is already slowed"},
      {{"--fault", "slow-reducer:3@1s", "--emulate", "400mbit"},
       "\"slow-reducer:3@1s\": there is no reducer 3"},
      {{"--fault", "slow-reducer@1s", "--emulate", "400mbit", "--slow-factor", "1"},
       "--slow-factor: expected a number above 1 such as 10 or 2.5, got \"1\""},
      {{"--fault", "slow-reducer@1s", "--emulate", "400mbit", "--slow-factor", "0.5"},
       "--slow-factor: expected a number above 1"},
      {{"--fault", "slow-reducer@1s", "--emulate", "400mbit", "--slow-factor", "10x"},
       "--slow-factor: expected a number above 1 such as 10 or 2.5, got \"10x\""},
      {{"--fault", "kill-reducer@1s", "--slow-factor", "4"},
       "--slow-factor: only with a slow-reducer fault"},
  };
  for (const Case& c : cases) {
    TallyRun run = runTally(smallRun(c.args), 30);
    const std::string all = run.out + run.err;
    EXPECT_EQ(run.status, 2) << c.args[1] << ": " << all;
    EXPECT_NE(run.err.find(c.says), std::string::npos) << c.args[1] << ": " << all;
    EXPECT_TRUE(run.out.empty()) << "ran anyway: " << all;
  }
}

// Calls completed in [from, to) ms.
int callsBetween(const json& j, double from, double to) {
  int n = 0;
  for (double t : j["completions_ms"]) n += t >= from && t < to;
  return n;
}

// What every fault run's JSON must show: the duration covered by buckets, every fault injected
// near its time, a stall for each that ended (calls resumed) under a generous bound, and right
// results.
void expectSoundRun(const json& j, double duration_ms) {
  EXPECT_EQ(j["mode"], "fault");
  EXPECT_EQ(j["wrong"], 0);
  EXPECT_EQ(j["exit_code"], 0);
  const double width = j["bucket_ms"];
  ASSERT_FALSE(j["buckets"].empty());
  EXPECT_EQ(j["buckets"][0]["start_ms"], 0);
  EXPECT_GE(j["buckets"].size() * width, duration_ms);
  int calls = 0;
  for (const json& b : j["buckets"]) calls += b["calls"].get<int>();
  EXPECT_EQ(calls, j["calls"].get<int>());
  EXPECT_EQ(j["completions_ms"].size(), j["calls"].get<size_t>());
  for (const json& f : j["faults"]) {
    ASSERT_TRUE(f["injected_ms"].is_number()) << f;
    EXPECT_NEAR(f["injected_ms"].get<double>(), f["at_ms"].get<double>(), 500) << f;
    EXPECT_TRUE(f["error"].is_null()) << f;
  }
  ASSERT_EQ(j["stalls"].size(), j["faults"].size());
  for (const json& s : j["stalls"]) {
    EXPECT_TRUE(s["resumed"].get<bool>()) << s;
    EXPECT_LT(s["stall_ms"].get<double>(), 5000) << s;  // a loaded 2-core machine
  }
}

TEST(BenchFault, LoopbackKillAndRestart) {
  const std::string path = tempPath("fault.json");
  const std::string png = tempPath("fault.png");
  std::vector<std::string> args = {"--workers",  "3", "--reducers", "3", "--sizes", "4M",
                                   "--fault",    "kill-reducer:1@1s,restart@3s",
                                   "--duration", "6s", "--json",     path};
  const bool gnuplot = !commandOutput("command -v gnuplot").empty();
  if (gnuplot) args.insert(args.end(), {"--plot", png});
  TallyRun run = runTally(smallRun(args), 90);
  ASSERT_FALSE(run.timed_out) << run.out << run.err;
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("# faults: kill-reducer:1@1s, restart-reducer:1@3s"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("# kill-reducer:1@1s: calls resumed after "), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("#wrong 0"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("# all results correct"), std::string::npos) << run.out;

  json j = json::parse(readFile(path), nullptr, false);
  ASSERT_TRUE(j.is_object()) << readFile(path);
  EXPECT_EQ(j["options"]["faults"], json({"kill-reducer:1@1s", "restart-reducer:1@3s"}));
  EXPECT_EQ(j["options"]["algos"], json({"rs"}));
  EXPECT_EQ(j["bytes"], 4 << 20);
  expectSoundRun(j, 6000);
  ASSERT_EQ(j["faults"].size(), 2u);
  EXPECT_EQ(j["faults"][1]["event"], "restart-reducer");
  EXPECT_EQ(j["faults"][1]["reducer"], 1);
  const double kill = j["faults"][0]["injected_ms"], restart = j["faults"][1]["injected_ms"];
  EXPECT_GT(callsBetween(j, 0, kill), 0) << run.out;
  EXPECT_GT(callsBetween(j, kill, restart), 0) << run.out;
  EXPECT_GT(callsBetween(j, restart, 1e12), 0) << run.out;
  ASSERT_EQ(j["spans"].size(), 3u);
  EXPECT_TRUE(j["spans"][0]["from"].is_null());
  EXPECT_EQ(j["spans"][2]["from"], "restart-reducer:1@3s");
  ASSERT_TRUE(j["spans"][2]["algbw_gbs"].is_number()) << j["spans"];
  EXPECT_GT(j["spans"][2]["algbw_gbs"].get<double>(), 0) << j["spans"];
  if (gnuplot) {
    const std::string data = readFile(png);
    ASSERT_GT(data.size(), 1000u);
    EXPECT_EQ(data.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  }
  std::remove(path.c_str());
  std::remove(png.c_str());
}

// A frozen reducer is dropped after TALLY_REDUCER_TIMEOUT_MS (shortened here), and taken back in
// once it resumes, since it still listens at its address.
TEST(BenchFault, LoopbackStopAndCont) {
  const std::string path = tempPath("stop.json");
  TallyRun run = runTally(smallRun({"--workers", "2", "--reducers", "2", "--sizes", "1M",
                                    "--fault", "stop-reducer:0@1s,cont-reducer:0@4s",
                                    "--duration", "7s", "--json", path}),
                          90, {"TALLY_REDUCER_TIMEOUT_MS=1500"});
  ASSERT_FALSE(run.timed_out) << run.out << run.err;
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  json j = json::parse(readFile(path), nullptr, false);
  ASSERT_TRUE(j.is_object()) << readFile(path);
  expectSoundRun(j, 7000);
  const double stop = j["faults"][0]["injected_ms"], cont = j["faults"][1]["injected_ms"];
  EXPECT_GT(callsBetween(j, stop, cont), 0) << run.out;
  EXPECT_GT(callsBetween(j, cont, 1e12), 0) << run.out;
  std::remove(path.c_str());
}

std::string cannotEmulate() {
  if (::geteuid() != 0) return "not root";
  if (commandOutput("command -v ip").empty() || commandOutput("command -v tc").empty())
    return "iproute2 (ip, tc) is not installed";
  const std::string name = "tlyfault" + std::to_string(::getpid());
  std::string made = commandOutput("ip netns add " + name + " 2>&1 && echo MADE");
  commandOutput("ip netns delete " + name + " 2>/dev/null");
  if (made.find("MADE") == std::string::npos) return "cannot create a network namespace: " + made;
  return "";
}

// The restarted reducer comes back in its node, at its old address.
TEST(BenchFault, EmulatedKillAndRestart) {
  const std::string why = cannotEmulate();
  if (!why.empty()) GTEST_SKIP() << "emulated cluster unavailable: " << why;
  const std::string path = tempPath("fault-emulated.json");
  TallyRun run = runTally(smallRun({"--workers", "2", "--reducers", "2", "--sizes", "1M",
                                    "--emulate", "200mbit", "--fault",
                                    "kill-reducer:1@1s,restart@3s", "--duration", "6s", "--json",
                                    path}),
                          90);
  ASSERT_FALSE(run.timed_out) << run.out << run.err;
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("(198.18."), std::string::npos) << run.out;
  EXPECT_TRUE(commandOutput("ip netns list | grep tly" + std::to_string(run.pid) + "-").empty());
  json j = json::parse(readFile(path), nullptr, false);
  ASSERT_TRUE(j.is_object()) << readFile(path);
  expectSoundRun(j, 6000);
  const double restart = j["faults"][1]["injected_ms"];
  EXPECT_GT(callsBetween(j, restart, 1e12), 0) << run.out;
  std::remove(path.c_str());
}

// A slowed link (200 Mbit/s / 8) carries calls slower than before it was slowed; healed, it
// carries them again. Every call still completes right.
TEST(BenchFault, EmulatedSlowAndHeal) {
  const std::string why = cannotEmulate();
  if (!why.empty()) GTEST_SKIP() << "emulated cluster unavailable: " << why;
  const std::string path = tempPath("fault-slow.json");
  TallyRun run =
      runTally(smallRun({"--workers", "2", "--reducers", "2", "--sizes", "1M", "--emulate",
                         "200mbit", "--fault", "slow-reducer:1@2s,heal-reducer:1@5s",
                         "--slow-factor", "8", "--duration", "8s", "--json", path}),
               90);
  ASSERT_FALSE(run.timed_out) << run.out << run.err;
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("# faults: slow-reducer:1@2s, heal-reducer:1@5s"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("# a slowed reducer's link runs at 25mbit each way (200mbit / "
                         "--slow-factor 8)"),
            std::string::npos)
      << run.out;
  json j = json::parse(readFile(path), nullptr, false);
  ASSERT_TRUE(j.is_object()) << readFile(path);
  expectSoundRun(j, 8000);
  EXPECT_EQ(j["options"]["faults"], json({"slow-reducer:1@2s", "heal-reducer:1@5s"}));
  EXPECT_EQ(j["options"]["slow_factor"], 8);
  ASSERT_EQ(j["faults"].size(), 2u);
  EXPECT_EQ(j["faults"][0]["event"], "slow-reducer");
  EXPECT_EQ(j["faults"][0]["rate"], "25mbit");
  EXPECT_EQ(j["faults"][1]["event"], "heal-reducer");
  EXPECT_EQ(j["faults"][1]["rate"], "200mbit");
  const double heal = j["faults"][1]["injected_ms"];
  EXPECT_GT(callsBetween(j, heal, 1e12), 0) << run.out;
  ASSERT_EQ(j["spans"].size(), 3u);
  const json& before = j["spans"][0]["call_algbw_gbs"];
  const json& during = j["spans"][1]["call_algbw_gbs"];
  ASSERT_TRUE(before.is_number() && during.is_number()) << j["spans"];
  EXPECT_LT(during.get<double>(), 0.7 * before.get<double>()) << j["spans"];
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tally::bench::test
