// SPDX-License-Identifier: Apache-2.0
// NCCL's own tuner loader and adapters, compiled from one NCCL version's source, find Tally's tuner
// in the net plugin's library (NCCL_NET_PLUGIN set to the built plugin, NCCL_TUNER_PLUGIN unset)
// and call it as NCCL's enqueue code does. Each case is a fresh process (tuner_report.h); this
// file decides what must have come back, per version:
//
//   - the table NCCL takes from Tally's library: ncclTunerPlugin_v2 on 2.21 (its only version),
//     v5 on 2.28, v6 on 2.30, each as it is;
//   - with reducers, the CollNet entries NCCL left enabled hold the model's cost and nothing else
//     changes, so NCCL's pick is model::chooseAllReduce's; on 2.21, the v2 pick is (with as many
//     reducers as make the model pick CollNet at some sizes and the ring at others);
//   - without reducers, or with TALLY_TUNER=0, the table comes back bit for bit (2.21: no pick);
//   - on 2.30, getChunkSize gives the model's chunk, which NCCL's ceiling never has to clamp;
//   - a tuner named by NCCL_TUNER_PLUGIN is used instead of Tally's, through NCCL's adapters
//     where NCCL has one, and NCCL_TUNER_PLUGIN=none loads none from 2.28 on (2.21 tries "none"
//     as a library name and falls back to the net plugin's library, so Tally's tuner still runs).
//
// Run as `<binary> --child RANKS NODES BUFFSIZE SIZES` it is one such process instead of the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "model/collnet.h"
#include "model/cost_table.h"
#include "test/nccl_source/loader/child_run.h"
#include "test/nccl_source/tuner/tuner_child.h"
#include "test/nccl_source/tuner/tuner_report.h"

namespace tally::nccl_source {
namespace {

constexpr int kRanks = 16;
constexpr int kNodes = 8;
constexpr int kReducers = 8;
constexpr uint64_t kDefaultBuffSize = 4ull << 20;
constexpr uint64_t kSimpleGrain = 512;  // NCCL rounds a Simple chunk down to this

std::string fileName(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// What the version at hand does with tuners.
struct Nccl {
  int code = tunerNcclVersionCode();
  bool cost_table = tunerTakesCostTable();  // 2.28 on; before, tuner v2 picks
  bool chunk_size() const { return code >= 23000; }
  bool honours_none() const { return cost_table; }
  std::string version() const {
    return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
           std::to_string(code % 100);
  }
  // The table NCCL takes from a library exporting v2 to v6.
  std::string newest_table() const {
    if (!cost_table) return "ncclTunerPlugin_v2";
    return chunk_size() ? "ncclTunerPlugin_v6" : "ncclTunerPlugin_v5";
  }
  std::string tally_table() const { return newest_table() + "@" + fileName(TALLY_TEST_PLUGIN); }
};

struct CostLine {
  int rc = -1;
  int algo = -2;
  int proto = -2;
  std::vector<float> table;
};

struct ChunkLine {
  int algo = -1;
  uint64_t bytes = 0, in = 0, out = 0;
  int rc = -1;
};

struct Report {
  int load_rc = -1;
  std::string tuner, table;
  int chunk = -1;
  int fin_rc = -1;
  std::map<std::pair<std::string, uint64_t>, CostLine> costs;
  std::vector<ChunkLine> chunks;
  std::vector<std::string> log;
  std::string raw;
  int count(const std::string& text) const { return countContaining(log, text); }
  const CostLine& cost(Shape shape, uint64_t bytes) const {
    static const CostLine kMissing;
    auto it = costs.find({shapeName(shape), bytes});
    return it == costs.end() ? kMissing : it->second;
  }
};

uint64_t number(const std::string& line, const std::string& key) {
  return std::strtoull(reportField(line, key).c_str(), nullptr, 10);
}

int integer(const std::string& line, const std::string& key) {
  return std::atoi(reportField(line, key).c_str());
}

std::vector<float> floatsFromHex(const std::string& csv) {
  std::vector<float> out;
  std::istringstream in(csv);
  std::string word;
  while (std::getline(in, word, ',')) {
    const uint32_t bits = static_cast<uint32_t>(std::strtoul(word.c_str(), nullptr, 16));
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    out.push_back(f);
  }
  return out;
}

Report parse(const std::string& out) {
  Report r;
  r.raw = out;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    const std::string verb = line.substr(0, line.find(' '));
    if (verb == "load") {
      r.load_rc = integer(line, "rc");
      r.tuner = reportField(line, "tuner");
      r.table = reportField(line, "table");
      r.chunk = integer(line, "chunk");
    } else if (verb == "cost") {
      CostLine& c = r.costs[{reportField(line, "shape"), number(line, "bytes")}];
      c.rc = integer(line, "rc");
      c.algo = integer(line, "algo");
      c.proto = integer(line, "proto");
      c.table = floatsFromHex(reportField(line, "table"));
    } else if (verb == "chunk") {
      r.chunks.push_back({integer(line, "algo"), number(line, "bytes"), number(line, "in"),
                          number(line, "out"), integer(line, "rc")});
    } else if (verb == "fin") {
      r.fin_rc = integer(line, "rc");
    } else if (verb == "log") {
      r.log.push_back(line.substr(4));
    }
  }
  return r;
}

bool sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

// NCCL's choice from its cost table: the cheapest entry it has not disabled, the first of equal
// ones, scanning algorithms and then protocols.
std::pair<int, int> ncclPick(const std::vector<float>& table) {
  const int protos = tunerNumProtocols();
  std::pair<int, int> pick{-1, -1};
  float best = 0;
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i] == model::kIgnoredCost || table[i] < 0) continue;
    if (pick.first == -1 || table[i] < best) {
      best = table[i];
      pick = {static_cast<int>(i) / protos, static_cast<int>(i) % protos};
    }
  }
  return pick;
}

