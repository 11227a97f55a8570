// SPDX-License-Identifier: Apache-2.0
// CollNet through the built plugin, across processes: forked workers drive ncclCollNetPlugin_v8,
// _v11 and _v12 exactly as NCCL's proxy does (tools/driver/coll_driver.h) against tally-reducer
// processes on ephemeral loopback ports. Every result is compared with a reference the test
// computes itself (tools/driver/reference.h), and every worker's output bytes must hash the same.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "common/store.h"
#include "test/support/cluster.h"
#include "tools/driver/coll_driver.h"
#include "tools/driver/reference.h"

namespace tally::functional {
namespace {

std::string versionName(const ::testing::TestParamInfo<int>& p) {
  return "v" + std::to_string(p.param);
}

using driver::CollComm;
using driver::CollCommOptions;

struct Case {
  DataType type;
  ReduceOp op;
  size_t count;
};

// Runs one all-reduce of a case in a worker and appends "<type> <op> <count> <wrong> <hash>" to
// *report. Returns false only when the call itself failed.
bool runCase(CollComm* comm, const Case& c, uint64_t seed, std::string* report) {
  const size_t bytes = c.count * dataTypeSize(c.type);
  std::vector<char> in(bytes), out(bytes), expected(bytes);
  driver::fillInput(c.type, c.op, comm->rank(), comm->nranks(), seed, c.count, in.data());
  driver::fillExpected(c.type, c.op, comm->nranks(), seed, c.count, expected.data());
  std::string what =
      std::string(dataTypeName(c.type)) + " " + reduceOpName(c.op) + " " + std::to_string(c.count);
  if (!check(comm->rank(), comm->allreduce(in.data(), out.data(), c.count, c.type, c.op), what)) {
    return false;
  }
  size_t first = 0;
  size_t wrong = driver::countMismatches(c.type, out.data(), expected.data(), c.count, &first);
  if (wrong != 0) {
    std::fprintf(stderr, "worker %d: %s: %zu wrong, first %s\n", comm->rank(), what.c_str(), wrong,
                 driver::describeElement(c.type, out.data(), expected.data(), first).c_str());
  }
  char line[160];
  std::snprintf(line, sizeof(line), "%s %zu %016llx\n", what.c_str(), wrong,
                static_cast<unsigned long long>(driver::hashBytes(out.data(), bytes)));
  *report += line;
  return true;
}

// Parent side: every worker's report has no wrong element and all reports are identical (the
// same bytes came back to every worker).
void expectReports(Store* store, const std::string& key, int nworkers) {
  std::vector<std::string> reports(static_cast<size_t>(nworkers));
  for (int r = 0; r < nworkers; ++r) {
    Status s = store->get(key + "/" + std::to_string(r), &reports[static_cast<size_t>(r)], 0);
    ASSERT_TRUE(s.isOk()) << s.toString();
  }
  std::istringstream lines(reports[0]);
  std::string line;
  int cases = 0;
  while (std::getline(lines, line)) {
    ++cases;
    if (line.rfind("unsupported", 0) == 0) {
      ADD_FAILURE() << "reduceSupport said no: " << line;
      continue;
    }
    char type[32], op[32];
    size_t count = 0, wrong = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "%31s %31s %zu %zu", type, op, &count, &wrong), 4) << line;
    EXPECT_EQ(wrong, 0u) << line;
  }
  EXPECT_GT(cases, 0);
  for (int r = 1; r < nworkers; ++r) {
    EXPECT_EQ(reports[static_cast<size_t>(r)], reports[0])
        << "worker " << r << " got other bytes than worker 0";
  }
}

class CollNetFixture {
 protected:
  bool haveBinaries() { return !pluginPath().empty() && !reducerPath().empty(); }
  void startReducers(int n, const std::vector<std::string>& reducer_args = {}) {
    Status s = startCluster(n, &cluster_, reducer_args);
    ASSERT_TRUE(s.isOk()) << s.toString();
  }
  // Reducers must survive the test and stop cleanly on SIGTERM.
  void stopReducers() {
    for (auto& r : cluster_.reducers) {
      Status s = r->stop();
      EXPECT_TRUE(s.isOk()) << s.toString();
    }
  }
  Cluster cluster_;
};

// ---- Every type and op, across worker/reducer counts and table versions ---------------------

