// SPDX-License-Identifier: Apache-2.0
// The body of one forked rank of the proxy tests (proxy_cases.h).
//
// Every rank builds every rank's input itself from tools/driver/reference.h, so the expected
// output needs no exchange: all-reduce expects the reference reduction; average expects the sum
// divided by the rank count, as NCCL's kernel produces it (inputs pre-scaled by 1/nranks for
// floats, results divided for integers); all-gather expects every rank's input side by side;
// reduce-scatter expects this rank's part of the reduction of nranks x count elements.
#include "test/nccl_source/proxy/proxy_cases.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/store.h"
#include "common/types.h"
#include "tools/driver/reference.h"

namespace tally::nccl_source {
namespace {

constexpr int kNcclAvg = 4;
constexpr int kNcclSum = 0;
constexpr int kNcclInt32 = 2;
constexpr int kNcclInt64 = 4;
constexpr int kNcclFloat32 = 7;
constexpr int kNcclFloat64 = 8;
constexpr int kNcclRemoteError = 6;
constexpr int64_t kStoreTimeoutMs = 60000;

bool fail(int rank, const std::string& what) {
  fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
  return false;
}

const char* collName(ProxyColl c) {
  switch (c) {
    case ProxyColl::kAllReduce:
      return "all-reduce";
    case ProxyColl::kAllGather:
      return "all-gather";
    case ProxyColl::kReduceScatter:
      return "reduce-scatter";
  }
  return "?";
}

std::string describe(const CaseCollective& c) {
  return std::string(collName(c.coll)) + " type " + std::to_string(c.dtype) + " op " +
         std::to_string(c.op) + " count " + std::to_string(c.count) + " chunk " +
         std::to_string(c.chunk_bytes) + " channels " + std::to_string(c.channels);
}

// Entries in a /proc/self folder: open descriptors or threads.
int countEntries(const char* dir) {
  DIR* d = opendir(dir);
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.' ? 1 : 0;
  closedir(d);
  return n - (std::strcmp(dir, "/proc/self/fd") == 0 ? 1 : 0);  // opendir's own descriptor
}

// The average NCCL's kernel makes of a sum of `n` ranks' inputs: exact here, since the float
// inputs are integers and n is a power of two, and integer division truncates as SumPostDiv does.
template <typename T>
void doubleAll(size_t count, char* data) {
  for (size_t i = 0; i < count; i++) {
    T v;
    std::memcpy(&v, data + i * sizeof v, sizeof v);
    v = static_cast<T>(v * kPreMulSumScalar);
    std::memcpy(data + i * sizeof v, &v, sizeof v);
  }
}

// The sum of inputs the GPU multiplied by kPreMulSumScalar.
void scaleByPreMulSum(int dtype, size_t count, char* data) {
  if (dtype == kNcclFloat32) doubleAll<float>(count, data);
  if (dtype == kNcclFloat64) doubleAll<double>(count, data);
  if (dtype == kNcclInt32) doubleAll<int32_t>(count, data);
  if (dtype == kNcclInt64) doubleAll<int64_t>(count, data);
}

void divideByRanks(int dtype, int n, size_t count, char* data) {
  for (size_t i = 0; i < count; i++) {
    if (dtype == kNcclFloat32) {
      float v;
      std::memcpy(&v, data + i * sizeof v, sizeof v);
      v = static_cast<float>(static_cast<double>(v) / n);
      std::memcpy(data + i * sizeof v, &v, sizeof v);
    } else if (dtype == kNcclFloat64) {
      double v;
      std::memcpy(&v, data + i * sizeof v, sizeof v);
      v = v / n;
      std::memcpy(data + i * sizeof v, &v, sizeof v);
    } else if (dtype == kNcclInt32) {
      int32_t v;
      std::memcpy(&v, data + i * sizeof v, sizeof v);
      v = v / n;
      std::memcpy(data + i * sizeof v, &v, sizeof v);
    }
  }
}

// Input and expected output of one collective for `rank`.
struct Buffers {
  std::vector<char> in, out, expected;
  size_t out_count = 0;  // elements compared
  DataType type = DataType::kFloat32;
};

Buffers makeBuffers(const CaseCollective& c, const RankPlan& plan, uint64_t seed, int rank) {
  Buffers b;
  const int n = plan.nranks;
  const size_t elt = proxyTypeSize(c.dtype);
  b.type = static_cast<DataType>(c.dtype);
  const bool avg = c.op == kNcclAvg;
  const bool premul = c.op == kPreMulSumOp;
  const ReduceOp op = static_cast<ReduceOp>(avg || premul ? kNcclSum : c.op);
  switch (c.coll) {
    case ProxyColl::kAllReduce: {
      b.in.resize(c.count * elt);
      b.out.assign(c.count * elt, 0x5a);
      b.expected.resize(c.count * elt);
      driver::fillInput(b.type, op, rank, n, seed, c.count, b.in.data());
      driver::fillExpected(b.type, op, n, seed, c.count, b.expected.data());
      if (avg) divideByRanks(c.dtype, n, c.count, b.expected.data());
      if (premul) scaleByPreMulSum(c.dtype, c.count, b.expected.data());
      b.out_count = c.count;
      break;
    }
    case ProxyColl::kAllGather: {
      const size_t part = c.count * elt;
      b.in.resize(part);
      b.out.assign(part * n, 0x5a);
      b.expected.resize(part * n);
      for (int r = 0; r < n; r++) {
        driver::fillInput(b.type, op, r, n, seed, c.count, b.expected.data() + r * part);
      }
      std::memcpy(b.in.data(), b.expected.data() + rank * part, part);
      b.out_count = c.count * n;
      break;
    }
    case ProxyColl::kReduceScatter: {
      const size_t part = c.count * elt;
      b.in.resize(part * n);
      b.out.assign(part, 0x5a);
      std::vector<char> all(part * n);
      driver::fillInput(b.type, op, rank, n, seed, c.count * n, b.in.data());
      driver::fillExpected(b.type, op, n, seed, c.count * n, all.data());
      b.expected.assign(all.begin() + rank * part, all.begin() + (rank + 1) * part);
      if (avg) divideByRanks(c.dtype, n, c.count, b.expected.data());
      if (premul) scaleByPreMulSum(c.dtype, c.count, b.expected.data());
      b.out_count = c.count;
      break;
    }
  }
  return b;
}

ProxyCollective toProxy(const CaseCollective& c, Buffers* b) {
  return {c.coll, c.dtype, c.op, c.count, c.chunk_bytes, c.channels, b->in.data(), b->out.data()};
}

// Runs and checks one collective. False (with a message) on any failure; *rc gets the NCCL code.
bool runOne(ProxyRank* proxy, const CaseCollective& c, const RankPlan& plan, uint64_t seed,
            int rank, int* rc) {
  Buffers b = makeBuffers(c, plan, seed, rank);
  const ProxyResult r = proxy->run(toProxy(c, &b));
  *rc = r.nccl_rc;
  if (!r.ok()) return fail(rank, describe(c) + ": " + r.error);
  size_t first = 0;
  const size_t bad =
      driver::countMismatches(b.type, b.out.data(), b.expected.data(), b.out_count, &first);
  if (bad != 0) {
    return fail(rank, describe(c) + ": " + std::to_string(bad) + " wrong elements, first " +
                          driver::describeElement(b.type, b.out.data(), b.expected.data(), first));
  }
  if (c.coll != ProxyColl::kAllGather) {
    // What Tally was asked: the user's type, and average as a sum.
    const ProxyCalls calls = proxy->calls();
    const int want_op = c.op == kNcclAvg || c.op == kPreMulSumOp ? kNcclSum : c.op;
    if (calls.last_red_op != want_op || calls.last_dtype != c.dtype) {
      return fail(rank, describe(c) + ": Tally saw type " + std::to_string(calls.last_dtype) +
                            " op " + std::to_string(calls.last_red_op));
    }
  }
  return true;
}

bool checkTeardown(const ProxyCalls& calls, int channels, int rank) {
  bool ok = true;
  // Every channel's send and receive connector registers the shared buffer once.
  if (calls.reg_mr != 2 * channels || calls.dereg_mr != calls.reg_mr) {
    ok = fail(rank, "regMr " + std::to_string(calls.reg_mr) + " deregMr " +
                        std::to_string(calls.dereg_mr) + ", want " + std::to_string(2 * channels));
  }
  if (calls.close_coll != 1 || calls.live_mhandles_at_close != 0) {
    ok = fail(rank, "closeColl " + std::to_string(calls.close_coll) + " with " +
                        std::to_string(calls.live_mhandles_at_close) + " registrations live");
  }
  if (calls.connect != 1 || calls.listen != 1 || calls.close_listen != 1) {
    ok = fail(rank, "listen/connect/closeListen " + std::to_string(calls.listen) + "/" +
                        std::to_string(calls.connect) + "/" + std::to_string(calls.close_listen));
  }
  return ok;
}

// Threads and descriptors back to what they were before NCCL loaded the plugin (NCCL unloads it
// at the last finalize). Threads end asynchronously; give them a moment.
bool checkNoLeak(int fds_before, int threads_before, int rank) {
  int fds = -1, threads = -1;
  for (int i = 0; i < 200; i++) {
    fds = countEntries("/proc/self/fd");
    threads = countEntries("/proc/self/task");
    if (fds == fds_before && threads == threads_before) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return fail(rank, "after teardown " + std::to_string(fds) + " descriptors and " +
                        std::to_string(threads) + " threads, before " + std::to_string(fds_before) +
                        " and " + std::to_string(threads_before));
}

// Repeats the plan's collectives until a reducer loss comes back from NCCL's proxyProgress as
// ncclRemoteError, the code Tally gives a lost peer. Announces "running/<rank>" after the first
// round so that the test kills the reducers mid-run.
bool runUntilLoss(ProxyRank* proxy, const RankPlan& plan, Store* store, int rank) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(plan.loss_timeout_ms);
  uint64_t seed = plan.seed;
  bool announced = false;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const CaseCollective& c : plan.collectives) {
      Buffers b = makeBuffers(c, plan, seed++, rank);
      const ProxyResult r = proxy->run(toProxy(c, &b));
      if (r.nccl_rc != 0) {
        fprintf(stderr, "rank %d: after the loss: %s\n", rank, r.error.c_str());
        if (r.error.find("ProxyProgress returned") == std::string::npos) {
          return fail(rank, "error not from proxyProgress: " + r.error);
        }
        if (r.nccl_rc != kNcclRemoteError) {
          return fail(rank, "proxyProgress returned " + std::to_string(r.nccl_rc));
        }
        return true;
      }
      if (!r.ok()) return fail(rank, r.error);
    }
    if (!announced) announced = store->set("running/" + std::to_string(rank), "1").isOk();
  }
  return fail(rank, "no error reached proxyProgress after the reducers were killed");
}