bool isCollNetSimple(size_t index) {
  const int protos = tunerNumProtocols();
  const int algo = static_cast<int>(index) / protos;
  return (algo == model::kAlgoCollNetDirect || algo == model::kAlgoCollNetChain) &&
         static_cast<int>(index) % protos == model::kProtoSimple;
}

// 4 KiB to 256 MiB, every power of two.
std::vector<uint64_t> powersOfTwo() {
  std::vector<uint64_t> sizes;
  for (uint64_t b = 4096; b <= (256ull << 20); b *= 2) sizes.push_back(b);
  return sizes;
}

// TALLY_REDUCERS with `n` addresses. Nothing listens there: the tuner only counts them.
std::string reducerList(int n) {
  std::string list;
  for (int i = 0; i < n; ++i) list += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(9001 + i);
  return list;
}

bool modelPicksCollNet(const model::CollNetSetup& s, uint64_t bytes) {
  return model::chooseAllReduce(s, bytes).algorithm == model::kAlgoCollNetChain;
}

// The fewest reducers of 1 to 32 for which the model picks CollNet at some of `sizes` and NCCL's
// ring at others, so that a check of NCCL's pick can tell the two apart; 0 for none.
int reducersWithBothPicks(model::CollNetSetup s, const std::vector<uint64_t>& sizes) {
  for (int reducers = 1; reducers <= 32; reducers *= 2) {
    s.reducers = reducers;
    int collnet = 0;
    for (uint64_t bytes : sizes) collnet += modelPicksCollNet(s, bytes) ? 1 : 0;
    if (collnet > 0 && collnet < static_cast<int>(sizes.size())) return reducers;
  }
  return 0;
}

// `sizes` and, wherever the model's pick differs between two neighbours, the last size of one pick
// and the first of the other.
std::vector<uint64_t> withFlips(const model::CollNetSetup& s, std::vector<uint64_t> sizes) {
  const size_t n = sizes.size();
  for (size_t i = 0; i + 1 < n; ++i) {
    uint64_t lo = sizes[i];
    uint64_t hi = sizes[i + 1];
    const bool at_lo = modelPicksCollNet(s, lo);
    if (at_lo == modelPicksCollNet(s, hi)) continue;
    while (hi - lo > 1) {
      const uint64_t mid = lo + (hi - lo) / 2;
      (modelPicksCollNet(s, mid) == at_lo ? lo : hi) = mid;
    }
    sizes.push_back(lo);
    sizes.push_back(hi);
  }
  return sizes;
}

struct Job {
  int ranks = kRanks;
  int nodes = kNodes;
  uint64_t buff_size = kDefaultBuffSize;
  EnvVars env;
  std::vector<uint64_t> sizes = powersOfTwo();
};

