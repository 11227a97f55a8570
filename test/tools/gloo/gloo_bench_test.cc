// SPDX-License-Identifier: Apache-2.0
// tally-gloo-bench end to end: 2 and 3 ranks on 127.0.0.1 with a private FileStore directory,
// every result checked; bad arguments and a missing peer fail with a message. Plus the pieces
// the check relies on (inputs, expected sums, the wrong-element count, size parsing).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test/tools/gloo/rank_processes.h"
#include "tools/gloo/gloo_options.h"

namespace tally::gloo_bench {
namespace {

using test::RankResult;
using test::runRanks;

constexpr std::chrono::milliseconds kDeadline{25000};

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class StoreDir {
 public:
  StoreDir() {
    std::string tmpl = std::filesystem::temp_directory_path().string() + "/tally-gloo-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~StoreDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<std::string> rankArgs(int rank, int nranks, const std::string& store,
                                  const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {TALLY_GLOO_BENCH,
                                   "--rank",
                                   std::to_string(rank),
                                   "--nranks",
                                   std::to_string(nranks),
                                   "--store",
                                   store,
                                   "--address",
                                   "127.0.0.1",
                                   "--timeout",
                                   "20s"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

std::string describe(const std::vector<RankResult>& results) {
  std::string why;
  for (size_t r = 0; r < results.size(); ++r) {
    why += "rank " + std::to_string(r) + ": exit " + std::to_string(results[r].exitCode()) +
           (results[r].timed_out ? " (timed out)" : "") + "\n  stdout: " + results[r].out +
           "\n  stderr: " + results[r].err + "\n";
  }
  return why;
}

// Runs `nranks` ranks over 4 B, 4030 B (rounded down to 1007 floats, an odd count) and 64 KiB
// with both algorithms and --check, and checks every row rank 0 printed.
void runCheckedJob(int nranks) {
  StoreDir store;
  ASSERT_FALSE(store.path().empty());
  std::vector<std::vector<std::string>> ranks;
  for (int r = 0; r < nranks; ++r) {
    ranks.push_back(rankArgs(
        r, nranks, store.path(),
        {"--algo", "both", "--sizes", "4,4030,64K", "--iters", "3", "--warmup", "1", "--check"}));
  }
  const std::vector<RankResult> results = runRanks(ranks, kDeadline);
  for (const RankResult& result : results) {
    ASSERT_FALSE(result.timed_out) << describe(results);
    ASSERT_EQ(result.exitCode(), 0) << describe(results);
  }
  for (int r = 1; r < nranks; ++r) EXPECT_EQ(results[r].out, "") << "rank " << r;

  struct Want {
    const char* algo;
    uint64_t bytes;
    uint64_t count;
  };
  const std::vector<Want> want = {
      {"gloo_ring_chunked", 4, 1},           {"gloo_ring_chunked", 4028, 1007},
      {"gloo_ring_chunked", 65536, 16384},   {"gloo_halving_doubling", 4, 1},
      {"gloo_halving_doubling", 4028, 1007}, {"gloo_halving_doubling", 65536, 16384},
  };
  std::istringstream lines(results[0].out);
  std::string line;
  size_t row = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(row, want.size()) << "extra line: " << line;
    const nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_EQ(j.at("algo").get<std::string>(), want[row].algo) << line;
    EXPECT_EQ(j.at("bytes").get<uint64_t>(), want[row].bytes) << line;
    EXPECT_EQ(j.at("count").get<uint64_t>(), want[row].count) << line;
    EXPECT_EQ(j.at("wrong").get<int64_t>(), 0) << line;
    const double time_us = j.at("time_us").get<double>();
    EXPECT_GT(time_us, 0.0) << line;
    EXPECT_NEAR(j.at("algbw_gbs").get<double>(), want[row].bytes / (time_us * 1e3), 1e-9) << line;
    EXPECT_GT(j.at("cpu_s").get<double>(), 0.0) << line;  // every rank's CPU, summed
    ++row;
  }
  EXPECT_EQ(row, want.size()) << results[0].out;
}

TEST(GlooBench, TwoRanksCheckedRowsAreExact) { runCheckedJob(2); }

// Three ranks: not a power of two, so halving-doubling takes its binary-blocks path.
TEST(GlooBench, ThreeRanksCheckedRowsAreExact) { runCheckedJob(3); }

TEST(GlooBench, WithoutCheckWrongIsMinusOne) {
  StoreDir store;
  std::vector<std::vector<std::string>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(
        rankArgs(r, 2, store.path(), {"--algo", "ring_chunked", "--sizes", "1K", "--iters", "1"}));
  }
  const std::vector<RankResult> results = runRanks(ranks, kDeadline);
  ASSERT_EQ(results[0].exitCode(), 0) << describe(results);
  ASSERT_EQ(results[1].exitCode(), 0) << describe(results);
  const nlohmann::json j = nlohmann::json::parse(results[0].out);
  EXPECT_EQ(j.at("algo").get<std::string>(), "gloo_ring_chunked");
  EXPECT_EQ(j.at("wrong").get<int64_t>(), -1);
}

TEST(GlooBench, BadArgumentsExitWithAMessage) {
  StoreDir store;
  struct Case {
    std::vector<std::string> extra;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{"--sizes", "1K", "--algo", "ring"}, "expected ring_chunked, halving_doubling or both"},
      {{"--sizes", "2"}, "smaller than one float32"},
      {{"--sizes", "1K,,4K"}, "--sizes"},
      {{"--sizes", "1K", "--timeout", "soon"}, "--timeout"},
  };
  for (const Case& c : cases) {
    const std::vector<RankResult> results =
        runRanks({rankArgs(0, 2, store.path(), c.extra)}, kDeadline);
    EXPECT_EQ(results[0].exitCode(), 2) << c.message << "\n" << describe(results);
    EXPECT_NE(results[0].err.find(c.message), std::string::npos) << describe(results);
    EXPECT_EQ(results[0].out, "");
  }
  const std::vector<RankResult> bad_rank =
      runRanks({rankArgs(2, 2, store.path(), {"--sizes", "1K"})}, kDeadline);
  EXPECT_EQ(bad_rank[0].exitCode(), 2) << describe(bad_rank);
  EXPECT_NE(bad_rank[0].err.find("--rank 2 is not in [0, 2)"), std::string::npos);
  std::vector<std::string> bad_address = rankArgs(0, 2, store.path(), {"--sizes", "1K"});
  bad_address[8] = "localhost";
  const std::vector<RankResult> named = runRanks({bad_address}, kDeadline);
  EXPECT_EQ(named[0].exitCode(), 2) << describe(named);
  EXPECT_NE(named[0].err.find("numeric IP address"), std::string::npos) << describe(named);
}

// Rank 1 never starts: rank 0's rendezvous wait ends at --timeout with an error, not a hang.
TEST(GlooBench, MissingPeerTimesOut) {
  StoreDir store;
  std::vector<std::string> argv = rankArgs(0, 2, store.path(), {"--sizes", "1K"});
  argv[10] = "1s";  // --timeout
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<RankResult> results = runRanks({argv}, kDeadline);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(results[0].timed_out);
  EXPECT_EQ(results[0].exitCode(), 1) << describe(results);
  EXPECT_NE(results[0].err.find("rank 0 of 2: timeout"), std::string::npos) << describe(results);
  EXPECT_LT(took, std::chrono::seconds(10));
}

// A second run with the same store directory and prefix finds the first run's keys and says
// what to do; another --prefix in the same directory works.
TEST(GlooBench, ReusedPrefixIsReportedAndAnotherPrefixWorks) {
  StoreDir store;
  const std::vector<std::string> args = rankArgs(0, 1, store.path(), {"--sizes", "1K"});
  const std::vector<RankResult> first = runRanks({args}, kDeadline);
  ASSERT_EQ(first[0].exitCode(), 0) << describe(first);
  // One rank, both algorithms: two rows of seven fields.
  EXPECT_EQ(std::count(first[0].out.begin(), first[0].out.end(), '\n'), 2) << first[0].out;
  EXPECT_EQ(nlohmann::json::parse(first[0].out.substr(0, first[0].out.find('\n'))).size(), 7u);
  const std::vector<RankResult> again = runRanks({args}, kDeadline);
  EXPECT_EQ(again[0].exitCode(), 1) << describe(again);
  EXPECT_NE(again[0].err.find("another --prefix"), std::string::npos) << describe(again);
  std::vector<std::string> other = args;
  other.insert(other.end(), {"--prefix", "second"});
  const std::vector<RankResult> second = runRanks({other}, kDeadline);
  EXPECT_EQ(second[0].exitCode(), 0) << describe(second);
}

TEST(GlooBenchOptions, ExpectedSumMatchesInputsAndIsExact) {
  for (int nranks : {1, 2, 3, 8}) {
    for (size_t i : {size_t{0}, size_t{1}, size_t{16}, size_t{1006}, size_t{1} << 30}) {
      double sum = 0;
      for (int r = 0; r < nranks; ++r) {
        const float v = inputValue(r, i);
        EXPECT_EQ(v, std::round(v));
        EXPECT_LE(std::fabs(v), 8.0f);
        sum += v;
      }
      EXPECT_EQ(expectedSum(nranks, i), static_cast<float>(sum)) << nranks << " " << i;
    }
  }
  // Ranks see different data, or a broken all-reduce could pass by returning n * input.
  EXPECT_NE(inputValue(0, 5), inputValue(1, 5));
}

TEST(GlooBenchOptions, CountWrongFindsEveryDifference) {
  std::vector<float> expected = {1, -2, 0, 4, 5};
  std::vector<float> got = expected;
  size_t first = 99;
  EXPECT_EQ(countWrong(got.data(), expected.data(), got.size(), &first), 0u);
  EXPECT_EQ(first, 99u);
  got[2] = -0.0f;
  got[4] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(countWrong(got.data(), expected.data(), got.size(), &first), 2u);
  EXPECT_EQ(first, 2u);
}

TEST(GlooBenchOptions, SizesRoundDownToWholeFloats) {
  std::vector<uint64_t> sizes;
  ASSERT_TRUE(parseSizes("4,4030,256K,1M", &sizes).isOk());
  EXPECT_EQ(sizes, (std::vector<uint64_t>{4, 4028, 262144, 1048576}));
  EXPECT_FALSE(parseSizes("3", &sizes).isOk());
  EXPECT_FALSE(parseSizes("", &sizes).isOk());
  EXPECT_FALSE(parseSizes("1K,", &sizes).isOk());
  EXPECT_FALSE(parseSizes("9G", &sizes).isOk());                        // more than INT_MAX floats
  EXPECT_EQ(sizes, (std::vector<uint64_t>{4, 4028, 262144, 1048576}));  // untouched on error
}

}  // namespace
}  // namespace tally::gloo_bench