// The failover case (RankPlan::expect_failover): a lost reducer costs no collective, with NCCL's
// own proxy posting and testing.
bool runThroughLoss(ProxyRank* proxy, const RankPlan& plan, Store* store, int rank) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(plan.loss_timeout_ms);
  uint64_t seed = plan.seed;
  int64_t stop_after = -1;
  for (int64_t round = 0; stop_after < 0 || round <= stop_after; ++round) {
    if (std::chrono::steady_clock::now() > deadline) {
      return fail(rank, "no reducer was lost in time (round " + std::to_string(round) + ")");
    }
    for (const CaseCollective& c : plan.collectives) {
      int rc = 0;
      if (!runOne(proxy, c, plan, seed++, rank, &rc)) return false;
    }
    if (round == 0 && !store->set("running/" + std::to_string(rank), "1").isOk()) {
      return fail(rank, "store");
    }
    if (stop_after >= 0) continue;
    if (rank == 0 && store->check("killed")) {
      stop_after = round + 3;
      if (!store->set("stop_after", std::to_string(stop_after)).isOk()) return fail(rank, "store");
    } else if (rank != 0 && store->check("stop_after")) {
      std::string value;
      if (!store->get("stop_after", &value, kStoreTimeoutMs).isOk()) return fail(rank, "store");
      stop_after = std::stoll(value);
    }
  }
  fprintf(stderr, "rank %d: %lld rounds, exact through the loss\n", rank,
          static_cast<long long>(stop_after + 1));
  return true;
}

}  // namespace

