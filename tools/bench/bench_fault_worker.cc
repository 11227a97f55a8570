// SPDX-License-Identifier: Apache-2.0
// One worker of a fault run: the reduction server at one size, calls back to back for the whole
// duration while the parent kills, freezes and restarts reducers, every result checked, and the
// time each call completed.
//
// Every rank must make the same number of calls (an all-reduce needs all of them), so rank 0
// alone reads the clock against the duration. Once it has completed call k past the duration it
// writes the count k + 2 and makes one call more; no other rank can have completed call k + 1
// before rank 0 posted it, which is after the write, so every rank sees the count before it would
// start call k + 2, and all stop after the same call k + 1.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tools/bench/bench_internal.h"
#include "tools/driver/reference.h"

namespace tally::bench {
namespace {

using Clock = std::chrono::steady_clock;

double steadyMs(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(t.time_since_epoch()).count();
}

}  // namespace

std::string faultResultKey(int rank) { return "fault/res/" + std::to_string(rank); }

int runFaultWorker(const WorkerPlan& plan, int rank) {
  const BenchOptions& o = *plan.options;
  // Rank 0 looks for a restarted reducer this often; the plugin's default (1 s) would show as a
  // longer stall after each restart. What the caller set wins.
  ::setenv("TALLY_REJOIN_INTERVAL_MS", "500", 0);
  WorkerSession w;
  if (int code = openWorker(plan, rank, /*server=*/true, /*ring=*/false, &w); code != 0)
    return code;
  Store* store = w.store.get();
  driver::CollComm* coll = w.coll.get();
  const DataType type = o.types.front();
  const ReduceOp op = o.ops.front();
  const uint64_t bytes = o.sizes.front();
  if (!coll->supported(type, op)) {
    std::fprintf(stderr, "%s: worker %d: the plugin does not support %s %s\n",
                 o.command_name.c_str(), rank, typeLabel(type), reduceOpName(op));
    return 4;
  }
  const size_t count = bytes / dataTypeSize(type);
  std::vector<char> input(bytes), expected(bytes), out(bytes);
  driver::fillInput(type, op, rank, o.workers, kInputSeed + bytes, count, input.data());
  if (o.check)
    driver::fillExpected(type, op, o.workers, kInputSeed + bytes, count, expected.data());

  int64_t wrong = 0;
  auto call = [&](const char* phase) {
    Status s = coll->allreduce(input.data(), out.data(), count, type, op);
    if (!reportWorker(o, rank, s, phase)) return false;
    if (rank == o.corrupt_rank) out[0] = static_cast<char>(out[0] ^ 1);
    if (!o.check) return true;
    size_t first_bad = 0;
    const size_t bad =
        driver::countMismatches(type, out.data(), expected.data(), count, &first_bad);
    if (bad != 0 && wrong == 0) {
      std::fprintf(stderr, "%s: worker %d: rs %s %s %llu bytes: %zu wrong, first %s\n",
                   o.command_name.c_str(), rank, typeLabel(type), reduceOpName(op),
                   static_cast<unsigned long long>(bytes), bad,
                   driver::describeElement(type, out.data(), expected.data(), first_bad).c_str());
    }
    wrong += static_cast<int64_t>(bad);
    return true;
  };
  for (int i = 0; i < o.warmup; ++i) {
    if (!call("warm-up all-reduce")) return 4;
  }

  Status s = storeBarrier(store, "barrier/fault", rank, o.workers, kStoreTimeoutMs);
  if (!reportWorker(o, rank, s, "start barrier")) return 4;
  double start = 0;
  if (rank == 0) {
    start = steadyMs(Clock::now());
    char text[64];
    std::snprintf(text, sizeof(text), "%.3f", start);
    s = store->set(kFaultStartKey, text);
  } else {
    std::string text;
    s = store->get(kFaultStartKey, &text, kStoreTimeoutMs);
    if (s.isOk()) start = std::strtod(text.c_str(), nullptr);
  }
  if (!reportWorker(o, rank, s, "start time")) return 4;

  std::vector<double> done_ms;
  // Rank 0 fills it in; the others learn it from the store. -1: not known yet.
  long long calls = -1;
  for (long long c = 0; calls < 0 || c < calls; ++c) {
    if (calls < 0 && rank != 0 && store->check(kFaultCallsKey)) {
      std::string text;
      if (store->get(kFaultCallsKey, &text, 0).isOk()) calls = std::atoll(text.c_str());
      if (calls >= 0 && c >= calls) break;
    }
    if (!call("all-reduce")) return 4;
    const double now = steadyMs(Clock::now()) - start;
    done_ms.push_back(now);
    if (rank == 0 && calls < 0 && now >= static_cast<double>(o.duration_ms)) {
      calls = c + 2;
      s = store->set(kFaultCallsKey, std::to_string(calls));
      if (!reportWorker(o, rank, s, "call count")) return 4;
    }
  }

  std::string value = std::to_string(o.check ? wrong : -1) + " " + std::to_string(done_ms.size());
  char buf[32];
  for (double t : done_ms) {
    std::snprintf(buf, sizeof(buf), " %.3f", t);
    value += buf;
  }
  s = store->set(faultResultKey(rank), value);
  if (!reportWorker(o, rank, s, "result")) return 4;
  return closeWorker(plan, rank, &w);
}

}  // namespace tally::bench