struct MatrixConfig {
  int version;
  int workers;
  int reducers;
  const char* progress = nullptr;  // TALLY_COLL_PROGRESS; null: the default (thread)
  // The reducers send results and the workers their slices with MSG_ZEROCOPY (--zerocopy
  // always, TALLY_ZEROCOPY=always), from the smallest write up (headers alone included), so
  // every message waits for its completion.
  bool zerocopy = false;
};

class CollNetMatrix : public ::testing::TestWithParam<MatrixConfig>, protected CollNetFixture {};

// A different subset of types at the big count for each configuration keeps the suite short on
// two cores while every type meets the big count somewhere.
std::vector<Case> bigCases(int index) {
  const size_t big = (1u << 20) + 3;
  std::vector<Case> all = {
      {DataType::kFloat32, ReduceOp::kSum, big},    {DataType::kBfloat16, ReduceOp::kMax, big},
      {DataType::kFloat8e4m3, ReduceOp::kSum, big}, {DataType::kInt32, ReduceOp::kProd, big},
      {DataType::kFloat16, ReduceOp::kSum, big},    {DataType::kFloat64, ReduceOp::kMin, big},
      {DataType::kUint8, ReduceOp::kSum, big},      {DataType::kFloat8e5m2, ReduceOp::kProd, big},
      {DataType::kInt64, ReduceOp::kMax, big},      {DataType::kUint64, ReduceOp::kSum, big},
      {DataType::kInt8, ReduceOp::kMin, big},       {DataType::kUint32, ReduceOp::kMax, big},
  };
  std::vector<Case> picked;
  for (size_t i = 0; i < 3; ++i)
    picked.push_back(all[(static_cast<size_t>(index) * 3 + i) % all.size()]);
  return picked;
}

int matrixIndex(const MatrixConfig& c) { return c.workers * 7 + c.reducers + c.version; }

TEST_P(CollNetMatrix, EveryTypeAndOpIsExactAndIdenticalOnAllWorkers) {
  if (!haveBinaries()) GTEST_SKIP() << "plugin or tally-reducer was not built";
  const MatrixConfig cfg = GetParam();
  std::vector<std::string> reducer_args;
  if (cfg.zerocopy) reducer_args = {"--zerocopy", "always", "--zerocopy-min-bytes", "0"};
  ASSERT_NO_FATAL_FAILURE(startReducers(cfg.reducers, reducer_args));
  Store* store = cluster_.store.get();
  std::string why = runAll(cfg.workers, [&](int rank) -> int {
    setWorkerEnvironment(cluster_.reducer_list);
    if (cfg.progress != nullptr) ::setenv("TALLY_COLL_PROGRESS", cfg.progress, 1);
    if (cfg.zerocopy) {
      ::setenv("TALLY_ZEROCOPY", "always", 1);
      ::setenv("TALLY_ZEROCOPY_MIN_BYTES", "0", 1);
    }
    std::unique_ptr<driver::PluginLibrary> lib;
    std::unique_ptr<driver::CollNetApi> api;
    if (!openCollNet(cfg.version, &lib, &api)) return 2;
    CollCommOptions options;
    options.call_bytes = 128 * 1024;  // the big counts take many calls, several in flight
    // From v11 on, counts are rounded up to whole 8 KiB chunks as NCCL does: stale tails.
    if (cfg.version >= 11) options.whole_chunk_bytes = 8 * 1024;
    std::unique_ptr<CollComm> comm;
    if (!check(rank, CollComm::create(api.get(), store, "coll", rank, cfg.workers, options, &comm),
               "setup"))
      return 3;
    std::string report;
    for (int t = 0; t < kNumDataTypes; ++t) {
      for (int o = 0; o < kNumReduceOps; ++o) {
        auto type = static_cast<DataType>(t);
        auto op = static_cast<ReduceOp>(o);
        if (!comm->supported(type, op)) {
          report +=
              std::string("unsupported ") + dataTypeName(type) + " " + reduceOpName(op) + " 0 1\n";
          continue;
        }
        for (size_t count : {size_t{1}, size_t{7}, size_t{4097}}) {
          if (!runCase(comm.get(), {type, op, count}, 1000 + t * 10 + o, &report)) return 4;
        }
      }
    }
    for (const Case& c : bigCases(matrixIndex(cfg))) {
      if (!runCase(comm.get(), c, 77, &report)) return 4;
    }
    if (!check(rank, store->set("report/" + std::to_string(rank), report), "store")) return 5;
    return check(rank, comm->close(), "close") ? 0 : 6;
  });
  EXPECT_EQ(why, "");
  if (why.empty()) expectReports(store, "report", cfg.workers);
  stopReducers();
}

