// SPDX-License-Identifier: Apache-2.0
// Load: one CollNet communicator of 32 forked worker processes against 4 tally-reducer processes
// on loopback, a few hundred checked all-reduce calls of mixed sizes. Every worker compares every
// element with the reference, and all 32 must have received the same bytes.
#include <gtest/gtest.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>

#include "test/support/cluster.h"
#include "test/system/soak/soak_support.h"

namespace tally::soak {
namespace {

using driver::CollComm;
using driver::CollCommOptions;

constexpr int kWorkers = 32;
constexpr int kReducers = 4;
constexpr uint64_t kCalls = 300;
constexpr int64_t kRunTimeoutMs = 300000;

// Only types and ops whose reference stays exact at 32 ranks (tools/driver/reference.h): integers,
// floating sums (the bound shrinks with the rank count), min/max, and float32 products (powers of
// two within 2^+-32). Counts in elements; with 4 reducers a call over 32 KiB is cut into slices.
std::vector<CallSpec> loadMix() {
  return {
      {DataType::kFloat32, ReduceOp::kSum, 1},    {DataType::kInt32, ReduceOp::kMax, 4099},
      {DataType::kBfloat16, ReduceOp::kSum, 777}, {DataType::kFloat32, ReduceOp::kProd, 2051},
      {DataType::kUint8, ReduceOp::kSum, 33001},  {DataType::kFloat64, ReduceOp::kMin, 8193},
      {DataType::kInt64, ReduceOp::kSum, 3},      {DataType::kFloat32, ReduceOp::kSum, 70001},
      {DataType::kUint32, ReduceOp::kMin, 12345}, {DataType::kFloat16, ReduceOp::kMax, 5000},
  };
}
constexpr int kSeeds = 3;

int loadWorker(int rank, Store* store, const std::string& reducer_list) {
  using functional::check;
  functional::setWorkerEnvironment(reducer_list);
  std::unique_ptr<driver::PluginLibrary> lib;
  std::unique_ptr<driver::CollNetApi> api;
  if (!functional::openCollNet(8, &lib, &api)) return 2;
  CollCommOptions options;  // call_bytes (1 MiB) exceeds every spec: one iallreduce per call
  std::unique_ptr<CollComm> comm;
  if (!check(rank, CollComm::create(api.get(), store, "load", rank, kWorkers, options, &comm),
             "setup"))
    return 3;
  CallMix mix(loadMix(), kSeeds, rank, kWorkers, 7);
  CheckedResults results;
  for (uint64_t i = 0; i < kCalls; ++i) {
    if (!mix.run(comm.get(), i, &results)) return 4;
  }
  bool fine = true;
  if (comm->stats().calls != kCalls) {
    std::fprintf(stderr, "worker %d: %" PRIu64 " iallreduce calls issued, expected %" PRIu64 "\n",
                 rank, comm->stats().calls, kCalls);
    fine = false;
  }
  fine =
      check(rank, store->set("result/" + std::to_string(rank), results.encode()), "store") && fine;
  fine = check(rank, comm->close(), "close") && fine;
  return fine ? 0 : 6;
}

TEST(Load, ThirtyTwoWorkersOnFourReducers) {
  if (functional::pluginPath().empty() || functional::reducerPath().empty())
    GTEST_SKIP() << "plugin or tally-reducer was not built";
  functional::Cluster cluster;
  Status s = functional::startCluster(kReducers, &cluster);
  ASSERT_TRUE(s.isOk()) << s.toString();
  Store* store = cluster.store.get();

  driver::WorkerHooks hooks;
  hooks.failure_grace_ms = 15000;
  std::vector<driver::WorkerExit> exits;
  const auto t0 = std::chrono::steady_clock::now();
  s = driver::runWorkers(
      kWorkers, [&](int rank) { return loadWorker(rank, store, cluster.reducer_list); },
      kRunTimeoutMs, &exits, hooks);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(s.isOk()) << s.toString();
  std::string why;
  EXPECT_TRUE(driver::allWorkersOk(exits, &why)) << why;
  if (why.empty()) expectResults(store, "result", kWorkers, kCalls);
  std::printf("[load] %d workers, %d reducers: %" PRIu64 " calls in %.1f s (setup included)\n",
              kWorkers, kReducers, kCalls, secs);
  for (size_t j = 0; j < cluster.reducers.size(); ++j) {
    uint64_t kib = 0;
    if (residentKiB(cluster.reducers[j]->pid(), &kib).isOk())
      std::printf("[load] reducer %zu: VmRSS %" PRIu64 " KiB\n", j, kib);
  }
  for (auto& r : cluster.reducers) {
    Status rs = r->stop();
    EXPECT_TRUE(rs.isOk()) << "reducers must survive the load: " << rs.toString();
  }
}

}  // namespace
}  // namespace tally::soak
