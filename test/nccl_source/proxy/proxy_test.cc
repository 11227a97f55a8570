// SPDX-License-Identifier: Apache-2.0
// NCCL's own CollNet proxy (coll_net.cc of the NCCL version this executable was built from, with
// NCCL's plugin loader) driving Tally with real tally-reducer processes: ranks are forked
// processes, each one node with one GPU whose kernel is played by CPU threads (gpu_side.cc);
// outputs are compared element by element with tools/driver/reference.h.
//
// Covered: CollNetChain all-reduce on 1, 2 and 4 channels (8 and 12 in the request-slot cases);
// its chunk sizes, 32 KiB to 256 KiB; CollNetDirect all-gather and reduce-scatter with chunks up
// to 512 KiB; every type NCCL has (12, float8 included; 10 before NCCL 2.24) x sum, prod, max,
// min; average arriving at Tally as a sum; odd element counts; NULL requests from Tally and
// NCCL's retry; a reducer loss past TALLY_MIN_REDUCERS reaching NCCL's proxyProgress as an
// error. Every case ends with NCCL's teardown (proxyFree: deregMr before closeColl) and checks
// that nothing is left: registrations, pinned buffers, and, where NCCL unloads the plugin, the
// plugin's threads and descriptors.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "test/nccl_source/proxy/proxy_cases.h"
#include "test/support/cluster.h"

namespace tally::nccl_source {
namespace {

constexpr int64_t kRankTimeoutMs = 120000;

class CollNetProxy : public ::testing::Test {
 protected:
  void SetUp() override {
    if (functional::pluginPath().empty() || functional::reducerPath().empty()) {
      GTEST_SKIP() << "the build has no plugin or reducer target";
    }
    ASSERT_EQ(proxyNcclVersionCode(), TALLY_NCCL_PROXY_CODE);
  }

