// SPDX-License-Identifier: Apache-2.0
// One worker of `tally bench`. This process stands in for the rank of an NCCL job: like such a
// job it configures the plugin through the environment before loading it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "common/sizes.h"
#include "common/store.h"
#include "tools/bench/bench_internal.h"
#include "tools/bench/checked_calls.h"
#include "tools/bench/cpu_cost.h"
#include "tools/bench/link_rate.h"
#include "tools/driver/coll_driver.h"
#include "tools/driver/plugin_library.h"
#include "tools/driver/reference.h"
#include "tools/driver/ring_allreduce.h"

namespace tally::bench {
namespace {

using Clock = std::chrono::steady_clock;
using driver::CollComm;
using driver::RingComm;

struct Ctx {
  const BenchOptions& options;
  Store* store;
  int rank;
  const char* name;                        // for messages
  const std::vector<pid_t>* reducer_pids;  // the reducers whose CPU rank 0 reads
};

// The reducers' CPU seconds together; -1 when one cannot be read.
double reducersCpuSeconds(const std::vector<pid_t>& pids) {
  double total = 0;
  for (pid_t pid : pids) {
    const double s = processCpuSeconds(pid);
    if (s < 0) return -1;
    total += s;
  }
  return total;
}

bool report(const Ctx& c, const Status& s, const char* what) {
  if (s.isOk()) return true;
  std::fprintf(stderr, "%s: worker %d: %s: %s\n", c.name, c.rank, what, s.toString().c_str());
  return false;
}

// Runs warm-up and timed iterations of one algorithm at one size. Asked to check, it checks
// every warm-up call's result and the last timed call's (checkedCall). Writes the result key:
// "<mean us> <wrong or -1> <cpu s> <reducer cpu s or -1>", where
// cpu s is this process's CPU over the timed calls (checks excluded) and, for the reduction
// server on rank 0, reducer cpu s is the reducers' CPU from the barrier before the timed calls to
// a barrier after them (the reducers serve every rank, so the window closes once all are done).
// `algo` names the row; `runs` is the algorithm that runs (they differ for auto).
template <typename AllReduce>
Status measure(const Ctx& c, Algo algo, Algo runs, DataType type, ReduceOp op, uint64_t bytes,
               const std::vector<char>& input, const std::vector<char>& expected,
               std::vector<char>* out, AllReduce&& allreduce) {
  const BenchOptions& o = c.options;
  const size_t count = input.size() / dataTypeSize(type);
  int64_t wrong = 0;
  double total_us = 0;
  double cpu_s = 0;
  const bool reducer_window = runs == Algo::kServer && !c.reducer_pids->empty();
  double reducer_start = -1;
  const std::string tag = resultKey(algo, type, op, bytes, -1);
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    if (i == o.warmup) {
      TALLY_RETURN_IF_ERROR(
          storeBarrier(c.store, "barrier/" + tag, c.rank, o.workers, kStoreTimeoutMs));
      if (reducer_window && c.rank == 0) reducer_start = reducersCpuSeconds(*c.reducer_pids);
    }
    const double cpu0 = processCpuSeconds();
    auto t0 = Clock::now();
    TALLY_RETURN_IF_ERROR(allreduce(input.data(), out->data(), count));
    auto t1 = Clock::now();
    const double cpu1 = processCpuSeconds();
    if (i >= o.warmup) {
      total_us += std::chrono::duration<double, std::micro>(t1 - t0).count();
      cpu_s = cpu_s < 0 || cpu0 < 0 || cpu1 < 0 ? -1 : cpu_s + (cpu1 - cpu0);
    }
    if (!o.check || !checkedCall(i, o.warmup, o.iters)) continue;
    if (c.rank == o.corrupt_rank) (*out)[0] = static_cast<char>((*out)[0] ^ 1);
    size_t first_bad = 0;
    size_t bad = driver::countMismatches(type, out->data(), expected.data(), count, &first_bad);
    if (bad != 0 && wrong == 0) {
      std::fprintf(stderr, "%s: worker %d: %s %s %s %llu bytes: %zu wrong, first %s\n", c.name,
                   c.rank, algoName(algo), typeLabel(type), reduceOpName(op),
                   static_cast<unsigned long long>(bytes), bad,
                   driver::describeElement(type, out->data(), expected.data(), first_bad).c_str());
    }
    wrong += static_cast<int64_t>(bad);
  }
  double reducer_cpu_s = -1;
  if (reducer_window) {
    TALLY_RETURN_IF_ERROR(
        storeBarrier(c.store, "barrier/end/" + tag, c.rank, o.workers, kStoreTimeoutMs));
    if (c.rank == 0) {
      const double end = reducersCpuSeconds(*c.reducer_pids);
      if (reducer_start >= 0 && end >= 0) reducer_cpu_s = end - reducer_start;
    }
  }
  char value[128];
  std::snprintf(value, sizeof(value), "%.3f %lld %.9f %.9f", total_us / o.iters,
                static_cast<long long>(o.check ? wrong : -1), cpu_s, reducer_cpu_s);
  return c.store->set(resultKey(algo, type, op, bytes, c.rank), value);
}

}  // namespace

