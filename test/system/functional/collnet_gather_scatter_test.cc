// SPDX-License-Identifier: Apache-2.0
// CollNet all-gather and reduce-scatter through the built plugin's tables, across processes:
// forked workers drive the iallgather / ireducescatter slots the way NCCL's CollNetDirect proxy
// does (tools/driver/coll_driver.h: windows over the global vector, staged through the shared
// region, one scatter-gather part) against tally-reducer processes. Every table version that has
// the slots runs, and v11 also as NCCL 2.30's adapter sees it (slots wrapped, never NULL).
// Results are checked against the driver's independent reference; every worker's reduce-scatter
// part and all-gather vector must be exact.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "common/store.h"
#include "test/support/cluster.h"
#include "tools/driver/coll_driver.h"
#include "tools/driver/reference.h"

namespace tally::functional {
namespace {

using driver::CollComm;
using driver::CollCommOptions;

struct TableCase {
  int version;
  driver::CallingNccl nccl;
};

std::string tableName(const ::testing::TestParamInfo<TableCase>& p) {
  return "v" + std::to_string(p.param.version) +
         (p.param.nccl == driver::CallingNccl::k230 ? "_as_nccl_2_30" : "");
}

class CollNetGatherScatter : public ::testing::TestWithParam<TableCase> {
 protected:
  bool haveBinaries() { return !pluginPath().empty() && !reducerPath().empty(); }
  void SetUp() override {
    if (!haveBinaries()) GTEST_SKIP() << "plugin or tally-reducer was not built";
    Status s = startCluster(2, &cluster_);
    ASSERT_TRUE(s.isOk()) << s.toString();
  }
  void TearDown() override {
    for (auto& r : cluster_.reducers) {
      Status s = r->stop();
      EXPECT_TRUE(s.isOk()) << s.toString();
    }
  }
  // Opens the table this case names in a worker, or returns false.
  bool open(std::unique_ptr<driver::PluginLibrary>* lib, std::unique_ptr<driver::CollNetApi>* api) {
    if (!check(-1, driver::PluginLibrary::open(pluginPath(), lib), "dlopen")) return false;
    return check(-1, (*lib)->collNet(GetParam().version, api, GetParam().nccl), "collnet table");
  }
  Cluster cluster_;
};

// Checks `got` (count elements) against `want`; prints the first difference.
bool exact(int rank, const char* what, DataType type, const void* got, const void* want,
           size_t count) {
  size_t first = 0;
  const size_t wrong = driver::countMismatches(type, got, want, count, &first);
  if (wrong == 0) return true;
  std::fprintf(stderr, "worker %d: %s: %zu wrong, first %s\n", rank, what, wrong,
               driver::describeElement(type, got, want, first).c_str());
  return false;
}

// Every type and op of reduce-scatter, odd counts, windows that span parts; then all-gathers of
// odd sizes; then the three kinds one after another on the same communicator.
TEST_P(CollNetGatherScatter, EveryTypeAndOpExactOnEveryWorker) {
  const int nworkers = 3;
  Store* store = cluster_.store.get();
  std::string why = runAll(nworkers, [&](int rank) -> int {
    setWorkerEnvironment(cluster_.reducer_list);
    std::unique_ptr<driver::PluginLibrary> lib;
    std::unique_ptr<driver::CollNetApi> api;
    if (!open(&lib, &api)) return 2;
    if (!api->hasAllGather() || !api->hasReduceScatter()) {
      std::fprintf(stderr, "worker %d: the table has no all-gather or reduce-scatter slot\n", rank);
      return 3;
    }
    CollCommOptions options;
    options.call_bytes = 24 * 1024;  // windows of 24 KiB: many per call, spanning parts
    std::unique_ptr<CollComm> comm;
    if (!check(rank, CollComm::create(api.get(), store, "gs", rank, nworkers, options, &comm),
               "setup"))
      return 4;
    for (int t = 0; t < kNumDataTypes; ++t) {
      for (int o = 0; o < kNumReduceOps; ++o) {
        const auto type = static_cast<DataType>(t);
        const auto op = static_cast<ReduceOp>(o);
        if (!comm->supported(type, op)) {
          std::fprintf(stderr, "worker %d: reduceSupport says no to %s %s\n", rank,
                       dataTypeName(type), reduceOpName(op));
          return 5;
        }
        // A big count for one op of each type keeps the suite short on two cores.
        const bool big = o == t % kNumReduceOps;
        for (size_t count : {size_t{1}, size_t{4097}, big ? size_t{20011} : size_t{0}}) {
          if (count == 0) continue;
          const size_t elt = dataTypeSize(type);
          const size_t total = count * nworkers;
          const uint64_t seed = 300 + t * 10 + o;
          std::vector<char> in(total * elt), out(count * elt), all(total * elt);
          driver::fillInput(type, op, rank, nworkers, seed, total, in.data());
          driver::fillExpected(type, op, nworkers, seed, total, all.data());
          const std::string what = std::string("reduce-scatter ") + dataTypeName(type) + " " +
                                   reduceOpName(op) + " " + std::to_string(count);
          if (!check(rank, comm->reducescatter(in.data(), out.data(), count, type, op), what)) {
            return 6;
          }
          if (!exact(rank, what.c_str(), type, out.data(), all.data() + rank * count * elt,
                     count)) {
            return 7;
          }
        }
      }
    }
    for (size_t bytes : {size_t{1}, size_t{13}, size_t{24 * 1024}, size_t{100003}}) {
      std::vector<char> in(bytes), out(bytes * nworkers), want(bytes * nworkers);
      for (int r = 0; r < nworkers; ++r) {
        driver::fillInput(DataType::kUint8, ReduceOp::kSum, r, nworkers, 11, bytes,
                          want.data() + r * bytes);
      }
      driver::fillInput(DataType::kUint8, ReduceOp::kSum, rank, nworkers, 11, bytes, in.data());
      const std::string what = "all-gather of " + std::to_string(bytes) + " bytes per rank";
      if (!check(rank, comm->allgather(in.data(), out.data(), bytes), what)) return 8;
      if (!exact(rank, what.c_str(), DataType::kUint8, out.data(), want.data(), out.size())) {
        return 9;
      }
    }
    // Interleaved with all-reduce on the same collComm.
    for (int round = 0; round < 2; ++round) {
      const size_t count = 5003;
      std::vector<char> in(count * 4), out(count * 4), want(count * 4);
      driver::fillInput(DataType::kFloat32, ReduceOp::kSum, rank, nworkers, 1, count, in.data());
      driver::fillExpected(DataType::kFloat32, ReduceOp::kSum, nworkers, 1, count, want.data());
      if (!check(rank,
                 comm->allreduce(in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum),
                 "allreduce") ||
          !exact(rank, "allreduce", DataType::kFloat32, out.data(), want.data(), count)) {
        return 10;
      }
      std::vector<char> ag(count * nworkers);
      if (!check(rank, comm->allgather(in.data(), ag.data(), count), "allgather")) return 10;
    }
    return check(rank, comm->close(), "close") ? 0 : 11;
  });
  EXPECT_EQ(why, "");
}

INSTANTIATE_TEST_SUITE_P(Tables, CollNetGatherScatter,
                         ::testing::Values(TableCase{8, driver::CallingNccl::k228},
                                           TableCase{11, driver::CallingNccl::k228},
                                           TableCase{11, driver::CallingNccl::k230},
                                           TableCase{12, driver::CallingNccl::k230}),
                         tableName);

}  // namespace
}  // namespace tally::functional
