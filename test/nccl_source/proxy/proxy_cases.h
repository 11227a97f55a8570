// SPDX-License-Identifier: Apache-2.0
// What one forked rank of a proxy test does (proxy_cases.cc): opens a ProxyRank (NCCL's proxy over
// Tally), runs a list of collectives with inputs from tools/driver/reference.h, checks every
// output element against the reference, closes the rank the way NCCL tears down, and checks what
// the spy table saw. The test side of the proxy tests: C++20, Tally's headers, no NCCL type.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/store.h"
#include "test/nccl_source/proxy/proxy_rank.h"

namespace tally::nccl_source {

// One collective of a plan; buffers are made by the rank.
struct CaseCollective {
  ProxyColl coll = ProxyColl::kAllReduce;
  int dtype = 7;     // ncclDataType_t
  int op = 0;        // ncclRedOp_t, 4 = average
  size_t count = 0;  // all-reduce: elements; all-gather and reduce-scatter: per rank
  int chunk_bytes = 128 << 10;
  int channels = 1;
};

struct RankPlan {
  int nranks = 2;
  int channels = 1;       // connected
  std::string store_dir;  // a FileStore shared by the ranks
  uint64_t seed = 1;
  std::vector<CaseCollective> collectives;
  // Environment each rank sets before NCCL loads the plugin (beyond the functional tests' own).
  std::vector<std::pair<std::string, std::string>> env;
  // At least one collective must come back with a NULL request from Tally (and be retried).
  bool expect_null_requests = false;
  // Loss case: after the first collective each rank writes "running/<rank>"; the test then kills
  // reducers, and the rank repeats the plan's collectives until proxyProgress returns an error,
  // which it must within `loss_timeout_ms`.
  bool expect_progress_error = false;
  int64_t loss_timeout_ms = 60000;
  // Failover case: the same announcement, but every collective must stay exact through the loss.
  // Each rank goes on round after round; once the test has killed a reducer and written "killed",
  // rank 0 names the last round ("stop_after": three rounds on), and every rank stops after it,
  // so all issue the same calls.
  bool expect_failover = false;
  // How long one collective may take before the rank fails it.
  int64_t collective_timeout_ms = 60000;
};

// The all-gather NCCL's bootstrap runs, over a store shared by the ranks ("ag/<seq>/<rank>"),
// each wait bounded by kStoreTimeoutMs (60 s).
AllGatherFn storeAllGather(Store* store, int rank, int nranks);

// The body of rank `rank` (a forked process): 0 when every check passed; otherwise it printed
// "rank R: ..." lines to stderr.
int runRank(const RankPlan& plan, int rank, const std::string& reducer_list,
            const std::string& plugin_path);

}  // namespace tally::nccl_source