bool reportWorker(const BenchOptions& o, int rank, const Status& s, const char* what) {
  if (s.isOk()) return true;
  std::fprintf(stderr, "%s: worker %d: %s: %s\n", o.command_name.c_str(), rank, what,
               s.toString().c_str());
  return false;
}

int openWorker(const WorkerPlan& plan, int rank, bool server, bool ring, WorkerSession* w) {
  const BenchOptions& o = *plan.options;
  if (plan.node != nullptr &&
      !reportWorker(o, rank, driver::EmulatedCluster::enter(*plan.node), "enter node")) {
    return 2;
  }
  if (!reportWorker(o, rank, createFileStore(plan.store_dir, &w->store), "store")) return 2;

  // An NCCL job's environment: the reducers, the interface, and bounded waits.
  if (!plan.reducer_list.empty()) ::setenv("TALLY_REDUCERS", plan.reducer_list.c_str(), 1);
  ::setenv("TALLY_SOCKET_IFNAME", plan.ifname.c_str(), 1);
  ::setenv("TALLY_CONNECT_TIMEOUT_MS", "30s", 0);
  // A node's eth0 is a veth, which reports 10 Gbit/s whatever its qdisc lets through; a real NIC
  // of the emulated rate would report that rate (a value the caller set wins).
  if (plan.node != nullptr)
    ::setenv("TALLY_LINK_MBPS", std::to_string(rateMbps(o.emulate)).c_str(), 0);
  if (o.verbose) driver::setPluginLogLevel(NCCL_LOG_INFO);

  if (!reportWorker(o, rank, driver::PluginLibrary::open(o.plugin, &w->lib), "load plugin"))
    return 2;
  const int nranks = o.workers;
  if (server) {
    if (!reportWorker(o, rank, w->lib->collNet(plan.version, &w->coll_api), "collnet table"))
      return 2;
    driver::CollCommOptions coll_options;
    coll_options.timeout_ms = kCommTimeoutMs;
    // The region's slots hold the largest call of any size run.
    coll_options.call_bytes = 0;
    for (uint64_t bytes : o.sizes) {
      coll_options.call_bytes = std::max<size_t>(coll_options.call_bytes, callBytes(o, bytes));
    }
    Status s = CollComm::create(w->coll_api.get(), w->store.get(), "coll", rank, nranks,
                                coll_options, &w->coll);
    if (!reportWorker(o, rank, s, "collnet setup")) return 3;
  }
  if (ring) {
    if (!reportWorker(o, rank, w->lib->net(plan.version, &w->net_api), "net table")) return 2;
    driver::RingOptions ring_options;
    ring_options.net.timeout_ms = kCommTimeoutMs;
    Status s = RingComm::create(w->net_api.get(), w->store.get(), "ring", rank, nranks,
                                ring_options, &w->ring);
    if (!reportWorker(o, rank, s, "ring setup")) return 3;
  }
  return 0;
}