std::string matrixName(const ::testing::TestParamInfo<MatrixConfig>& p) {
  return "v" + std::to_string(p.param.version) + "_w" + std::to_string(p.param.workers) + "_r" +
         std::to_string(p.param.reducers) +
         (p.param.progress != nullptr ? std::string("_") + p.param.progress : "") +
         (p.param.zerocopy ? "_zerocopy" : "");
}

// Each worker count (2, 3, 4, 8) and reducer count (1, 2, 3) appears for v8 and v11; v12, which
// differs from v11 only in its property layout, runs one of them; the other two progress modes
// (TALLY_COLL_PROGRESS) run one each, and one has the reducers and workers send with
// MSG_ZEROCOPY.
INSTANTIATE_TEST_SUITE_P(Spread, CollNetMatrix,
                         ::testing::Values(MatrixConfig{8, 2, 1}, MatrixConfig{8, 3, 2},
                                           MatrixConfig{8, 4, 3}, MatrixConfig{8, 8, 2},
                                           MatrixConfig{8, 2, 3}, MatrixConfig{11, 2, 1},
                                           MatrixConfig{11, 3, 2}, MatrixConfig{11, 4, 3},
                                           MatrixConfig{11, 8, 2}, MatrixConfig{11, 2, 3},
                                           MatrixConfig{12, 3, 2}, MatrixConfig{11, 4, 2, "poll"},
                                           MatrixConfig{8, 3, 3, "legacy"},
                                           MatrixConfig{11, 4, 2, nullptr, true}),
                         matrixName);

// ---- Communicators at once, long call streams ----------------------------------------------

class CollNetVersion : public ::testing::TestWithParam<int>, protected CollNetFixture {
 protected:
  // On two reducers, each of `nworkers` workers opens the tables of this test's version (with
  // `env` set), makes one CollComm with `options`, runs case `c` (checked, and its bytes
  // compared across workers) and closes it. `stats_problem` says what is wrong with the comm's
  // stats after the case ("" when nothing).
  void runOneCase(int nworkers, const std::vector<std::pair<const char*, const char*>>& env,
                  const CollCommOptions& options, const Case& c, uint64_t seed,
                  const std::function<std::string(const driver::CollStats&)>& stats_problem) {
    if (!haveBinaries()) GTEST_SKIP() << "plugin or tally-reducer was not built";
    const int version = GetParam();
    ASSERT_NO_FATAL_FAILURE(startReducers(2));
    Store* store = cluster_.store.get();
    std::string why = runAll(nworkers, [&](int rank) -> int {
      setWorkerEnvironment(cluster_.reducer_list);
      for (const auto& [name, value] : env) ::setenv(name, value, 1);
      std::unique_ptr<driver::PluginLibrary> lib;
      std::unique_ptr<driver::CollNetApi> api;
      if (!openCollNet(version, &lib, &api)) return 2;
      std::unique_ptr<CollComm> comm;
      if (!check(rank, CollComm::create(api.get(), store, "coll", rank, nworkers, options, &comm),
                 "setup"))
        return 3;
      std::string report;
      if (!runCase(comm.get(), c, seed, &report)) return 4;
      const std::string problem = stats_problem(comm->stats());
      if (!problem.empty()) {
        std::fprintf(stderr, "worker %d: %s\n", rank, problem.c_str());
        return 7;
      }
      if (!check(rank, store->set("report/" + std::to_string(rank), report), "store")) return 5;
      return check(rank, comm->close(), "close") ? 0 : 6;
    });
    EXPECT_EQ(why, "");
    if (why.empty()) expectReports(store, "report", nworkers);
    stopReducers();
  }
};

