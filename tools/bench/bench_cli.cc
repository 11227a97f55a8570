// SPDX-License-Identifier: Apache-2.0
// tally bench [-b 256K] [-e 64M] [-f 2] [-n 5] [-w 2] [-d float32] [-o sum] [-c 1]
//             [--workers 4] [--reducers 2] [--algo rs,ring] [--emulate 1gbit]
//             [--json FILE] [--plot FILE.png] [--plugin SO] [--reducer BIN]
//             [--fault kill-reducer:1@5s,restart@15s [--duration 25s]]
//             [--emulate 400mbit --fault slow-reducer:1@5s,heal-reducer:1@20s [--slow-factor 10]]
//             ...
// Exit status: 0 when every result is right, 1 when one is wrong or a run failed, 2 for bad
// options or a failed setup (docs/bench.md).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/params.h"
#include "common/sizes.h"
#include "tools/bench/bench_command.h"
#include "tools/commands/paths.h"
#include "tools/driver/process.h"

namespace tally::bench {
namespace {

struct BenchFlags {
  std::string min_bytes = "256K";
  std::string max_bytes = "64M";
  uint64_t factor = 2;
  std::vector<std::string> sizes;
  std::string types = "float32";
  std::string ops = "sum";
  int check = 1;
  std::string algos = "both";
  std::string timeout = "600s";
  std::string faults;
  std::string duration;
  std::string slow_factor;
  bool no_progress = false;
  std::string calls = "nccl";
  int channels = 2;
  int chain_depth = 1;
  std::string nccl_buffsize = "4M";
  std::string chunk;
};

Status bytesFlag(const char* flag, const std::string& text, uint64_t* out) {
  Status s = parseBytes(text, out);
  if (!s.isOk() || *out == 0)
    return Status::invalidUsage(std::string(flag) + ": expected a size such as 4K or 64M, got \"" +
                                text + "\"");
  return Status::ok();
}

Status toCallShape(const BenchFlags& f, CallShape* shape) {
  if (f.channels < 1 || f.channels > driver::kNcclMaxSubs)
    return Status::invalidUsage("--channels: expected 1 to 8, got " + std::to_string(f.channels));
  if (f.chain_depth < 1 || f.chain_depth > 8)
    return Status::invalidUsage("--chain-depth: expected 1 to 8, got " +
                                std::to_string(f.chain_depth));
  shape->chain.channels = f.channels;
  shape->chain.depth = f.chain_depth;
  TALLY_RETURN_IF_ERROR(bytesFlag("--nccl-buffsize", f.nccl_buffsize, &shape->chain.buffsize));
  if (shape->chain.buffsize < 64 * 1024)
    return Status::invalidUsage("--nccl-buffsize: at least 64K (8 steps of 8 KiB)");
  shape->tuner_chunk = f.chunk == "tuner";
  if (!f.chunk.empty() && !shape->tuner_chunk) {
    TALLY_RETURN_IF_ERROR(bytesFlag("--chunk", f.chunk, &shape->chain.tuner_chunk));
    if (shape->chain.tuner_chunk > driver::ncclStepBytes(shape->chain))
      return Status::invalidUsage("--chunk: at most NCCL_BUFFSIZE / 8 (" +
                                  formatBytes(driver::ncclStepBytes(shape->chain)) + ")");
  }
  shape->nccl = f.calls == "nccl";
  if (!shape->nccl) {
    if (!f.chunk.empty()) return Status::invalidUsage("--chunk: only with --calls nccl");
    TALLY_RETURN_IF_ERROR(bytesFlag("--calls", f.calls, &shape->fixed_bytes));
    if (shape->fixed_bytes > (256ull << 20))
      return Status::invalidUsage("--calls: at most 256M per call");
  }
  return Status::ok();
}

Status toOptions(const BenchFlags& f, BenchOptions* o) {
  if (f.sizes.empty()) {
    uint64_t lo = 0, hi = 0;
    TALLY_RETURN_IF_ERROR(bytesFlag("-b", f.min_bytes, &lo));
    TALLY_RETURN_IF_ERROR(bytesFlag("-e", f.max_bytes, &hi));
    TALLY_RETURN_IF_ERROR(sizeSeries(lo, hi, f.factor, &o->sizes));
  } else {
    o->sizes.clear();
    for (const std::string& text : f.sizes) {
      uint64_t b = 0;
      TALLY_RETURN_IF_ERROR(bytesFlag("--sizes", text, &b));
      o->sizes.push_back(b);
    }
  }
  TALLY_RETURN_IF_ERROR(toCallShape(f, &o->calls));
  TALLY_RETURN_IF_ERROR(parseTypes(f.types, &o->types));
  TALLY_RETURN_IF_ERROR(parseOps(f.ops, &o->ops));
  TALLY_RETURN_IF_ERROR(parseAlgos(f.algos, &o->algos));
  if (f.check != 0 && f.check != 1)
    return Status::invalidUsage("-c: expected 0 or 1, got " + std::to_string(f.check));
  o->check = f.check == 1;
  Status timeout = parseDurationMs(f.timeout, DurationUnit::kNone, &o->timeout_ms);
  if (!timeout.isOk()) return Status::invalidUsage("--timeout: " + timeout.message());
  if (o->timeout_ms <= 0)
    return Status::invalidUsage("--timeout: expected a duration above zero, such as " +
                                std::string(kDurationExamples) + ", got '" + f.timeout + "'");
  o->progress = !f.no_progress;
  if (!f.faults.empty()) TALLY_RETURN_IF_ERROR(parseFaults(f.faults, &o->faults));
  if (!f.duration.empty()) {
    if (f.faults.empty()) return Status::invalidUsage("--duration: only with --fault");
    Status s = parseFaultTime(f.duration, &o->duration_ms);
    if (!s.isOk()) return Status::invalidUsage("--duration: " + s.message());
    if (o->duration_ms <= 0) return Status::invalidUsage("--duration: must be positive");
  }
  if (!f.slow_factor.empty()) {
    TALLY_RETURN_IF_ERROR(parseSlowFactor(f.slow_factor, &o->slow_factor));
    const bool slows = std::any_of(o->faults.begin(), o->faults.end(), [](const Fault& fault) {
      return fault.kind == FaultKind::kSlow;
    });
    if (!slows) return Status::invalidUsage("--slow-factor: only with a slow-reducer fault");
  }
  // "all" means every algorithm this build has: without tally-gloo-bench, Gloo is left out.
  const bool gloo_built = !o->gloo_bench.empty() && ::access(o->gloo_bench.c_str(), X_OK) == 0;
  if (f.algos.find("all") != std::string::npos && !gloo_built) {
    std::erase_if(o->algos, isGloo);
    std::fprintf(stderr,
                 "tally bench: tally-gloo-bench is not built (Gloo is not installed): "
                 "--algo all runs rs and ring\n");
  }
  return Status::ok();
}

}  // namespace

void fillDefaultPaths(BenchOptions* o) {
  if (o->plugin.empty()) o->plugin = commands::defaultPluginPath();
  if (o->reducer.empty()) o->reducer = commands::defaultReducerPath();
  if (o->gloo_bench.empty()) o->gloo_bench = driver::selfDirectory() + "/tally-gloo-bench";
}

commands::Subcommand addBenchCommand(CLI::App& parent) {
  auto options = std::make_shared<BenchOptions>();
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* cmd = parent.add_subcommand(
      "bench",
      "All-reduce bandwidth: the reduction server beside a ring (and Gloo), like all_reduce_perf");
  cmd->footer(
      "Columns: time is the slowest worker's mean, algbw = bytes / time, busbw = algbw x "
      "2(n-1)/n.\nExit status: 0 all results correct, 1 a wrong result or a failed run, 2 bad "
      "options or setup.\nSee docs/bench.md.");
  // A flag given twice keeps its last value, so a script can append to a command line.
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  BenchOptions& o = *options;
  BenchFlags& f = *flags;
  cmd->add_option("-b,--minbytes", f.min_bytes, "Smallest size (bytes; K, M, G suffixes)")
      ->capture_default_str();
  cmd->add_option("-e,--maxbytes", f.max_bytes, "Largest size")->capture_default_str();
  cmd->add_option("-f,--stepfactor", f.factor, "Multiply the size by this between rows")
      ->capture_default_str();
  cmd->add_option("--sizes", f.sizes, "Explicit sizes instead of -b/-e/-f: 4K,1M,64M")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("-n,--iters", o.iters, "Timed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("-w,--warmup_iters", o.warmup, "Warm-up iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  cmd->add_option("-d,--datatype", f.types,
                  "Element types: int8 uint8 int32 uint32 int64 uint64 float16 float32 float64 "
                  "bfloat16 f8e4m3 f8e5m2, a comma list, or all")
      ->capture_default_str();
  cmd->add_option("-o,--op", f.ops, "Reduction: sum, prod, max, min, a comma list, or all")
      ->capture_default_str();
  cmd->add_option("-c,--check", f.check,
                  "Check the warm-up results and the last timed one against the reference (0/1)")
      ->capture_default_str();
  cmd->add_option("--workers", o.workers, "Worker processes (ranks)")
      ->capture_default_str()
      ->check(CLI::Range(2, 64));
  cmd->add_option("--reducers", o.reducers, "tally-reducer processes")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--algo", f.algos,
                  "rs, ring, gloo_ring, gloo_hd, auto (each size through the algorithm Tally's "
                  "tuner has NCCL pick), a comma list of them, both (rs,ring), gloo (both Gloo "
                  "algorithms; float32 sum only) or all (all but auto)")
      ->capture_default_str();
  cmd->add_option("--emulate", o.emulate,
                  "Run every worker and reducer in its own network namespace on a link of this "
                  "rate, e.g. 1gbit or 200mbit (needs root)");
  cmd->add_option("--emulate-burst", o.emulate_burst,
                  "With --emulate: each link's token bucket (tc's burst): what a link lets through "
                  "at once after a pause; a real NIC's is one frame")
      ->capture_default_str();
  cmd->add_option("--emulate-cc", o.emulate_cc,
                  "With --emulate: the nodes' TCP congestion control, the same for every "
                  "algorithm; host: whatever the host's new namespaces get")
      ->capture_default_str();
  cmd->add_option("--calls", f.calls,
                  "The reduction server's CollNet calls: nccl (the calls NCCL's CollNetChain "
                  "proxy makes for each size, 8 in flight) or a size such as 1M (every call that "
                  "size, 8 in flight)")
      ->capture_default_str();
  cmd->add_option("--channels", f.channels, "With --calls nccl: NCCL's CollNet channels (1-8)")
      ->capture_default_str();
  cmd->add_option("--chain-depth", f.chain_depth,
                  "With --calls nccl: GPUs per host (the intra-node chain; smaller chunks)")
      ->capture_default_str();
  cmd->add_option("--nccl-buffsize", f.nccl_buffsize,
                  "With --calls nccl: NCCL_BUFFSIZE (a chunk is at most an eighth of it)")
      ->capture_default_str();
  cmd->add_option("--chunk", f.chunk,
                  "With --calls nccl: the chunk a tuner sets on NCCL 2.30 (getChunkSize), at "
                  "most NCCL_BUFFSIZE / 8; tuner: the one Tally's tuner asks for at each size");
  cmd->add_option("--json", o.json_path, "Write the options, the machine and every row here");
  cmd->add_option("--plot", o.plot_path, "Draw algbw against size into this PNG (gnuplot)");
  cmd->add_option("--plugin", o.plugin, "libnccl-net-tally.so (default: next to tally)");
  cmd->add_option("--reducer", o.reducer, "tally-reducer (default: next to tally)");
  cmd->add_option("--gloo-bench", o.gloo_bench, "tally-gloo-bench (default: next to tally)");
  cmd->add_option("--table-version", o.table_version,
                  "Plugin table version (8..12; default newest)")
      ->check(CLI::Range(0, 12));
  cmd->add_option("--reducer-threads", o.reducer_threads,
                  "--threads for each tally-reducer (default: the machine's cores shared among "
                  "the reducers, at least 1)")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--timeout", f.timeout,
                  "Bound on each phase (Tally workers, Gloo ranks), with a unit: 90s, 10m (a "
                  "bare number is refused)")
      ->capture_default_str();
  cmd->add_option("--fault", f.faults,
                  "Faults to inject, a comma list of EVENT[:REDUCER]@TIME: kill-reducer, "
                  "stop-reducer, cont-reducer, restart-reducer (or restart), and with --emulate "
                  "slow-reducer and heal-reducer (the reducer's link at RATE / --slow-factor, "
                  "then back), e.g. kill-reducer:1@5s,restart@15s; prints a bandwidth timeline "
                  "of rs at the largest size instead of the table");
  cmd->add_option("--duration", f.duration,
                  "With --fault: how long the calls run, with a unit such as 25s (default: the "
                  "last fault + 10s, at least 20s)");
  cmd->add_option("--slow-factor", f.slow_factor,
                  "With --fault slow-reducer: the slowed link runs at the --emulate rate divided "
                  "by this, a number above 1 (default 10)");
  cmd->add_flag("--no-progress", f.no_progress, "No progress line on stderr");
  cmd->add_flag("--verbose", o.verbose, "Show the plugin's INFO lines");
  // Test hook, hidden from --help: this rank corrupts its results before checking them.
  cmd->add_option("--debug-corrupt-rank", o.corrupt_rank)->group("");

  return {cmd, [options, flags]() {
            fillDefaultPaths(options.get());
            Status s = toOptions(*flags, options.get());
            if (!s.isOk()) {
              std::fprintf(stderr, "tally bench: %s\n", s.message().c_str());
              return 2;
            }
            return runBench(*options, nullptr);
          }};
}

}  // namespace tally::bench