// The all-gather NCCL's bootstrap runs, over the store: "ag/<seq>/<rank>".
AllGatherFn storeAllGather(Store* store, int rank, int nranks) {
  auto seq = std::make_shared<int>(0);
  return [store, rank, nranks, seq](const void* mine, size_t bytes, void* all) -> std::string {
    const std::string prefix = "ag/" + std::to_string((*seq)++) + "/";
    Status s = store->set(prefix + std::to_string(rank),
                          std::string_view(static_cast<const char*>(mine), bytes));
    if (!s.isOk()) return s.toString();
    for (int r = 0; r < nranks; r++) {
      std::string value;
      s = store->get(prefix + std::to_string(r), &value, kStoreTimeoutMs);
      if (!s.isOk()) return s.toString();
      if (value.size() != bytes) return "all-gather: wrong size from rank " + std::to_string(r);
      std::memcpy(static_cast<char*>(all) + r * bytes, value.data(), bytes);
    }
    return "";
  };
}

int runRank(const RankPlan& plan, int rank, const std::string& reducer_list,
            const std::string& plugin_path) {
  ::setenv("NCCL_NET_PLUGIN", plugin_path.c_str(), 1);
  ::setenv("TALLY_REDUCERS", reducer_list.c_str(), 1);
  ::setenv("TALLY_SOCKET_IFNAME", "lo", 1);
  ::setenv("TALLY_CONNECT_TIMEOUT_MS", "20000", 1);
  ::setenv("TALLY_TIMEOUT_MS", "30000", 1);
  for (const auto& [name, value] : plan.env) ::setenv(name.c_str(), value.c_str(), 1);

  std::unique_ptr<Store> store;
  if (!createFileStore(plan.store_dir, &store).isOk()) return fail(rank, "file store"), 1;
  const int fds_before = countEntries("/proc/self/fd");
  const int threads_before = countEntries("/proc/self/task");

  ProxyRankOptions options;
  options.rank = rank;
  options.nranks = plan.nranks;
  options.channels = plan.channels;
  options.comm_hash = 0x7a11790000000000ull ^ plan.seed;
  options.all_gather = storeAllGather(store.get(), rank, plan.nranks);
  options.timeout_ms = plan.collective_timeout_ms;
  std::unique_ptr<ProxyRank> proxy;
  const ProxyResult opened = ProxyRank::open(options, &proxy);
  if (!opened.ok()) return fail(rank, "open: " + opened.error), 1;

  bool ok;
  if (plan.expect_progress_error) {
    ok = runUntilLoss(proxy.get(), plan, store.get(), rank);
  } else if (plan.expect_failover) {
    ok = runThroughLoss(proxy.get(), plan, store.get(), rank);
  } else {
    ok = true;
    uint64_t seed = plan.seed;
    for (const CaseCollective& c : plan.collectives) {
      int rc = 0;
      ok = runOne(proxy.get(), c, plan, seed++, rank, &rc) && ok;
      if (rc != 0) break;
    }
  }

  const ProxyCalls calls = proxy->calls();
  if (plan.expect_null_requests) {
    fprintf(stderr, "rank %d: %d NULL requests in %d calls, %d tests\n", rank, calls.null_requests,
            calls.calls, calls.tests);
  }
  if (plan.expect_null_requests && calls.null_requests == 0) {
    ok = fail(rank, "no NULL request in " + std::to_string(calls.calls) + " calls");
  }
  if (!plan.expect_progress_error && !calls.first_error.empty()) {
    ok = fail(rank, "Tally returned an error: " + calls.first_error);
  }
  const ProxyResult closed = proxy->close();
  // After a lost reducer the teardown must still release everything NCCL holds.
  if (!closed.ok()) ok = fail(rank, "teardown: " + closed.error);
  ok = checkTeardown(proxy->calls(), plan.channels, rank) && ok;
  const std::string warnings = proxy->warnings();
  if (plan.expect_failover) {
    // The failover's warning: the loss, and that the calls go on without that reducer.
    if (warnings.find("lost") == std::string::npos ||
        warnings.find("continues on 1 of 2 reducers") == std::string::npos) {
      ok = fail(rank, "expected a warning of the loss, got:\n" + warnings);
    }
  } else if (!plan.expect_progress_error && !warnings.empty()) {
    ok = fail(rank, "NCCL warnings:\n" + warnings);
  }
  proxy.reset();
  // NCCL unloads the plugin at the last finalize from 2.26 on; before, it stays loaded.
  if (proxyNcclVersionCode() >= 22600) ok = checkNoLeak(fds_before, threads_before, rank) && ok;
  return ok ? 0 : 1;
}

}  // namespace tally::nccl_source