// Two communicators of the same workers share the reducers at the same time, each driven by its
// own thread (NCCL runs a proxy thread per communicator).
TEST_P(CollNetVersion, TwoCommunicatorsShareReducersAtOnce) {
  if (!haveBinaries()) GTEST_SKIP() << "plugin or tally-reducer was not built";
  const int version = GetParam();
  const int nworkers = 3;
  ASSERT_NO_FATAL_FAILURE(startReducers(2));
  Store* store = cluster_.store.get();
  std::string why = runAll(nworkers, [&](int rank) -> int {
    setWorkerEnvironment(cluster_.reducer_list);
    std::unique_ptr<driver::PluginLibrary> lib;
    std::unique_ptr<driver::CollNetApi> api;
    if (!openCollNet(version, &lib, &api)) return 2;
    CollCommOptions options;
    options.call_bytes = 64 * 1024;
    std::unique_ptr<CollComm> a, b;
    if (!check(rank, CollComm::create(api.get(), store, "commA", rank, nworkers, options, &a),
               "setup A"))
      return 3;
    if (!check(rank, CollComm::create(api.get(), store, "commB", rank, nworkers, options, &b),
               "setup B"))
      return 3;
    std::string report_a, report_b;
    bool ok_a = true, ok_b = true;
    std::thread ta([&] {
      for (int i = 0; i < 20 && ok_a; ++i) {
        ok_a = runCase(a.get(), {DataType::kFloat32, ReduceOp::kSum, size_t{50000} + i}, 500 + i,
                       &report_a);
      }
    });
    std::thread tb([&] {
      for (int i = 0; i < 20 && ok_b; ++i) {
        ok_b = runCase(b.get(), {DataType::kInt32, ReduceOp::kMax, size_t{30000} + 3 * i}, 900 + i,
                       &report_b);
      }
    });
    ta.join();
    tb.join();
    if (!ok_a || !ok_b) return 4;
    if (!check(rank, store->set("A/" + std::to_string(rank), report_a), "store")) return 5;
    if (!check(rank, store->set("B/" + std::to_string(rank), report_b), "store")) return 5;
    bool closed = check(rank, a->close(), "close A");
    closed = check(rank, b->close(), "close B") && closed;
    return closed ? 0 : 6;
  });
  EXPECT_EQ(why, "");
  if (why.empty()) {
    expectReports(store, "A", nworkers);
    expectReports(store, "B", nworkers);
  }
  stopReducers();
}

// A thousand back-to-back iallreduce calls with up to 32 in flight, oldest tested first.
TEST_P(CollNetVersion, ThousandCallsWithThirtyTwoInFlight) {
  CollCommOptions options;
  options.call_bytes = 64 * sizeof(float);
  options.max_inflight = 32;
  runOneCase(4, {}, options, {DataType::kFloat32, ReduceOp::kSum, 1000 * 64}, 5,
             [](const driver::CollStats& stats) {
               return stats.calls == 1000
                          ? std::string()
                          : std::to_string(stats.calls) + " calls issued, expected 1000";
             });
}

// Fewer calls in flight allowed (TALLY_COLL_MAX_REQUESTS=2) than the driver keeps (8, as NCCL
// does): posts come back NULL and are retried with no test in between, as NCCL's send proxy
// retries them, so the room must come from calls completing, not from tests. Exact.
TEST_P(CollNetVersion, NullRequestsRetriedWithoutATestInBetween) {
  CollCommOptions options;
  options.call_bytes = 16 << 10;
  options.max_inflight = 8;
  runOneCase(2, {{"TALLY_COLL_MAX_REQUESTS", "2"}}, options,
             {DataType::kFloat32, ReduceOp::kSum, (256 << 10) + 3}, 11,
             [](const driver::CollStats& stats) {
               return stats.null_requests > 0
                          ? std::string()
                          : "no NULL request in " + std::to_string(stats.calls) + " calls";
             });
}