// What Tally's tuner knows of a communicator, built here from the same inputs.
model::CollNetSetup tallySetup(const Nccl& nccl, const Job& job, int reducers) {
  model::CollNetSetup s;
  s.ranks = job.ranks;
  s.nodes = job.nodes;
  s.reducers = reducers;
  s.buff_size = job.buff_size;
  s.tuner_sets_chunk = nccl.chunk_size();
  return s;
}

class TunerTest : public ::testing::Test {
 protected:
  static Report run(const Job& job) {
    EnvVars env = {{"NCCL_NET_PLUGIN", TALLY_TEST_PLUGIN}, {"TALLY_SOCKET_IFNAME", "lo"}};
    env.insert(env.end(), job.env.begin(), job.env.end());
    std::string sizes;
    for (uint64_t b : job.sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(b);
    const ChildRun child = runSelf({"--child", std::to_string(job.ranks), std::to_string(job.nodes),
                                    std::to_string(job.buff_size), sizes},
                                   env, 60000);
    EXPECT_FALSE(child.timed_out);
    EXPECT_EQ(child.status, 0) << child.err;
    Report r = parse(child.out);
    EXPECT_EQ(r.fin_rc, 0) << r.raw;
    return r;
  }

  // A job whose reducers make the model pick CollNet at some sizes and the ring at others, with
  // the sizes where its pick flips; returns what Tally's tuner will know of it.
  model::CollNetSetup modelJob(Job* job) const {
    model::CollNetSetup s = tallySetup(nccl_, *job, 0);
    s.reducers = reducersWithBothPicks(s, job->sizes);
    EXPECT_GT(s.reducers, 0) << "the model picks the same at every size for any reducer count";
    job->sizes = withFlips(s, job->sizes);
    job->env.emplace_back("TALLY_REDUCERS", reducerList(static_cast<int>(s.reducers)));
    return s;
  }

  // NCCL found Tally's tuner and took the expected table from the plugin's library.
  void expectTally(const Report& r) const {
    EXPECT_EQ(r.load_rc, 0) << r.raw;
    EXPECT_EQ(r.tuner, "Tally") << r.raw;
    EXPECT_EQ(r.table, nccl_.tally_table()) << r.raw;
    EXPECT_EQ(r.chunk, nccl_.chunk_size() ? 1 : 0) << r.raw;
  }

  // Every table came back bit for bit, and no pick was made.
  void expectNothingChanged(const Job& job, const Report& r) const {
    for (Shape shape : kShapes) {
      for (uint64_t bytes : job.sizes) {
        SCOPED_TRACE(std::string(shapeName(shape)) + " " + std::to_string(bytes));
        const CostLine& c = r.cost(shape, bytes);
        EXPECT_EQ(c.rc, 0) << r.raw;
        EXPECT_EQ(c.algo, -1);
        EXPECT_EQ(c.proto, -1);
        const std::vector<float> in = ncclShapedTable(bytes, shape, job.ranks, job.nodes);
        ASSERT_EQ(c.table.size(), in.size()) << r.raw;
        for (size_t i = 0; i < in.size(); ++i) EXPECT_TRUE(sameBits(c.table[i], in[i])) << i;
      }
    }
  }

  Nccl nccl_;
};

TEST_F(TunerTest, FoundInTheNetPluginsLibraryWithoutSetting) {
  Job job;
  job.env = {{"TALLY_REDUCERS", reducerList(kReducers)}};
  const Report r = run(job);
  expectTally(r);
  // The tuner's init logged its setup through NCCL's logger, once.
  EXPECT_EQ(r.count("tuner: 16 ranks on 8 nodes, 8 reducers"), 1) << r.raw;
}

TEST_F(TunerTest, CostTableCollNetEntriesAreTheModelsAndNcclPicksAsTheModel) {
  if (!nccl_.cost_table) {
    GTEST_SKIP() << "NCCL " << nccl_.version() << " has tuner v2 only: it passes no cost table "
                 << "and asks for a pick (V2PickIsTheModelsChoice)";
  }
  Job job;
  const model::CollNetSetup s = modelJob(&job);
  const Report r = run(job);
  expectTally(r);
  int collnet_picks = 0;
  int ring_picks = 0;
  for (Shape shape : kShapes) {
    for (uint64_t bytes : job.sizes) {
      SCOPED_TRACE(std::string(shapeName(shape)) + " " + std::to_string(bytes));
      const CostLine& c = r.cost(shape, bytes);
      ASSERT_EQ(c.rc, 0) << r.raw;
      const std::vector<float> in = ncclShapedTable(bytes, shape, kRanks, kNodes);
      ASSERT_EQ(c.table.size(), in.size()) << r.raw;
      // NCCL's ring entry scaled by the model's rs/ring ratio; NCCL has 3 protocols.
      const int protos = 3;
      const int algos = static_cast<int>(in.size()) / protos;
      const float want = static_cast<float>(
          model::collNetCostMicros(s, bytes, model::ringCostInTable(in.data(), algos, protos)));
      ASSERT_GT(want, 0);
      for (size_t i = 0; i < in.size(); ++i) {
        if (isCollNetSimple(i) && in[i] != model::kIgnoredCost) {
          EXPECT_EQ(c.table[i], want) << "entry " << i;
        } else {
          EXPECT_TRUE(sameBits(c.table[i], in[i])) << "entry " << i << ": " << c.table[i];
        }
      }
      const std::pair<int, int> pick = ncclPick(c.table);
      const bool collnet = shape != Shape::kNone &&
                           model::chooseAllReduce(s, bytes).algorithm == model::kAlgoCollNetChain;
      const int collnet_algo =
          shape == Shape::kBoth ? model::kAlgoCollNetDirect : model::kAlgoCollNetChain;
      EXPECT_EQ(pick.first, collnet ? collnet_algo : model::kAlgoRing);
      EXPECT_EQ(pick.second, model::kProtoSimple);
      if (shape != Shape::kNone) (collnet ? collnet_picks : ring_picks) += 1;
    }
  }
  // The sizes cover both answers, so the comparison above can tell them apart.
  EXPECT_GT(collnet_picks, 0);
  EXPECT_GT(ring_picks, 0);
}

TEST_F(TunerTest, V2PickIsTheModelsChoice) {
  if (nccl_.cost_table) {
    GTEST_SKIP() << "NCCL " << nccl_.version() << " takes " << nccl_.newest_table()
                 << " from Tally's library, never v2 "
                 << "(CostTableCollNetEntriesAreTheModelsAndNcclPicksAsTheModel)";
  }
  Job job;
  const model::CollNetSetup s = modelJob(&job);
  const Report r = run(job);
  expectTally(r);
  int collnet_picks = 0;
  int ring_picks = 0;
  for (Shape shape : kShapes) {
    for (uint64_t bytes : job.sizes) {
      SCOPED_TRACE(std::string(shapeName(shape)) + " " + std::to_string(bytes));
      const CostLine& c = r.cost(shape, bytes);
      ASSERT_EQ(c.rc, 0) << r.raw;
      const bool collnet = shape != Shape::kNone &&
                           model::chooseAllReduce(s, bytes).algorithm == model::kAlgoCollNetChain;
      EXPECT_EQ(c.algo, collnet ? model::kAlgoCollNetChain : -1);
      EXPECT_EQ(c.proto, collnet ? model::kProtoSimple : -1);
      if (shape != Shape::kNone) (collnet ? collnet_picks : ring_picks) += 1;
    }
  }
  EXPECT_GT(collnet_picks, 0);
  EXPECT_GT(ring_picks, 0);
}

TEST_F(TunerTest, WithoutReducersNothingChanges) {
  Job job;
  const Report r = run(job);
  expectTally(r);
  EXPECT_EQ(r.count("the model does not cover it"), 1) << r.raw;
  expectNothingChanged(job, r);
}

TEST_F(TunerTest, TallyTunerOffChangesNothing) {
  Job job;
  job.env = {{"TALLY_REDUCERS", reducerList(kReducers)}, {"TALLY_TUNER", "0"}};
  const Report r = run(job);
  expectTally(r);
  EXPECT_EQ(r.count("tuner off (TALLY_TUNER=0)"), 1) << r.raw;
  expectNothingChanged(job, r);
}

TEST_F(TunerTest, V6ChunkSizeIsTheModelsWithinNcclsCeiling) {
  if (!nccl_.chunk_size()) {
    GTEST_SKIP() << "NCCL " << nccl_.version() << " asks no tuner for chunk sizes "
                 << "(getChunkSize is tuner v6, NCCL 2.30)";
  }
  // 64 hosts of one GPU and 4 reducers on fast links, where the model wants larger calls than
  // NCCL's chunk gives at some sizes; with NCCL_BUFFSIZE lowered, NCCL's ceiling is lower too.
  struct Case {
    int link_mbps;
    uint64_t buff_size;
  };
  for (const Case& k :
       {Case{100000, kDefaultBuffSize}, Case{400000, kDefaultBuffSize}, Case{400000, 2ull << 20}}) {
    Job job;
    job.ranks = 64;
    job.nodes = 64;
    job.buff_size = k.buff_size;
    job.env = {{"TALLY_REDUCERS", reducerList(4)},
               {"TALLY_LINK_MBPS", std::to_string(k.link_mbps)}};
    if (k.buff_size != kDefaultBuffSize) {
      job.env.emplace_back("NCCL_BUFFSIZE", std::to_string(k.buff_size));
    }
    SCOPED_TRACE("link " + std::to_string(k.link_mbps) + " buff " + std::to_string(k.buff_size));
    model::CollNetSetup s = tallySetup(nccl_, job, 4);
    s.link_mbps = k.link_mbps;
    s.link_from_config = true;
    const Report r = run(job);
    expectTally(r);
    // NCCL's ceiling for a CollNetChain chunk: one step of its Simple buffer.
    const uint64_t ceiling = k.buff_size / model::kNcclSteps;
    size_t chain_lines = 0;
    int raised = 0;
    for (const ChunkLine& c : r.chunks) {
      SCOPED_TRACE("algo " + std::to_string(c.algo) + " bytes " + std::to_string(c.bytes));
      EXPECT_EQ(c.rc, 0);
      if (c.algo != model::kAlgoCollNetChain) {
        EXPECT_EQ(c.out, c.in) << "only CollNet's chunk is the tuner's";
        continue;
      }
      ++chain_lines;
      EXPECT_EQ(c.in, ncclChainChunk(c.bytes, job.ranks, job.nodes, k.buff_size));
      const uint64_t want = model::tunerCollNetChunk(s, c.bytes, 2, c.in);
      // What NCCL runs with: clamped to its ceiling, rounded down to the protocol's grain.
      const uint64_t ran = std::min(c.out, ceiling) / kSimpleGrain * kSimpleGrain;
      EXPECT_EQ(ran, want);
      EXPECT_LE(c.out, ceiling) << "NCCL would clamp it and log so";
      raised += want > c.in ? 1 : 0;
    }
    EXPECT_EQ(chain_lines, job.sizes.size()) << r.raw;
    EXPECT_GT(raised, 0) << "the model raises the chunk somewhere, so the check can tell";
  }
}

TEST_F(TunerTest, NamedTunerIsUsedInsteadOfTallys) {
  // A tuner exporting v2 and v5.
  Job job;
  job.env = {{"TALLY_REDUCERS", reducerList(kReducers)},
             {"NCCL_TUNER_PLUGIN", TALLY_TEST_OTHER_TUNER}};
  Report r = run(job);
  EXPECT_EQ(r.load_rc, 0) << r.raw;
  EXPECT_EQ(r.tuner, "OtherTuner") << r.raw;
  const std::string other = fileName(TALLY_TEST_OTHER_TUNER);
  if (!nccl_.cost_table) {
    EXPECT_EQ(r.table, "ncclTunerPlugin_v2@" + other) << r.raw;
  } else if (!nccl_.chunk_size()) {
    EXPECT_EQ(r.table, "ncclTunerPlugin_v5@" + other) << r.raw;
  } else {
    EXPECT_EQ(r.table, "adapter") << "2.30 takes v5 through its own v6-shaped table\n" << r.raw;
  }
  EXPECT_EQ(r.count("tuner: 16 ranks"), 0) << "Tally's tuner was not initialized\n" << r.raw;
  for (Shape shape : kShapes) {
    for (uint64_t bytes : job.sizes) {
      SCOPED_TRACE(std::string(shapeName(shape)) + " " + std::to_string(bytes));
      const CostLine& c = r.cost(shape, bytes);
      EXPECT_EQ(c.rc, 0);
      if (!nccl_.cost_table) {
        EXPECT_EQ(c.algo, model::kAlgoTree);
        EXPECT_EQ(c.proto, model::kProtoLl);
        continue;
      }
      const std::vector<float> in = ncclShapedTable(bytes, shape, kRanks, kNodes);
      ASSERT_EQ(c.table.size(), in.size()) << r.raw;
      for (size_t i = 0; i < in.size(); ++i) {
        EXPECT_EQ(c.table[i],
                  in[i] == model::kIgnoredCost ? model::kIgnoredCost : TALLY_OTHER_TUNER_MARK)
            << i;
      }
    }
  }

  // A tuner exporting v2 only: from 2.28 on, NCCL's v2 adapter turns its pick into a cost of 0.
  job.env = {{"TALLY_REDUCERS", reducerList(kReducers)},
             {"NCCL_TUNER_PLUGIN", TALLY_TEST_OTHER_TUNER_V2}};
  r = run(job);
  EXPECT_EQ(r.load_rc, 0) << r.raw;
  EXPECT_EQ(r.tuner, "OtherTuner") << r.raw;
  EXPECT_EQ(r.table, nccl_.cost_table ? "adapter"
                                      : "ncclTunerPlugin_v2@" + fileName(TALLY_TEST_OTHER_TUNER_V2))
      << r.raw;
  for (Shape shape : kShapes) {
    for (uint64_t bytes : job.sizes) {
      SCOPED_TRACE(std::string(shapeName(shape)) + " " + std::to_string(bytes));
      const CostLine& c = r.cost(shape, bytes);
      EXPECT_EQ(c.rc, 0);
      if (!nccl_.cost_table) {
        EXPECT_EQ(c.algo, model::kAlgoTree);
        EXPECT_EQ(c.proto, model::kProtoLl);
        continue;
      }
      std::vector<float> want = ncclShapedTable(bytes, shape, kRanks, kNodes);
      want[static_cast<size_t>(model::kAlgoTree * tunerNumProtocols() + model::kProtoLl)] = 0.0f;
      ASSERT_EQ(c.table.size(), want.size()) << r.raw;
      for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(sameBits(c.table[i], want[i])) << i;
      EXPECT_EQ(ncclPick(c.table), std::make_pair(model::kAlgoTree, model::kProtoLl));
    }
  }
}

TEST_F(TunerTest, TunerPluginNoneLoadsNone) {
  if (!nccl_.honours_none()) {
    GTEST_SKIP() << "NCCL " << nccl_.version() << " has no NCCL_TUNER_PLUGIN=none "
                 << "(TunerPluginNoneIsOnlyALibraryNameOn2_21)";
  }
  Job job;
  job.env = {{"TALLY_REDUCERS", reducerList(kReducers)}, {"NCCL_TUNER_PLUGIN", "none"}};
  const Report r = run(job);
  EXPECT_EQ(r.load_rc, 0) << r.raw;
  EXPECT_EQ(r.tuner, "-") << r.raw;
  EXPECT_EQ(r.table, "-") << r.raw;
  EXPECT_EQ(r.count("tuner: 16 ranks"), 0) << r.raw;
  expectNothingChanged(job, r);
}

TEST_F(TunerTest, TunerPluginNoneIsOnlyALibraryNameOn2_21) {
  if (nccl_.honours_none()) {
    GTEST_SKIP() << "NCCL " << nccl_.version() << " honours NCCL_TUNER_PLUGIN=none "
                 << "(TunerPluginNoneLoadsNone)";
  }
  // No library "none" opens, so NCCL goes on to NCCL_NET_PLUGIN's library: Tally's tuner runs,
  // and only TALLY_TUNER=0 keeps it out of NCCL's choice.
  Job job;
  job.env = {{"TALLY_REDUCERS", reducerList(kReducers)}, {"NCCL_TUNER_PLUGIN", "none"}};
  const Report r = run(job);
  expectTally(r);
  EXPECT_EQ(r.count("tuner: 16 ranks on 8 nodes, 8 reducers"), 1) << r.raw;
}

}  // namespace
}  // namespace tally::nccl_source

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "--child") {
    std::vector<uint64_t> sizes;
    std::istringstream in(argv[5]);
    std::string word;
    while (std::getline(in, word, ',')) sizes.push_back(std::strtoull(word.c_str(), nullptr, 10));
    return tally::nccl_source::runTunerReport(std::atoi(argv[2]), std::atoi(argv[3]),
                                              std::strtoull(argv[4], nullptr, 10), sizes);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
