// SPDX-License-Identifier: Apache-2.0
// runBench: checks the options, builds the (emulated) cluster and starts the reducers (BenchEnv),
// runs Gloo's ranks and then the Tally workers, printing each line of the table once its size is
// measured, and reports. With --fault it hands over to runFaultBench (bench_fault.cc). Cleanup
// order on every path: children first (they die with their owners), then the reducers, the
// emulated cluster and the scratch directory.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <tuple>

#include "common/store.h"
#include "tools/bench/bench_internal.h"
#include "tools/driver/plugin_library.h"
#include "tools/driver/reference.h"

namespace tally::bench {
namespace {

// A row's key: what it measures, before any result.
BenchRow rowOf(Algo algo, DataType type, ReduceOp op, uint64_t bytes) {
  BenchRow row;
  row.algo = algo;
  row.type = type;
  row.op = op;
  row.bytes = bytes;
  row.count = bytes / dataTypeSize(type);
  return row;
}

// Reads one (algorithm, type, op, size) from every worker's result key: the slowest worker's
// time and the wrong elements summed over workers.
BenchRow collectRow(const BenchOptions& o, Store* store, Algo algo, DataType type, ReduceOp op,
                    uint64_t bytes) {
  BenchRow row = rowOf(algo, type, op, bytes);
  if (algo != Algo::kAuto && store->check(skipKey(algo, type, op))) {
    row.skipped = true;
    return row;
  }
  // Auto runs the reduction server where the tuner picks it and the reducers support the pair
  // (rank 0 writes the server's skip key otherwise), as every worker decided.
  const Algo runs = algo == Algo::kAuto
                        ? autoPick(o, bytes, !store->check(skipKey(Algo::kServer, type, op)))
                        : algo;
  row.picked = runs;
  double worker_cpu = 0, reducer_cpu = runs == Algo::kServer ? -1 : 0;
  for (int r = 0; r < o.workers; ++r) {
    std::string key = resultKey(algo, type, op, bytes, r);
    std::string value;
    if (!store->check(key) || !store->get(key, &value, 0).isOk()) return row;
    double t = 0, cpu = -1, rcpu = -1;
    long long wrong = 0;
    if (std::sscanf(value.c_str(), "%lf %lld %lf %lf", &t, &wrong, &cpu, &rcpu) != 4) return row;
    row.time_us = std::max(row.time_us, t);
    row.wrong = wrong < 0 ? -1 : row.wrong + wrong;
    worker_cpu = worker_cpu < 0 || cpu < 0 ? -1 : worker_cpu + cpu;
    if (r == 0 && runs == Algo::kServer) reducer_cpu = rcpu;
  }
  row.present = true;
  row.worker_cpu_s = worker_cpu;
  row.reducer_cpu_s = reducer_cpu;
  fillBandwidth(o.workers, &row);
  fillCpuCost(o.workers, o.iters, &row);
  return row;
}

// Table order: type, op, size as the options list them, then the algorithms.
void sortRows(const BenchOptions& o, std::vector<BenchRow>* rows) {
  auto pos = [](const auto& list, auto v) {
    return std::find(list.begin(), list.end(), v) - list.begin();
  };
  std::stable_sort(rows->begin(), rows->end(), [&](const BenchRow& a, const BenchRow& b) {
    auto key = [&](const BenchRow& r) {
      return std::make_tuple(pos(o.types, r.type), pos(o.ops, r.op), r.bytes, pos(o.algos, r.algo));
    };
    return key(a) < key(b);
  });
}

std::vector<std::string> notesFor(const BenchOptions& o, bool gloo_runs) {
  std::vector<std::string> notes;
  const bool gloo = has(o.algos, Algo::kGlooRing) || has(o.algos, Algo::kGlooHalvingDoubling);
  if (gloo && !gloo_runs) {
    notes.push_back("Gloo is measured for float32 sum only; its columns are skipped");
  } else if (gloo && (o.types.size() > 1 || o.ops.size() > 1)) {
    notes.push_back("Gloo is measured for float32 sum only; its other rows are skipped");
  }
  bool floating = false;
  for (DataType t : o.types) {
    floating |= t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64 ||
                t == DataType::kBfloat16 || t == DataType::kFloat8e4m3 ||
                t == DataType::kFloat8e5m2;
  }
  if (floating && o.check && o.workers > driver::kMaxExactRanks) {
    notes.push_back("more than " + std::to_string(driver::kMaxExactRanks) +
                    " workers: floating inputs are no longer exact, so #wrong may count rounding");
  }
  return notes;
}

}  // namespace

int runBench(const BenchOptions& o, std::vector<BenchRow>* out_rows) {
  if (!o.faults.empty()) return runFaultBench(o);
  const char* name = o.command_name.c_str();
  auto fail = [&](const Status& s) {
    std::fprintf(stderr, "%s: %s\n", name, s.isOk() ? "failed" : s.message().c_str());
    return 2;
  };
  bool gloo_runs = false;
  Status s = validateOptions(o, &gloo_runs);
  if (!s.isOk()) return fail(s);
  // Reducers run for the reduction server's rows and for auto's.
  const bool server = has(o.algos, Algo::kServer) || has(o.algos, Algo::kAuto);
  const bool tally_algos = server || has(o.algos, Algo::kRing);

  RunInfo info = machineInfo();
  info.notes = notesFor(o, gloo_runs);
  if (tally_algos) {
    s = pickVersion(o.plugin, o.table_version, &info.version);
    if (!s.isOk()) return fail(s);
  }

  std::unique_ptr<BenchEnv> env;
  s = BenchEnv::create(o, server, &env);
  if (!s.isOk()) return fail(s);
  if (server) info.reducer_list = env->reducerList();
  Store* store = env->store();
  const std::string& dir_path = env->dir();

  printHeader(o, info);
  TablePrinter table(o);
  table.printHead();
  bool failed = false;
  std::vector<BenchRow> rows;
  Progress progress(o.progress);
  // Gloo first: its rows are then known while the Tally workers run, so each line of the table
  // is printed as soon as the workers have measured its size.
  if (gloo_runs) {
    s = runGloo(o, env->guard(), env->nodes(), dir_path, &progress, &rows, &failed);
    if (!s.isOk()) {
      std::fprintf(stderr, "%s: %s\n", name, s.toString().c_str());
      failed = true;
    }
  }
  // Gloo's rows for the (type, op) pairs it does not measure, so every table cell has a row.
  for (Algo a : {Algo::kGlooRing, Algo::kGlooHalvingDoubling}) {
    if (!has(o.algos, a)) continue;
    for (DataType type : o.types) {
      for (ReduceOp op : o.ops) {
        if (gloo_runs && type == DataType::kFloat32 && op == ReduceOp::kSum) continue;
        for (uint64_t bytes : typeSizes(o, type)) {
          BenchRow row = rowOf(a, type, op, bytes);
          row.skipped = true;
          rows.push_back(row);
        }
      }
    }
  }
  if (!tally_algos) {
    // Only Gloo: every line is complete now.
    while (table.next() != nullptr) table.printNext(rows);
  }
  if (tally_algos) {
    WorkerPlan plan;
    plan.options = &o;
    plan.reducer_list = info.reducer_list;
    plan.version = info.version;
    plan.store_dir = dir_path;
    plan.ifname = env->nodes() ? "eth0" : "lo";
    plan.reducer_pids = env->reducerPids();
    // The lines printed so far, with the rows they were printed from.
    std::vector<BenchRow> shown = rows;
    auto printMeasured = [&] {
      while (const TableLine* line = table.next()) {
        std::vector<BenchRow> line_rows;
        for (Algo a : {Algo::kServer, Algo::kRing, Algo::kAuto}) {
          if (!has(o.algos, a)) continue;
          BenchRow r = collectRow(o, store, a, line->type, line->op, line->bytes);
          if (!r.present && !r.skipped) return;  // not measured yet by every worker
          line_rows.push_back(r);
        }
        shown.insert(shown.end(), line_rows.begin(), line_rows.end());
        progress.clear();  // the line goes where the progress line was
        table.printNext(shown);
      }
    };
    std::vector<driver::WorkerExit> exits;
    s = runChildren(
        env->guard(), o.workers,
        [&](int rank) {
          WorkerPlan mine = plan;
          mine.node = env->workerNode(rank);
          return runBenchWorker(mine, rank);
        },
        o.timeout_ms,
        [&] {
          printMeasured();
          std::string label;
          if (store->check(kProgressKey) && store->get(kProgressKey, &label, 0).isOk())
            progress.show(label);
        },
        &exits);
    progress.clear();
    if (!s.isOk()) return fail(s);
    printMeasured();
    std::string why;
    if (!driver::allWorkersOk(exits, &why)) {
      failed = true;
      std::fprintf(stderr, "%s: worker failures:\n%s", name, why.c_str());
    }
    for (DataType type : o.types) {
      for (ReduceOp op : o.ops) {
        for (uint64_t bytes : typeSizes(o, type)) {
          for (Algo a : {Algo::kServer, Algo::kRing, Algo::kAuto}) {
            if (has(o.algos, a)) rows.push_back(collectRow(o, store, a, type, op, bytes));
          }
        }
      }
    }
  }
  sortRows(o, &rows);
  for (const BenchRow& r : rows) {
    if (!r.present && !r.skipped) failed = true;
  }

  // The lines a failed worker left unmeasured, then the closing lines.
  const uint64_t wrong = table.finish(rows);
  const int code = (failed || wrong != 0) ? 1 : 0;
  const char* p = o.style == TableStyle::kDemo ? "\n" : "# ";
  if (wrong != 0) {
    std::printf("%sFAILED: %llu wrong elements\n", p, static_cast<unsigned long long>(wrong));
  } else if (failed) {
    std::printf("%sFAILED: see the errors above\n", p);
  } else if (!o.check) {
    std::printf("%sresults not checked (-c 0)\n", p);
  } else {
    std::printf("%sall results correct\n", p);
  }
  std::fflush(stdout);

  int exit_code = code;
  if (!o.json_path.empty()) {
    s = writeJson(o, info, rows, code);
    if (!s.isOk()) {
      std::fprintf(stderr, "%s: %s\n", name, s.toString().c_str());
      exit_code = std::max(exit_code, 1);
    }
  }
  if (!o.plot_path.empty()) {
    s = writePlot(o, rows);
    if (!s.isOk()) {
      std::fprintf(stderr, "%s: plot: %s\n", name, s.toString().c_str());
      exit_code = std::max(exit_code, 1);
    }
  }
  if (out_rows) *out_rows = std::move(rows);
  return exit_code;
}

}  // namespace tally::bench
