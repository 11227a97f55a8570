// `tally bench`: all-reduce bandwidth of the reduction server beside a pipelined ring all-reduce
// over Tally's own point-to-point net (and, when built, Gloo's ring-chunked and halving-doubling
// all-reduce), shaped like nccl-tests' all_reduce_perf. `tally demo` is a preset of it.
//
// It starts every process itself: `reducers` tally-reducer processes and `workers` forked worker
// processes that load the plugin and drive its tables as NCCL does. By default everything runs on
// loopback; with `emulate` set (e.g. "1gbit") every worker and reducer runs in its own network
// namespace behind a link capped at that rate (tools/driver/emulated_cluster.h; needs root), and
// Gloo's ranks run in the workers' namespaces.
//
// One row per (type, op, algorithm, size): bytes, count, time (us, the slowest worker's mean over
// the timed iterations), algbw = bytes / time, busbw = algbw x 2(n-1)/n (nccl-tests' all-reduce
// convention, n = workers), and #wrong (elements that differ from the independent reference of
// tools/driver/reference.h, summed over workers and iterations; checked when `check`), and the CPU
// cost: the CPU seconds (user + system) the workers and the reducers spent over the timed
// iterations, per GiB moved (bytes x iterations x workers, tools/bench/cpu_cost.h). The table
// prints one line per (type, op, size) with a group of columns per algorithm, then the ratio of
// reduction server to ring (and to Gloo's best). docs/bench.md has the columns and the JSON.
//
// Cleanup: reducers, workers and Gloo ranks die with the bench (PR_SET_PDEATHSIG); the emulated
// cluster and the scratch directory are removed on return and when SIGINT or SIGTERM arrives
// during runBench (exit status 130 or 143 then).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/types.h"

namespace tally::bench {

enum class Algo { kServer, kRing, kGlooRing, kGlooHalvingDoubling };
inline constexpr int kNumAlgos = 4;
const char* algoName(Algo a);  // "rs", "ring", "gloo_ring", "gloo_hd"
bool isGloo(Algo a);

// --algo: a comma list of rs, ring, gloo_ring, gloo_hd and the shorthands both (rs,ring), gloo
// (gloo_ring,gloo_hd) and all (every one). The result is in the order above, without repeats.
Status parseAlgos(const std::string& text, std::vector<Algo>* out);
// The bench's name of a type: float16, float32 and float64 spelled out, the others as
// dataTypeName(). parseDataType reads every one back.
const char* typeLabel(DataType type);
// -d: a comma list of type names (typeLabel, or any name parseDataType knows) or "all";
// -o: op names or "all".
Status parseTypes(const std::string& text, std::vector<DataType>* out);
Status parseOps(const std::string& text, std::vector<ReduceOp>* out);
// -b .. -e by -f: min, min*f, ... while <= max. kInvalidUsage when min is 0, min > max or f < 2.
Status sizeSeries(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor,
                  std::vector<uint64_t>* out);
// A tc rate: a number with bit, kbit, mbit, gbit or bps, kbps, mbps, gbps ("200mbit");
// parseTcRate() (link_rate.h) is the grammar.
bool validRate(const std::string& rate);

// How the table is printed. kBench: nccl-tests shaped rows. kDemo: the `tally demo` table (human
// sizes, server and ring side by side, one #wrong column, a closing verdict line).
enum class TableStyle { kBench, kDemo };

struct BenchOptions {
  std::string plugin;      // libnccl-net-tally.so
  std::string reducer;     // tally-reducer
  std::string gloo_bench;  // tally-gloo-bench; empty when not built
  int workers = 4;
  int reducers = 2;
  std::vector<uint64_t> sizes;                             // bytes; -b/-e/-f or --sizes fill it
  int iters = 5;                                           // -n
  int warmup = 2;                                          // -w
  std::vector<DataType> types = {DataType::kFloat32};      // -d
  std::vector<ReduceOp> ops = {ReduceOp::kSum};            // -o
  bool check = true;                                       // -c
  std::vector<Algo> algos = {Algo::kServer, Algo::kRing};  // --algo
  std::string emulate;                                     // --emulate RATE; empty: loopback
  std::string emulate_cc = "cubic";  // --emulate-cc: the nodes' TCP congestion control; "host"
  std::string json_path;                                   // --json FILE
  std::string plot_path;                                   // --plot FILE.png
  int table_version = 0;                                   // 0: newest both tables export
  int reducer_threads = 0;                                 // 0: tally-reducer's default
  int64_t timeout_ms = 600000;  // bound on each phase (Tally workers, Gloo ranks)
  bool verbose = false;
  bool progress = true;  // a progress line on stderr on long runs
  TableStyle style = TableStyle::kBench;
  std::string command_name = "tally bench";  // prefix of messages
  // Test hook: the worker of this rank flips the low bit of byte 0 of every result before
  // checking it, so the --check path must report wrong elements. -1: off.
  int corrupt_rank = -1;
};

struct BenchRow {
  Algo algo = Algo::kServer;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  uint64_t bytes = 0;  // count x element size
  uint64_t count = 0;
  double time_us = 0;
  double algbw_gbs = 0;  // 10^9 bytes per second
  double busbw_gbs = 0;
  int64_t wrong = 0;  // -1: not checked
  // CPU seconds over the timed iterations, user + system: all workers together, and all reducers
  // together (0 for the algorithms without reducers); -1: unknown.
  double worker_cpu_s = -1;
  double reducer_cpu_s = -1;
  double worker_cpu_per_gib = -1;  // worker_cpu_s per GiB moved; -1: unknown
  double reducer_cpu_per_gib = -1;
  bool present = false;  // false: no result (error reported separately, or skipped)
  bool skipped = false;  // not run on purpose (e.g. Gloo for a type other than float32 sum)
};

// Element count and bytes of one size for a type: count = max(1, bytes / size of the type),
// bytes = count x size, as nccl-tests rounds.
uint64_t elementCount(uint64_t bytes, DataType type);

// Checks the options (2 and a message on stderr when wrong), runs the benchmark, prints the table
// to stdout and fills *rows (may be null). Returns the process exit code: 0 when every run
// finished with no wrong element, 1 otherwise, 2 for bad options or a failed setup.
int runBench(const BenchOptions& options, std::vector<BenchRow>* rows);

}  // namespace tally::bench