// No reducers configured: CollNet still reports its one device (the count every host of a job
// reports), and connect declines at once, as NCCL expects to fall back to point-to-point.
TEST_P(CollNetVersion, NoReducersDeclinesAtConnect) {
  if (!haveBinaries()) GTEST_SKIP() << "plugin or tally-reducer was not built";
  const int version = GetParam();
  std::string why = runAll(1, [&](int) -> int {
    setWorkerEnvironment("");
    std::unique_ptr<driver::PluginLibrary> lib;
    std::unique_ptr<driver::CollNetApi> api;
    if (!openCollNet(version, &lib, &api)) return 2;
    void* ctx = nullptr;
    ncclResult_t r = api->init(1, &ctx);
    int ndev = -1;
    if (r == ncclSuccess) r = api->devices(&ndev);
    if (r != ncclSuccess || ndev != 1) {
      std::fprintf(stderr, "init/devices: %s, ndev %d (want success, 1)\n",
                   driver::ncclResultName(r), ndev);
      return 3;
    }
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* listen_comm = nullptr;
    if (api->listen(ctx, 0, handle, &listen_comm) != ncclSuccess) return 4;
    void* handles[1] = {handle};
    void* coll_comm = nullptr;
    r = api->connect(handles, 1, 0, listen_comm, &coll_comm);
    if (r != ncclInvalidUsage || coll_comm != nullptr) {
      std::fprintf(stderr, "connect: %s (want ncclInvalidUsage)\n", driver::ncclResultName(r));
      return 5;
    }
    if (api->closeListen(listen_comm) != ncclSuccess) return 6;
    return api->finalize(ctx) == ncclSuccess ? 0 : 7;
  });
  EXPECT_EQ(why, "");
}

// A reducer killed mid-job costs no call (docs/failover.md): the next calls go on over the other
// one and are exact; once the other is killed too, the calls fail with ncclRemoteError.
TEST_P(CollNetVersion, LostReducerCostsNoCallAndTheLastOneIsARemoteError) {
  if (!haveBinaries()) GTEST_SKIP() << "plugin or tally-reducer was not built";
  const int version = GetParam();
  const int nworkers = 2;
  ASSERT_NO_FATAL_FAILURE(startReducers(2));
  Store* store = cluster_.store.get();
  const pid_t first = cluster_.reducers[1]->pid();
  const pid_t last = cluster_.reducers[0]->pid();
  std::string why = runAll(nworkers, [&](int rank) -> int {
    setWorkerEnvironment(cluster_.reducer_list);
    std::unique_ptr<driver::PluginLibrary> lib;
    std::unique_ptr<driver::CollNetApi> api;
    if (!openCollNet(version, &lib, &api)) return 2;
    CollCommOptions options;
    options.call_bytes = 64 * 1024;
    options.timeout_ms = 40000;
    std::unique_ptr<CollComm> comm;
    if (!check(rank, CollComm::create(api.get(), store, "coll", rank, nworkers, options, &comm),
               "setup"))
      return 3;
    std::string report;
    if (!runCase(comm.get(), {DataType::kFloat32, ReduceOp::kSum, 100000}, 1, &report)) return 4;
    if (!storeBarrier(store, "before-kill", rank, nworkers, kStoreTimeoutMs).isOk()) return 5;
    if (rank == 0) ::kill(first, SIGKILL);
    if (!storeBarrier(store, "after-kill", rank, nworkers, kStoreTimeoutMs).isOk()) return 5;
    for (int i = 0; i < 5; ++i) {
      if (!runCase(comm.get(), {DataType::kFloat32, ReduceOp::kSum, (1 << 20) + 1}, 2 + i,
                   &report)) {
        std::fprintf(stderr, "worker %d: after one reducer died: %s\n", rank, report.c_str());
        return 6;
      }
    }
    if (!storeBarrier(store, "before-last", rank, nworkers, kStoreTimeoutMs).isOk()) return 5;
    if (rank == 0) ::kill(last, SIGKILL);
    std::vector<float> in(1 << 20, 1.0f), out(1 << 20);
    Status s;
    for (int i = 0; i < 20 && s.isOk(); ++i) {
      s = comm->allreduce(in.data(), out.data(), in.size(), DataType::kFloat32, ReduceOp::kSum);
    }
    if (s.code() != StatusCode::kRemote) {
      std::fprintf(stderr, "worker %d: after both reducers died: %s (want ncclRemoteError)\n",
                   rank, s.isOk() ? "success" : s.toString().c_str());
      return 7;
    }
    (void)comm->close();
    return 0;
  });
  EXPECT_EQ(why, "");
  cluster_.reducers[1]->kill();
  cluster_.reducers[0]->kill();
}

INSTANTIATE_TEST_SUITE_P(Tables, CollNetVersion, ::testing::Values(8, 11, 12), versionName);

}  // namespace
}  // namespace tally::functional