int closeWorker(const WorkerPlan& plan, int rank, WorkerSession* w) {
  const BenchOptions& o = *plan.options;
  // Every worker finishes before any closes: a comm closed while a peer still reads from it is a
  // teardown race this benchmark has no reason to provoke (the functional tests do).
  Status s = storeBarrier(w->store.get(), "barrier/close", rank, o.workers, kStoreTimeoutMs);
  if (!reportWorker(o, rank, s, "final barrier")) return 5;
  bool ok = true;
  if (w->coll) ok = reportWorker(o, rank, w->coll->close(), "collnet close") && ok;
  if (w->ring) ok = reportWorker(o, rank, w->ring->close(), "ring close") && ok;
  return ok ? 0 : 5;
}

int runBenchWorker(const WorkerPlan& plan, int rank) {
  const BenchOptions& o = *plan.options;
  bool want_server = false, want_ring = false;
  for (Algo a : o.algos) {
    want_server |= a == Algo::kServer || a == Algo::kAuto;
    want_ring |= a == Algo::kRing || a == Algo::kAuto;
  }
  const bool want_auto = std::find(o.algos.begin(), o.algos.end(), Algo::kAuto) != o.algos.end();
  WorkerSession w;
  if (int code = openWorker(plan, rank, want_server, want_ring, &w); code != 0) return code;
  Store* store = w.store.get();
  CollComm* coll = w.coll.get();
  RingComm* ring = w.ring.get();
  Ctx c{o, store, rank, o.command_name.c_str(), &plan.reducer_pids};
  const int nranks = o.workers;
  Status s;

  const uint64_t seed = kInputSeed;
  for (DataType type : o.types) {
    for (ReduceOp op : o.ops) {
      const bool server = coll && coll->supported(type, op);
      if (coll && !server && rank == 0) (void)store->set(skipKey(Algo::kServer, type, op), "");
      const std::vector<uint64_t> sizes = typeSizes(o, type);
      const size_t nsizes = sizes.size();
      for (size_t si = 0; si < nsizes; ++si) {
        const size_t esize = dataTypeSize(type);
        const uint64_t bytes = sizes[si];
        const uint64_t count = bytes / esize;
        std::vector<char> input(bytes), expected(bytes), out(bytes);
        driver::fillInput(type, op, rank, nranks, seed + bytes, count, input.data());
        if (o.check) driver::fillExpected(type, op, nranks, seed + bytes, count, expected.data());
        auto progress = [&](Algo algo) {
          if (rank != 0 || !o.progress) return;
          std::string label = std::string(algoName(algo)) + " " + typeLabel(type) + " " +
                              reduceOpName(op) + " " + formatBytes(bytes) + " " +
                              std::to_string(si + 1) + "/" + std::to_string(nsizes);
          (void)store->set(kProgressKey, label);
        };
        // One row: `row` names it, `runs` is what runs (the two differ for auto).
        auto runRow = [&](Algo row, Algo runs) -> Status {
          progress(row);
          if (runs == Algo::kServer) {
            TALLY_RETURN_IF_ERROR(
                coll->setCallShape(callBytes(o, bytes), callChunkBytes(o, bytes)));
            return measure(c, row, runs, type, op, bytes, input, expected, &out,
                           [&](const void* src, void* dst, size_t n) {
                             return coll->allreduce(src, dst, n, type, op);
                           });
          }
          return measure(c, row, runs, type, op, bytes, input, expected, &out,
                         [&](const void* src, void* dst, size_t n) {
                           // In place over the output buffer; the copy is part of the call, as
                           // the server's staging copies are.
                           std::memcpy(dst, src, n * esize);
                           return ring->allreduce(dst, n, type, op);
                         });
        };
        if (server && has(o.algos, Algo::kServer)) {
          if (!report(c, runRow(Algo::kServer, Algo::kServer), "reduction server all-reduce"))
            return 4;
        }
        if (ring && has(o.algos, Algo::kRing)) {
          if (!report(c, runRow(Algo::kRing, Algo::kRing), "ring all-reduce")) return 4;
        }
        if (want_auto) {
          const Algo pick = autoPick(o, bytes, server);
          if (!report(c, runRow(Algo::kAuto, pick), "auto all-reduce")) return 4;
        }
      }
    }
  }

  return closeWorker(plan, rank, &w);
}

}  // namespace tally::bench
