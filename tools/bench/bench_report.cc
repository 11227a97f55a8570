// SPDX-License-Identifier: Apache-2.0
// The bench's table: its header lines, the rows (nccl-tests shaped, or the demo's side-by-side
// layout), the ratios and the closing lines. Also the store keys and the bandwidth formulas, so
// the arithmetic lives in one file.
#include <algorithm>
#include <cstdio>
#include <string>

#include "common/sizes.h"
#include "tools/bench/bench_internal.h"
#include "tools/bench/cpu_cost.h"
#include "tools/bench/link_rate.h"

namespace tally::bench {
namespace {

// time 10, algbw 8, busbw 8, #wrong 7, wcpu 8, rcpu 8, and the spaces
constexpr int kGroupWidth = 72;

const BenchRow* findRow(const std::vector<BenchRow>& rows, Algo algo, DataType type, ReduceOp op,
                        uint64_t bytes) {
  for (const BenchRow& r : rows) {
    if (r.algo == algo && r.type == type && r.op == op && r.bytes == bytes) return &r;
  }
  return nullptr;
}

std::string fmt(const char* format, double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string wrongText(const BenchRow* r) {
  if (r == nullptr || !r->present) return "-";
  if (r->wrong < 0) return "N/A";
  return std::to_string(r->wrong);
}

// A CPU cost cell: "-" when the row or the value is missing.
std::string cpuText(const BenchRow* r, double per_gib) {
  if (r == nullptr || !r->present || per_gib < 0) return "-";
  return fmt("%.3f", per_gib);
}

std::string centered(const std::string& text, int width) {
  int pad = width - static_cast<int>(text.size());
  if (pad <= 0) return text;
  return std::string(static_cast<size_t>(pad / 2), ' ') + text +
         std::string(static_cast<size_t>(pad - pad / 2), ' ');
}

bool usesReducers(const BenchOptions& o) {
  return has(o.algos, Algo::kServer) || has(o.algos, Algo::kAuto);
}

// auto/best: auto's bandwidth over the better of rs and ring, when all three ran.
bool autoRatio(const BenchOptions& o) {
  return has(o.algos, Algo::kAuto) && has(o.algos, Algo::kServer) && has(o.algos, Algo::kRing);
}

bool measured(const BenchRow* r) { return r != nullptr && r->present && r->algbw_gbs > 0; }

// rs over ring, and over the better Gloo algorithm, for one line; auto over the better of rs and
// ring; -1 where one is missing.
RatioRow ratioFor(const std::vector<BenchRow>& rows, DataType type, ReduceOp op, uint64_t bytes) {
  RatioRow r{type, op, bytes, -1, -1, -1};
  const BenchRow* rs = findRow(rows, Algo::kServer, type, op, bytes);
  const BenchRow* ring = findRow(rows, Algo::kRing, type, op, bytes);
  const BenchRow* chosen = findRow(rows, Algo::kAuto, type, op, bytes);
  if (measured(chosen) && measured(rs) && measured(ring))
    r.auto_over_best = chosen->algbw_gbs / std::max(rs->algbw_gbs, ring->algbw_gbs);
  if (rs == nullptr || !rs->present || rs->algbw_gbs <= 0) return r;
  if (ring != nullptr && ring->present && ring->algbw_gbs > 0)
    r.over_ring = rs->algbw_gbs / ring->algbw_gbs;
  double best = 0;
  for (Algo a : {Algo::kGlooRing, Algo::kGlooHalvingDoubling}) {
    const BenchRow* g = findRow(rows, a, type, op, bytes);
    if (g != nullptr && g->present) best = std::max(best, g->algbw_gbs);
  }
  if (best > 0) r.over_gloo = rs->algbw_gbs / best;
  return r;
}

}  // namespace

std::string resultKey(Algo algo, DataType type, ReduceOp op, uint64_t bytes, int rank) {
  std::string key = std::string("res/") + algoName(algo) + "/" + typeLabel(type) + "/" +
                    reduceOpName(op) + "/" + std::to_string(bytes);
  if (rank >= 0) key += "/" + std::to_string(rank);
  return key;
}

std::string skipKey(Algo algo, DataType type, ReduceOp op) {
  return std::string("skip/") + algoName(algo) + "/" + typeLabel(type) + "/" + reduceOpName(op);
}

void fillBandwidth(int workers, BenchRow* row) {
  if (!row->present || row->time_us <= 0) {
    row->algbw_gbs = row->busbw_gbs = 0;
    return;
  }
  row->algbw_gbs = static_cast<double>(row->bytes) / (row->time_us * 1e3);
  row->busbw_gbs = row->algbw_gbs * 2.0 * (workers - 1) / workers;
}

void fillCpuCost(int workers, int iters, BenchRow* row) {
  const uint64_t moved = row->present ? movedBytes(row->bytes, iters, workers) : 0;
  row->worker_cpu_per_gib = cpuSecondsPerGiB(row->worker_cpu_s, moved);
  row->reducer_cpu_per_gib = cpuSecondsPerGiB(row->reducer_cpu_s, moved);
  // Gloo's halving-doubling moves the ring's bytes only at a power of two workers.
  const bool pow2 = workers > 0 && (workers & (workers - 1)) == 0;
  const bool known = row->present && (row->algo != Algo::kGlooHalvingDoubling || pow2);
  const bool server =
      row->algo == Algo::kServer || (row->algo == Algo::kAuto && row->picked == Algo::kServer);
  const SocketPattern pattern = server ? SocketPattern::kServer : SocketPattern::kRing;
  row->worker_socket_bytes = known ? workerSocketBytes(pattern, row->bytes, iters, workers) : 0;
  row->reducer_socket_bytes =
      row->present && server ? reducerSocketBytes(row->bytes, iters, workers) : 0;
  row->worker_cpu_per_socket_gib = cpuSecondsPerGiB(row->worker_cpu_s, row->worker_socket_bytes);
  row->reducer_cpu_per_socket_gib = cpuSecondsPerGiB(row->reducer_cpu_s, row->reducer_socket_bytes);
}

std::vector<RatioRow> computeRatios(const BenchOptions& o, const std::vector<BenchRow>& rows) {
  std::vector<RatioRow> ratios;
  const bool gloo = has(o.algos, Algo::kGlooRing) || has(o.algos, Algo::kGlooHalvingDoubling);
  const bool auto_ratio =
      has(o.algos, Algo::kAuto) && has(o.algos, Algo::kServer) && has(o.algos, Algo::kRing);
  if (!auto_ratio && (!has(o.algos, Algo::kServer) || !(has(o.algos, Algo::kRing) || gloo)))
    return ratios;
  for (DataType type : o.types) {
    for (ReduceOp op : o.ops) {
      for (uint64_t bytes : typeSizes(o, type)) ratios.push_back(ratioFor(rows, type, op, bytes));
    }
  }
  return ratios;
}

void printHeader(const BenchOptions& o, const RunInfo& info) {
  const bool demo = o.style == TableStyle::kDemo;
  const char* p = demo ? "" : "# ";
  std::string where = o.emulate.empty()
                          ? "loopback"
                          : "emulated cluster, every node on a " + o.emulate +
                                " link in its own network namespace, TCP " + o.emulate_cc +
                                (o.emulate_burst == driver::EmulationOptions{}.burst ? "" : ", burst " + o.emulate_burst);
  std::string reducers = usesReducers(o) ? std::to_string(o.reducers) +
                                               (o.reducers == 1 ? " reducer (" : " reducers (") +
                                               info.reducer_list + ")"
                                         : "no reducers";
  std::string what;
  for (DataType t : o.types) what += std::string(what.empty() ? "" : ",") + typeLabel(t);
  what += " ";
  for (size_t i = 0; i < o.ops.size(); ++i)
    what += std::string(i ? "," : "") + reduceOpName(o.ops[i]);
  std::printf("%s%s: %d workers, %s, %s, %s\n", p, o.command_name.c_str(), o.workers,
              reducers.c_str(), what.c_str(), where.c_str());
  if (info.version > 0) {
    std::printf("%splugin %s, ncclCollNet v%d / ncclNet v%d\n", p, o.plugin.c_str(), info.version,
                info.version);
  }
  if (!o.faults.empty()) {
    // A fault run: what it measures instead of the table's iterations.
    std::string faults;
    for (const Fault& f : o.faults) faults += (faults.empty() ? "" : ", ") + faultName(f);
    std::printf(
        "%s%d warm-up calls, then %s calls back to back for %s; algbw = bytes of the calls every "
        "worker completed in a bucket / %s\n%sfaults: %s\n",
        p, o.warmup, formatBytes(o.sizes.front()).c_str(), timeText(o.duration_ms).c_str(),
        timeText(faultBucketMs(o.duration_ms)).c_str(), p, faults.c_str());
    const bool slows = std::any_of(o.faults.begin(), o.faults.end(),
                                   [](const Fault& f) { return f.kind == FaultKind::kSlow; });
    if (slows) {
      std::printf("%sa slowed reducer's link runs at %s each way (%s / --slow-factor %g)\n", p,
                  dividedRate(o.emulate, o.slow_factor).c_str(), o.emulate.c_str(), o.slow_factor);
    }
  } else {
    std::printf(
        "%s%d warm-up + %d timed iterations per size; time is the slowest worker's mean; "
        "algbw = bytes / time%s\n",
        p, o.warmup, o.iters, demo ? "" : "; busbw = algbw x 2(n-1)/n");
  }
  if (!demo && o.faults.empty()) {
    std::printf(
        "%swcpu, rcpu = CPU seconds (user + system) of all workers, of all reducers, per GiB "
        "moved (bytes x iterations x workers); (s/sGiB): per GiB through their sockets, in and "
        "out\n",
        p);
  }
  if (usesReducers(o) && o.faults.empty()) {
    std::printf("%sreduction server: %s, %d in flight%s\n", p, callShapeText(o.calls).c_str(),
                driver::kNcclSteps, demo ? "" : "; call = the bytes of each iallreduce");
  }
  for (const std::string& note : info.notes) std::printf("%snote: %s\n", p, note.c_str());
  std::printf(demo ? "\n" : "#\n");
  std::fflush(stdout);
}

namespace {

void printDemoHead() {
  std::printf("%10s %10s | %12s %12s | %12s %12s | %6s | %7s\n", "size", "count", "server us",
              "server GB/s", "ring us", "ring GB/s", "ratio", "#wrong");
}

void printDemoLine(const std::vector<BenchRow>& rows, const TableLine& l) {
  const uint64_t count = l.bytes / dataTypeSize(l.type);
  const BenchRow* server = findRow(rows, Algo::kServer, l.type, l.op, l.bytes);
  const BenchRow* ring = findRow(rows, Algo::kRing, l.type, l.op, l.bytes);
  auto us = [](const BenchRow* r) { return r && r->present ? fmt("%.1f", r->time_us) : "-"; };
  auto bw = [](const BenchRow* r) { return r && r->present ? fmt("%.3f", r->algbw_gbs) : "-"; };
  const RatioRow ratios = ratioFor(rows, l.type, l.op, l.bytes);
  const std::string ratio = ratios.over_ring > 0 ? fmt("%.2f", ratios.over_ring) : "-";
  int64_t wrong = 0;
  for (const BenchRow* r : {server, ring}) {
    if (r && r->present && r->wrong > 0) wrong += r->wrong;
  }
  std::printf("%10s %10llu | %12s %12s | %12s %12s | %6s | %7lld\n", formatBytes(l.bytes).c_str(),
              static_cast<unsigned long long>(count), us(server).c_str(), bw(server).c_str(),
              us(ring).c_str(), bw(ring).c_str(), ratio.c_str(), static_cast<long long>(wrong));
}

bool glooColumns(const BenchOptions& o) {
  return has(o.algos, Algo::kGlooRing) || has(o.algos, Algo::kGlooHalvingDoubling);
}

void printBenchHead(const BenchOptions& o) {
  const bool ring_ratio = has(o.algos, Algo::kServer) && has(o.algos, Algo::kRing);
  const bool gloo_ratio = has(o.algos, Algo::kServer) && glooColumns(o);
  std::string line1 = "#" + std::string(41, ' '), line2, line3;
  char buf[160];
  const bool server = usesReducers(o);
  std::snprintf(buf, sizeof(buf), "#%12s %12s %9s %5s", "size", "count", "type", "op");
  line2 = buf;
  std::snprintf(buf, sizeof(buf), "#%12s %12s %9s %5s", "(B)", "(elements)", "", "");
  line3 = buf;
  if (server) {
    line1 += std::string(7, ' ');
    line2 += "   call";
    line3 += "    (B)";
  }
  for (Algo a : o.algos) {
    const bool pick = a == Algo::kAuto;  // one column more: what auto ran
    line1 += centered(algoName(a), kGroupWidth + (pick ? 5 : 0));
    std::snprintf(buf, sizeof(buf), " %10s %8s %8s %7s %8s %8s %8s %8s", "time", "algbw", "busbw",
                  "#wrong", "wcpu", "rcpu", "wcpu", "rcpu");
    line2 += buf;
    std::snprintf(buf, sizeof(buf), " %10s %8s %8s %7s %8s %8s %8s %8s", "(us)", "(GB/s)", "(GB/s)",
                  "", "(s/GiB)", "(s/GiB)", "(s/sGiB)", "(s/sGiB)");
    line3 += buf;
    if (pick) line2 += " pick", line3 += "     ";
  }
  if (ring_ratio) line2 += "  rs/ring";
  if (gloo_ratio) line2 += "  rs/gloo";
  if (autoRatio(o)) line2 += " auto/best";
  std::printf("%s\n%s\n%s\n", line1.c_str(), line2.c_str(), line3.c_str());
}

void printBenchLine(const BenchOptions& o, const std::vector<BenchRow>& rows, const TableLine& l) {
  const bool ring_ratio = has(o.algos, Algo::kServer) && has(o.algos, Algo::kRing);
  const bool gloo_ratio = has(o.algos, Algo::kServer) && glooColumns(o);
  char buf[160];
  const uint64_t count = l.bytes / dataTypeSize(l.type);
  std::snprintf(buf, sizeof(buf), " %12llu %12llu %9s %5s",
                static_cast<unsigned long long>(l.bytes), static_cast<unsigned long long>(count),
                typeLabel(l.type), reduceOpName(l.op));
  std::string line = buf;
  if (usesReducers(o)) {
    std::snprintf(buf, sizeof(buf), " %6s", formatBytes(callBytes(o, l.bytes), "").c_str());
    line += buf;
  }
  for (Algo a : o.algos) {
    const BenchRow* r = findRow(rows, a, l.type, l.op, l.bytes);
    bool ok = r != nullptr && r->present;
    std::snprintf(buf, sizeof(buf), " %10s %8s %8s %7s %8s %8s %8s %8s",
                  ok ? fmt("%.1f", r->time_us).c_str() : "-",
                  ok ? fmt("%.3f", r->algbw_gbs).c_str() : "-",
                  ok ? fmt("%.3f", r->busbw_gbs).c_str() : "-", wrongText(r).c_str(),
                  cpuText(r, r ? r->worker_cpu_per_gib : -1).c_str(),
                  cpuText(r, r ? r->reducer_cpu_per_gib : -1).c_str(),
                  cpuText(r, r ? r->worker_cpu_per_socket_gib : -1).c_str(),
                  cpuText(r, r ? r->reducer_cpu_per_socket_gib : -1).c_str());
    line += buf;
    if (a == Algo::kAuto) {
      std::snprintf(buf, sizeof(buf), " %4s", ok ? algoName(r->picked) : "-");
      line += buf;
    }
  }
  const RatioRow ratio = ratioFor(rows, l.type, l.op, l.bytes);
  if (ring_ratio) {
    std::snprintf(buf, sizeof(buf), " %8s",
                  ratio.over_ring > 0 ? fmt("%.2f", ratio.over_ring).c_str() : "-");
    line += buf;
  }
  if (gloo_ratio) {
    std::snprintf(buf, sizeof(buf), " %8s",
                  ratio.over_gloo > 0 ? fmt("%.2f", ratio.over_gloo).c_str() : "-");
    line += buf;
  }
  if (autoRatio(o)) {
    std::snprintf(buf, sizeof(buf), " %9s",
                  ratio.auto_over_best > 0 ? fmt("%.2f", ratio.auto_over_best).c_str() : "-");
    line += buf;
  }
  std::printf("%s\n", line.c_str());
}

}  // namespace

TablePrinter::TablePrinter(const BenchOptions& o) : o_(o) {
  // The demo shows its one (type, op); the bench every (type, op, size), in the order run.
  const bool demo = o.style == TableStyle::kDemo;
  for (DataType type : o.types) {
    for (ReduceOp op : o.ops) {
      for (uint64_t bytes : typeSizes(o, type)) lines_.push_back({type, op, bytes});
      if (demo) return;
    }
  }
}

void TablePrinter::printHead() {
  if (o_.style == TableStyle::kDemo) {
    printDemoHead();
  } else {
    printBenchHead(o_);
  }
  std::fflush(stdout);
}

const TableLine* TablePrinter::next() const {
  return next_ < lines_.size() ? &lines_[next_] : nullptr;
}

void TablePrinter::printNext(const std::vector<BenchRow>& rows) {
  if (next_ >= lines_.size()) return;
  const TableLine& l = lines_[next_++];
  if (o_.style == TableStyle::kDemo) {
    printDemoLine(rows, l);
  } else {
    printBenchLine(o_, rows, l);
  }
  std::fflush(stdout);
}

uint64_t TablePrinter::finish(const std::vector<BenchRow>& rows) {
  while (next_ < lines_.size()) printNext(rows);
  if (o_.style != TableStyle::kDemo) {
    // nccl-tests' closing line, per algorithm: the mean bus bandwidth over the rows it ran.
    std::string avg;
    for (Algo a : o_.algos) {
      double sum = 0;
      int n = 0;
      for (const BenchRow& r : rows) {
        if (r.algo == a && r.present) sum += r.busbw_gbs, ++n;
      }
      if (n > 0)
        avg += std::string(avg.empty() ? " " : ", ") + algoName(a) + " " + fmt("%.3f", sum / n);
    }
    if (!avg.empty()) std::printf("# avg busbw (GB/s):%s\n", avg.c_str());
  }
  uint64_t wrong = 0;
  for (const BenchRow& r : rows) {
    if (r.present && r.wrong > 0) wrong += static_cast<uint64_t>(r.wrong);
  }
  std::fflush(stdout);
  return wrong;
}

}  // namespace tally::bench