  // Starts `nreducers` reducers and runs `plan` on plan.nranks forked ranks. `tick`, when set,
  // runs in this process about every 100 ms while the ranks run.
  void runPlan(RankPlan plan, int nreducers = 2,
               std::function<void(functional::Cluster&)> tick = {}) {
    functional::Cluster cluster;
    ASSERT_TRUE(functional::startCluster(nreducers, &cluster).isOk());
    plan.store_dir = cluster.dir->path();
    const std::string reducers = cluster.reducer_list;
    const std::string plugin = functional::pluginPath();
    driver::WorkerHooks hooks;
    hooks.failure_grace_ms = 20000;
    if (tick) hooks.tick = [&] { tick(cluster); };
    std::vector<driver::WorkerExit> exits;
    const Status s = driver::runWorkers(
        plan.nranks, [&](int rank) { return runRank(plan, rank, reducers, plugin); },
        kRankTimeoutMs, &exits, hooks);
    ASSERT_TRUE(s.isOk()) << s.toString();
    std::string why;
    EXPECT_TRUE(driver::allWorkersOk(exits, &why)) << why;
  }
};

CaseCollective allReduce(int dtype, int op, size_t count, int chunk, int channels) {
  return {ProxyColl::kAllReduce, dtype, op, count, chunk, channels};
}

constexpr int kFloat32 = 7;

TEST_F(CollNetProxy, AllReduceOneTwoFourChannels) {
  for (int channels : {1, 2, 4}) {
    SCOPED_TRACE("channels " + std::to_string(channels));
    RankPlan plan;
    plan.nranks = 2;
    plan.channels = channels;
    plan.seed = 10 + channels;
    // 1.5 MiB of float and an odd tail, and a collective on fewer channels than connected.
    plan.collectives = {allReduce(kFloat32, 0, (3 << 18) + 7, 128 << 10, channels),
                        allReduce(kFloat32, 0, 100003, 64 << 10, 1)};
    runPlan(plan);
  }
}

TEST_F(CollNetProxy, AllReduceChunkSizes) {
  RankPlan plan;
  plan.nranks = 2;
  plan.channels = 2;
  plan.seed = 20;
  // The Chain's chunks: 256 KiB halved down to 32 KiB for small messages.
  for (int chunk : {32 << 10, 64 << 10, 128 << 10, 256 << 10}) {
    plan.collectives.push_back(allReduce(kFloat32, 0, 500001, chunk, 2));
  }
  runPlan(plan);
}

TEST_F(CollNetProxy, AllReduceEveryTypeAndOp) {
  RankPlan plan;
  plan.nranks = 3;
  plan.channels = 2;
  plan.seed = 30;
  // float8 (types 10 and 11) from NCCL 2.24 on.
  if (TALLY_NCCL_PROXY_CODE >= 22400) {
    ASSERT_EQ(proxyNumTypes(), 12);
  }
  for (int dtype = 0; dtype < proxyNumTypes(); dtype++) {
    for (int op = 0; op < 4; op++)
      plan.collectives.push_back(allReduce(dtype, op, 40009, 32 << 10, 2));
  }
  runPlan(plan);
}

TEST_F(CollNetProxy, AverageArrivesAsSum) {
  RankPlan plan;
  plan.nranks = 4;
  plan.channels = 2;
  plan.seed = 40;
  for (int dtype : {2, 7, 8}) plan.collectives.push_back(allReduce(dtype, 4, 70001, 64 << 10, 2));
  // Reduce-scatter's average goes out as a sum too.
  plan.collectives.push_back({ProxyColl::kReduceScatter, kFloat32, 4, 30001, 128 << 10, 2});
  runPlan(plan);
}

// A user-created PreMulSum op: the GPU multiplies, the network sums.
TEST_F(CollNetProxy, PreMulSumArrivesAsSum) {
  RankPlan plan;
  plan.nranks = 3;
  plan.channels = 2;
  plan.seed = 45;
  for (int dtype : {2, 4, 7, 8}) {
    plan.collectives.push_back(allReduce(dtype, kPreMulSumOp, 50021, 64 << 10, 2));
  }
  plan.collectives.push_back(
      {ProxyColl::kReduceScatter, kFloat32, kPreMulSumOp, 20011, 128 << 10, 2});
  runPlan(plan);
}

TEST_F(CollNetProxy, OddCounts) {
  RankPlan plan;
  plan.nranks = 3;
  plan.channels = 4;
  plan.seed = 50;
  for (size_t count : {size_t{1}, size_t{3}, size_t{1021}, size_t{65537}, size_t{262147}}) {
    plan.collectives.push_back(allReduce(kFloat32, 0, count, 32 << 10, 4));
    plan.collectives.push_back(allReduce(0, 2, count, 32 << 10, 4));  // int8 max
    plan.collectives.push_back(allReduce(6, 0, count, 32 << 10, 4));  // float16 sum
  }
  runPlan(plan);
}

// NULL requests and NCCL's retry. NCCL's CollNet send proxy keeps up to NCCL_STEPS (8) calls in
// flight per group of 8 channels and retries a NULL post before it tests the requests it holds.
// TALLY_COLL_MAX_REQUESTS bounds the calls in flight, which leave the count as they complete,
// tested or not, and the plugin keeps a request for every one NCCL can hold untested: a retry
// never waits on a test.
//
// With two channel groups, a group whose post came back NULL waits for the other group to post
// the same step (NCCL orders the groups).
TEST_F(CollNetProxy, NullRequestsAreRetriedWithTwoChannelGroups) {
  RankPlan plan;
  plan.nranks = 2;
  plan.channels = 12;
  plan.seed = 60;
  plan.env = {{"TALLY_COLL_MAX_REQUESTS", "4"}};
  plan.expect_null_requests = true;
  plan.collectives = {allReduce(kFloat32, 0, (1 << 20) + 3, 32 << 10, 12),
                      allReduce(8, 1, 131073, 32 << 10, 12)};
  runPlan(plan);
}

// One group (up to 8 channels) and fewer calls in flight than NCCL keeps: every retry is made
// while NCCL tests nothing, and succeeds once a call completes.
TEST_F(CollNetProxy, NullRequestsAreRetriedInOneChannelGroup) {
  RankPlan plan;
  plan.nranks = 2;
  plan.channels = 4;
  plan.seed = 61;
  plan.env = {{"TALLY_COLL_MAX_REQUESTS", "2"}};
  plan.expect_null_requests = true;
  plan.collective_timeout_ms = 30000;
  plan.collectives = {allReduce(kFloat32, 0, (1 << 20) + 3, 64 << 10, 4),
                      allReduce(8, 2, 65537, 32 << 10, 4)};
  runPlan(plan);
}

// Eight slots are enough for one group: NCCL never has more in flight.
TEST_F(CollNetProxy, EightSlotsSufficeForOneChannelGroup) {
  RankPlan plan;
  plan.nranks = 2;
  plan.channels = 8;
  plan.seed = 62;
  plan.env = {{"TALLY_COLL_MAX_REQUESTS", "8"}};
  plan.collectives = {allReduce(kFloat32, 0, (1 << 20) + 3, 32 << 10, 8)};
  runPlan(plan);
}

TEST_F(CollNetProxy, AllGather) {
  RankPlan plan;
  plan.nranks = 3;
  plan.channels = 2;
  plan.seed = 70;
  // NCCL runs all-gather on bytes (count x type size of int8); windows cross the ranks' parts.
  for (int chunk : {32 << 10, 128 << 10, 512 << 10}) {
    plan.collectives.push_back({ProxyColl::kAllGather, 0, 0, 300007, chunk, 2});
  }
  plan.collectives.push_back({ProxyColl::kAllGather, 0, 0, 5, 32 << 10, 1});
  runPlan(plan);
}

TEST_F(CollNetProxy, ReduceScatter) {
  RankPlan plan;
  plan.nranks = 3;
  plan.channels = 2;
  plan.seed = 80;
  for (int dtype = 0; dtype < proxyNumTypes(); dtype++) {
    plan.collectives.push_back({ProxyColl::kReduceScatter, dtype, dtype % 4, 10007, 32 << 10, 2});
  }
  plan.collectives.push_back({ProxyColl::kReduceScatter, kFloat32, 0, 200003, 512 << 10, 2});
  runPlan(plan);
}

// TALLY_MIN_REDUCERS=2 with two reducers: killing one mid-run must fail the communicator, and
// NCCL's proxyProgress must return the error (after which teardown still releases everything).
TEST_F(CollNetProxy, ReducerLossReachesProxyProgress) {
  RankPlan plan;
  plan.nranks = 2;
  plan.channels = 2;
  plan.seed = 90;
  plan.env = {{"TALLY_MIN_REDUCERS", "2"}, {"TALLY_REDUCER_TIMEOUT_MS", "2000"}};
  plan.expect_progress_error = true;
  plan.collectives = {allReduce(kFloat32, 0, 1 << 18, 64 << 10, 2)};
  bool killed = false;
  runPlan(plan, 2, [&](functional::Cluster& cluster) {
    if (killed) return;
    std::unique_ptr<Store> store;
    if (!createFileStore(cluster.dir->path(), &store).isOk()) return;
    for (int r = 0; r < plan.nranks; r++) {
      if (!store->check("running/" + std::to_string(r))) return;
    }
    cluster.reducers[1]->kill();
    killed = true;
  });
  EXPECT_TRUE(killed);
}

// TALLY_MIN_REDUCERS=1 with two reducers: killing one mid-run costs no collective. NCCL's proxy
// keeps posting (the client holds new calls while the ranks agree on the loss, answering NULL)
// and testing, and every result stays exact (docs/failover.md).
TEST_F(CollNetProxy, LostReducerCostsNoCollective) {
  RankPlan plan;
  plan.nranks = 2;
  plan.channels = 2;
  plan.seed = 95;
  plan.env = {{"TALLY_MIN_REDUCERS", "1"}, {"TALLY_REDUCER_TIMEOUT_MS", "2000"}};
  plan.expect_failover = true;
  plan.collectives = {allReduce(kFloat32, 0, 1 << 18, 64 << 10, 2),
                      {ProxyColl::kReduceScatter, kFloat32, 0, 40009, 128 << 10, 2}};
  bool killed = false;
  runPlan(plan, 2, [&](functional::Cluster& cluster) {
    if (killed) return;
    std::unique_ptr<Store> store;
    if (!createFileStore(cluster.dir->path(), &store).isOk()) return;
    for (int r = 0; r < plan.nranks; r++) {
      if (!store->check("running/" + std::to_string(r))) return;
    }
    cluster.reducers[1]->kill();
    killed = store->set("killed", "1").isOk();
  });
  EXPECT_TRUE(killed);
}

}  // namespace
}  // namespace tally::nccl_source
