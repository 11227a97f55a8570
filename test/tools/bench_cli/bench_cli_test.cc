// SPDX-License-Identifier: Apache-2.0
// `tally bench` on loopback, end to end: the --check path (a corrupted result is counted in
// #wrong and fails the run), a correct run over two types and two ops with its JSON, the options
// that exit 2, the plot, and Gloo's float32-sum-only rule; the CPU cost fields of every row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "model/cost_table.h"
#include "test/tools/bench_cli/run_tally.h"

namespace tally::bench::test {
namespace {

using nlohmann::json;

json readJson(const std::string& path) {
  return json::parse(readFile(path), nullptr, /*allow_exceptions=*/false);
}

// The CPU cost fields of a row measured by smallRun (2 workers, 2 timed iterations): moved is
// bytes x 2 x 2, every worker spent some CPU, the reducers too on a reduction-server row and
// none on the others, and the per-GiB values are the seconds over moved GiB.
void expectCpuCost(const json& row, uint64_t bytes) {
  ASSERT_TRUE(row.contains("moved_bytes")) << row;
  EXPECT_EQ(row["moved_bytes"].get<uint64_t>(), bytes * 2 * 2) << row;
  ASSERT_TRUE(row["worker_cpu_s"].is_number()) << row;
  ASSERT_TRUE(row["reducer_cpu_s"].is_number()) << row;
  ASSERT_TRUE(row["worker_cpu_s_per_gib"].is_number()) << row;
  ASSERT_TRUE(row["reducer_cpu_s_per_gib"].is_number()) << row;
  const double gib = static_cast<double>(bytes * 2 * 2) / (1024.0 * 1024 * 1024);
  const double worker = row["worker_cpu_s"], reducer = row["reducer_cpu_s"];
  EXPECT_GT(worker, 0) << row;
  EXPECT_NEAR(row["worker_cpu_s_per_gib"].get<double>(), worker / gib, 1e-9 * worker / gib) << row;
  if (row["algo"] == "rs") {
    EXPECT_GT(reducer, 0) << row;
    EXPECT_NEAR(row["reducer_cpu_s_per_gib"].get<double>(), reducer / gib, 1e-9 * reducer / gib)
        << row;
  } else {
    EXPECT_EQ(reducer, 0) << row;
    EXPECT_EQ(row["reducer_cpu_s_per_gib"].get<double>(), 0) << row;
  }
  // Per byte through the sockets: at 2 workers the ring's and the reduction server's workers
  // both send and receive their input once; the reducers take in and send out moved bytes.
  EXPECT_EQ(row["worker_socket_bytes"].get<uint64_t>(), 2 * bytes * 2 * 2) << row;
  EXPECT_NEAR(row["worker_cpu_s_per_socket_gib"].get<double>(), worker / gib / 2,
              1e-9 * worker / gib)
      << row;
  if (row["algo"] == "rs") {
    EXPECT_EQ(row["reducer_socket_bytes"].get<uint64_t>(), 2 * bytes * 2 * 2) << row;
    EXPECT_NEAR(row["reducer_cpu_s_per_socket_gib"].get<double>(), reducer / gib / 2,
                1e-9 * reducer / gib)
        << row;
  } else {
    EXPECT_EQ(row["reducer_socket_bytes"].get<uint64_t>(), 0u) << row;
    EXPECT_TRUE(row["reducer_cpu_s_per_socket_gib"].is_null()) << row;
  }
}

TEST(BenchCli, CorruptedResultIsCountedAndFails) {
  const std::string path = tempPath("corrupt.json");
  TallyRun run =
      runTally(smallRun({"--sizes", "4K,64K", "--debug-corrupt-rank", "1", "--json", path}), 120);
  ASSERT_FALSE(run.timed_out) << run.out << run.err;
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  // 1 warm-up + 2 timed calls per size and algorithm, of which the warm-up and the last timed
  // one are checked (checkedCall): one flipped element each.
  EXPECT_NE(run.out.find("FAILED: 8 wrong elements"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("worker 1: rs float32 sum 4096 bytes: 1 wrong"), std::string::npos)
      << run.err;
  json j = readJson(path);
  ASSERT_TRUE(j.is_object()) << readFile(path);
  EXPECT_EQ(j["exit_code"], 1);
  ASSERT_EQ(j["rows"].size(), 4u);
  for (const json& row : j["rows"]) {
    EXPECT_TRUE(row["present"].get<bool>()) << row;
    EXPECT_EQ(row["wrong"], 2) << row;
  }
  std::remove(path.c_str());
}

TEST(BenchCli, LoopbackRunIsCorrectWithEveryRowInJson) {
  const std::string path = tempPath("loopback.json");
  TallyRun run = runTally(
      smallRun({"--sizes", "4K,64K,256K", "-d", "float32,int32", "-o", "sum,max", "--json", path}),
      150);
  ASSERT_FALSE(run.timed_out) << run.out << run.err;
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("# all results correct"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("rs/ring"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find(" wcpu     rcpu "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("(s/GiB)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("(s/sGiB)"), std::string::npos) << run.out;

  json j = readJson(path);
  ASSERT_TRUE(j.is_object()) << readFile(path);
  EXPECT_EQ(j["command"], "tally bench");
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["options"]["workers"], 2);
  EXPECT_EQ(j["options"]["types"], json({"float32", "int32"}));
  EXPECT_EQ(j["options"]["ops"], json({"sum", "max"}));
  EXPECT_EQ(j["options"]["algos"], json({"rs", "ring"}));
  EXPECT_GT(j["machine"]["cores"].get<int>(), 0);
  EXPECT_FALSE(j["machine"]["hostname"].get<std::string>().empty());
  // Every reducer runs here: each gets its share of the cores as its --threads, at least one
  // (of the cores this process may use, which may be fewer than those online).
  const int cores = j["machine"]["cores"], reducers = j["options"]["reducers"];
  const int threads = j["options"]["reducer_threads"];
  EXPECT_GE(threads, 1);
  EXPECT_LE(threads, std::max(1, cores / reducers));
  // 2 types x 2 ops x 3 sizes x 2 algorithms, each measured, checked and right.
  ASSERT_EQ(j["rows"].size(), 24u);
  std::set<std::string> seen;
  for (const json& row : j["rows"]) {
    EXPECT_TRUE(row["present"].get<bool>()) << row;
    EXPECT_EQ(row["wrong"], 0) << row;
    EXPECT_GT(row["time_us"].get<double>(), 0) << row;
    const uint64_t bytes = row["bytes"], count = row["count"];
    EXPECT_EQ(bytes, count * 4) << row;  // float32 and int32
    const double algbw = row["algbw_gbs"], busbw = row["busbw_gbs"];
    EXPECT_NEAR(algbw, bytes / (row["time_us"].get<double>() * 1e3), 1e-9) << row;
    EXPECT_NEAR(busbw, algbw * 2 * (2 - 1) / 2, 1e-12) << row;  // n = 2
    expectCpuCost(row, bytes);
    seen.insert(row["algo"].get<std::string>() + " " + row["type"].get<std::string>() + " " +
                row["op"].get<std::string>() + " " + std::to_string(bytes));
  }
  EXPECT_EQ(seen.size(), 24u);
  EXPECT_TRUE(seen.count("ring int32 max 262144"));
  // NCCL's calls by default: 2 channels of 32 KiB under 128 KiB, of 64 KiB from there
  // (nccl_calls_test.cc has the rule).
  EXPECT_EQ(j["options"]["calls"]["shape"], "nccl");
  EXPECT_NE(run.out.find("# reduction server: NCCL's CollNetChain calls (2 channels, chain depth "
                         "1, NCCL_BUFFSIZE 4 MiB), 8 in flight"),
            std::string::npos)
      << run.out;
  for (const json& row : j["rows"]) {
    if (row["algo"] != "rs") {
      EXPECT_TRUE(row["call_bytes"].is_null()) << row;
    } else {
      EXPECT_EQ(row["call_bytes"], row["bytes"].get<uint64_t>() < 131072 ? 65536 : 131072) << row;
    }
  }
  ASSERT_EQ(j["ratios"].size(), 12u);
  for (const json& r : j["ratios"]) EXPECT_GT(r["rs_over_ring"].get<double>(), 0) << r;
  std::remove(path.c_str());
}

TEST(BenchCli, BadOptionsExitTwo) {
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{"-d", "float33"}, "unknown type \"float33\""},
      {{"-o", "avg"}, "unknown op \"avg\""},
      {{"--algo", "tree"}, "unknown algorithm \"tree\""},
      {{"-b", "1M", "-e", "4K"}, "-b is larger than -e"},
      {{"-b", "zero"}, "-b: expected a size"},
      {{"-f", "1"}, "step factor"},
      {{"-c", "2"}, "-c: expected 0 or 1"},
      {{"--timeout", "soon"}, "--timeout"},
      {{"--emulate", "fast"}, "--emulate: \"fast\" is not a rate"},
      {{"--emulate", "1gbit", "--emulate-cc", "Cubic;"}, "is not a congestion control name"},
      {{"--emulate", "1gbit", "--emulate-burst", "4 kb"}, "--emulate-burst: \"4 kb\" is not a size"},
      {{"--workers", "1"}, "--workers"},
      {{"--no-such-flag"}, "no-such-flag"},
      {{"--plugin", "/nonexistent/libnccl-net-tally.so"}, "not found (use --plugin)"},
      {{"--debug-corrupt-rank", "5"}, "not a worker rank"},
      {{"--calls", "big"}, "--calls: expected a size"},
      {{"--channels", "9"}, "--channels: expected 1 to 8"},
      {{"--chain-depth", "0"}, "--chain-depth: expected 1 to 8"},
      {{"--chunk", "1M"}, "--chunk: at most NCCL_BUFFSIZE / 8 (512 KiB)"},
      {{"--calls", "1M", "--chunk", "64K"}, "--chunk: only with --calls nccl"},
      {{"--algo", "auto,tree"}, "unknown algorithm \"tree\""},
  };
  for (const Case& c : cases) {
    TallyRun run = runTally(smallRun(c.args), 30);
    std::string all = run.out + run.err;
    EXPECT_EQ(run.status, 2) << c.args[0] << ": " << all;
    EXPECT_NE(all.find(c.says), std::string::npos) << c.args[0] << ": " << all;
    EXPECT_EQ(run.out.find("all results"), std::string::npos) << "ran anyway: " << all;
  }
}

// A fixed call size, the bench's shape before it followed NCCL's: odd sizes cut into several
// calls of it, with more calls than the 8 in flight, every element checked.
TEST(BenchCli, FixedCallsAreCorrect) {
  const std::string path = tempPath("fixed.json");
  TallyRun run = runTally(smallRun({"--sizes", "100000,1000004", "-d", "float32,float64", "--algo",
                                    "rs", "--calls", "40K", "--json", path}),
                          120);
  ASSERT_FALSE(run.timed_out) << run.out << run.err;
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("# reduction server: 40 KiB calls, 8 in flight"), std::string::npos)
      << run.out;
  json j = readJson(path);
  ASSERT_TRUE(j.is_object()) << readFile(path);
  ASSERT_EQ(j["rows"].size(), 4u);
  for (const json& row : j["rows"]) {
    EXPECT_TRUE(row["present"].get<bool>()) << row;
    EXPECT_EQ(row["wrong"], 0) << row;
    EXPECT_EQ(row["call_bytes"], 40960) << row;
  }
  std::remove(path.c_str());
}

// --algo auto runs each size through what Tally's tuner would have NCCL pick: with 4 workers and
// 2 reducers on loopback (10 Gb/s assumed) the model takes CollNet for small messages and the
// ring for large ones (the reducers' links carry 2 S against the ring's 1.5 S), so both paths run.
TEST(BenchCli, AutoRunsWhatTheTunerPicks) {
  const std::string path = tempPath("auto.json");
  const std::vector<uint64_t> sizes = {65536, 4194304};
  TallyRun run = runTally(smallRun({"--workers", "4", "--reducers", "2", "--sizes", "64K,4M",
                                    "--algo", "rs,ring,auto", "--json", path}),
                          150);
  ASSERT_FALSE(run.timed_out) << run.out << run.err;
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find(" pick "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("auto/best"), std::string::npos) << run.out;
  json j = readJson(path);
  ASSERT_TRUE(j.is_object()) << readFile(path);
  tally::model::CollNetSetup setup;
  setup.ranks = setup.nodes = 4;
  setup.reducers = 2;
  std::set<std::string> picks;
  int autos = 0;
  for (const json& row : j["rows"]) {
    EXPECT_TRUE(row["present"].get<bool>()) << row;
    EXPECT_EQ(row["wrong"], 0) << row;
    if (row["algo"] != "auto") continue;
    ++autos;
    const uint64_t bytes = row["bytes"];
    const bool collnet =
        tally::model::chooseAllReduce(setup, bytes).algorithm == tally::model::kAlgoCollNetChain;
    EXPECT_EQ(row["picked"], collnet ? "rs" : "ring") << row;
    EXPECT_EQ(row["call_bytes"].is_null(), !collnet) << row;
    picks.insert(row["picked"].get<std::string>());
  }
  EXPECT_EQ(autos, 2);
  EXPECT_EQ(picks, (std::set<std::string>{"rs", "ring"})) << "the model no longer splits here";
  for (const json& r : j["ratios"]) EXPECT_GT(r["auto_over_best"].get<double>(), 0) << r;
  std::remove(path.c_str());
}

TEST(BenchCli, PlotDrawsAPng) {
  if (commandOutput("command -v gnuplot").empty())
    GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
  const std::string png = tempPath("plot.png");
  std::remove(png.c_str());
  TallyRun run = runTally(smallRun({"--sizes", "4K,64K", "--plot", png}), 120);
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  std::string data = readFile(png);
  ASSERT_GT(data.size(), 1000u);
  EXPECT_EQ(data.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  std::remove(png.c_str());
}

TEST(BenchCli, PlotWithoutGnuplotFailsBeforeRunning) {
  const std::string png = tempPath("never.png");
  TallyRun run = runTally(smallRun({"--sizes", "4K", "--plot", png}), 30,
                          {"PATH=/nonexistent-tally-bench-path"});
  EXPECT_EQ(run.status, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("--plot needs gnuplot"), std::string::npos) << run.err;
  EXPECT_TRUE(readFile(png).empty());
}

// --json and --plot files that cannot be written are refused before anything runs: a directory
// that does not exist, one that is not writable, a directory given as the file.
TEST(BenchCli, UnwritableOutputFailsBeforeRunning) {
  const bool gnuplot = !commandOutput("command -v gnuplot").empty();
  std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--json", "/nonexistent-tally-dir/run.json"},
       "--json: cannot create /nonexistent-tally-dir/run.json: directory /nonexistent-tally-dir "
       "does not exist"},
      {{"--json", "/tmp"}, "--json: /tmp is a directory"},
      {{"--json", "/etc/passwd/run.json"},
       "--json: cannot create /etc/passwd/run.json: /etc/passwd is not a directory"},
  };
  if (gnuplot) {
    cases.push_back({{"--plot", "/nonexistent-tally-dir/run.png"},
                     "--plot: cannot create /nonexistent-tally-dir/run.png: directory "
                     "/nonexistent-tally-dir does not exist"});
    cases.push_back({{"--plot", "/tmp/it's.png"}, "--plot: no quotes"});
  }
  for (const auto& [args, says] : cases) {
    std::vector<std::string> more = {"--sizes", "4K"};
    more.insert(more.end(), args.begin(), args.end());
    TallyRun run = runTally(smallRun(more), 30);
    EXPECT_EQ(run.status, 2) << args[1] << ": " << run.out << run.err;
    EXPECT_NE(run.err.find(says), std::string::npos) << args[1] << ": " << run.err;
    // Refused up front: no header, no table, no reducer started.
    EXPECT_TRUE(run.out.empty()) << args[1] << ": " << run.out;
    EXPECT_LT(run.seconds, 10.0);
  }
}

// Each line of the table is printed as soon as its size is measured: interrupted as soon as the
// first line shows, the run has printed that line and not the closing ones.
TEST(BenchCli, TablePrintsEachLineAsItIsMeasured) {
  bool interrupted = false;
  TallyRun run =
      runTally(smallRun({"--sizes", "4K,64M,64M", "-n", "5"}), 120, {}, nullptr,
               [&](pid_t pid, const std::string& out) {
                 if (!interrupted && out.find("4096         1024") != std::string::npos) {
                   ::kill(pid, SIGINT);
                   interrupted = true;
                 }
               });
  ASSERT_TRUE(interrupted) << run.out << run.err;
  EXPECT_EQ(run.status, 130) << run.out << run.err;
  EXPECT_NE(run.out.find("#        size"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("# avg busbw"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("all results correct"), std::string::npos) << run.out;
}

TEST(BenchCli, GlooRunsForFloat32SumOnly) {
#ifndef TALLY_TEST_GLOO_BENCH
  GTEST_SKIP() << "tally-gloo-bench was not built (Gloo is not installed)";
#else
  const std::string path = tempPath("gloo.json");
  TallyRun run =
      runTally(smallRun({"--sizes", "4K,64K", "-d", "float32,int32", "--algo", "ring,gloo",
                         "--gloo-bench", TALLY_TEST_GLOO_BENCH, "--json", path}),
               150);
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("Gloo is measured for float32 sum only"), std::string::npos) << run.out;
  json j = readJson(path);
  ASSERT_TRUE(j.is_object()) << readFile(path);
  int gloo_present = 0, gloo_skipped = 0;
  for (const json& row : j["rows"]) {
    const std::string algo = row["algo"];
    if (algo.rfind("gloo", 0) != 0) continue;
    if (row["type"] == "float32") {
      EXPECT_TRUE(row["present"].get<bool>()) << row;
      EXPECT_EQ(row["wrong"], 0) << row;
      expectCpuCost(row, row["bytes"].get<uint64_t>());
      ++gloo_present;
    } else {
      EXPECT_TRUE(row["skipped"].get<bool>()) << row;
      ++gloo_skipped;
    }
  }
  EXPECT_EQ(gloo_present, 4);  // 2 algorithms x 2 sizes
  EXPECT_EQ(gloo_skipped, 4);
  std::remove(path.c_str());
#endif
}

TEST(DemoPreset, KeepsTheDemoTable) {
  TallyRun run =
      runTally({"demo", "--plugin", TALLY_TEST_PLUGIN, "--reducer", TALLY_TEST_REDUCER, "--workers",
                "2", "--reducers", "1", "--sizes", "4K,1M", "--iters", "1", "--warmup", "0"},
               120);
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_EQ(run.out.rfind("tally demo: 2 workers, 1 reducer (", 0), 0u) << run.out;
  EXPECT_NE(run.out.find("server GB/s"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("     1 MiB     262144 |"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\nall results correct\n"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace tally::bench::test
