// SPDX-License-Identifier: Apache-2.0
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
// With faults (--fault), the run is different: the reduction server alone at one size, calls back
// to back for a duration while reducers are killed, frozen, resumed and restarted, or their
// emulated links slowed and healed, at given times; the output is a bandwidth timeline and the
// stall after each fault (bench_fault*.cc).
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
#include "model/collnet.h"
#include "tools/driver/emulated_cluster.h"
#include "tools/driver/nccl_calls.h"

namespace tally::bench {

// kAuto: each size through the algorithm Tally's tuner would have NCCL pick (bench_auto.cc).
enum class Algo { kServer, kRing, kGlooRing, kGlooHalvingDoubling, kAuto };
inline constexpr int kNumAlgos = 5;
const char* algoName(Algo a);  // "rs", "ring", "gloo_ring", "gloo_hd", "auto"
bool isGloo(Algo a);

// --algo: a comma list of rs, ring, gloo_ring, gloo_hd, auto and the shorthands both (rs,ring),
// gloo (gloo_ring,gloo_hd) and all (every one but auto). The result is in the order above,
// without repeats.
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

// --fault: what happens to a reducer, and when (docs/bench.md, "Faults").
enum class FaultKind {
  kKill,     // kill-reducer: SIGKILL
  kStop,     // stop-reducer: SIGSTOP (a frozen reducer)
  kCont,     // cont-reducer: SIGCONT
  kRestart,  // restart-reducer (or restart): a new tally-reducer at the killed one's address
  kSlow,     // slow-reducer: its emulated link, both ways, at the --emulate rate / --slow-factor
  kHeal,     // heal-reducer: its emulated link back at the --emulate rate
};
struct Fault {
  FaultKind kind = FaultKind::kKill;
  int reducer = 0;    // index into the reducers, 0 .. reducers - 1
  int64_t at_ms = 0;  // after the start of the timed calls
  std::string given;  // the item as written, for messages
};
// "kill-reducer:1@5s": the canonical name of a fault (restart spelled out, the time in s when
// whole, else in ms).
std::string faultName(const Fault& fault);
// A time of --fault and --duration, in ms: a duration with its unit, as parseDurationMs reads it
// (common/sizes.h; "5s", "1.5s", "500ms", "2m"); a bare number is refused.
Status parseFaultTime(const std::string& text, int64_t* ms);
// --fault LIST: a comma list of EVENT[:REDUCER]@TIME. The result is in time order (items of one
// time in the order written), with every restart's reducer filled in (no index: the reducer last
// killed before it). Fails, naming the bad item, on bad syntax, on a restart of a reducer not
// dead, a cont of one not stopped, a stop of one not running, a kill of one already dead, a slow
// of a link already slowed and a heal of one not slowed (a link's state is apart from its
// reducer's: a killed reducer's node keeps its link). What depends on other flags (the reducer
// count, the duration, --algo, --emulate for slow and heal) is checked by runBench.
Status parseFaults(const std::string& text, std::vector<Fault>* out);
// --slow-factor: a number above 1 (a decimal fraction allowed), such as 10 or 2.5.
Status parseSlowFactor(const std::string& text, double* factor);
// --duration when not given: the last fault's time plus 10 s, and at least 20 s.
int64_t defaultFaultDuration(const std::vector<Fault>& faults);

// How the table is printed. kBench: nccl-tests shaped rows. kDemo: the `tally demo` table (human
// sizes, server and ring side by side, one #wrong column, a closing verdict line).
enum class TableStyle { kBench, kDemo };

// The shape of the CollNet calls the reduction-server rows make (--calls and its companions).
struct CallShape {
  bool nccl = true;              // NCCL's CollNetChain calls for each size (nccl_calls.h)
  uint64_t fixed_bytes = 0;      // !nccl: every call this size, 8 in flight
  driver::NcclChainShape chain;  // --channels, --chain-depth, --nccl-buffsize, --chunk SIZE
  // --chunk tuner: each size's chunk is the one Tally's tuner asks NCCL 2.30 for (getChunkSize,
  // model/collnet.h), from the setup benchSetup() gives.
  bool tuner_chunk = false;
};

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
  CallShape calls;                                         // --calls
  std::vector<Algo> algos = {Algo::kServer, Algo::kRing};  // --algo
  std::string emulate;                                     // --emulate RATE; empty: loopback
  std::string emulate_burst = driver::EmulationOptions{}.burst;  // --emulate-burst: each link's token bucket (tc syntax)
  std::string emulate_cc = "cubic";     // --emulate-cc: the nodes' TCP congestion control; "host"
  std::string json_path;                // --json FILE
  std::string plot_path;                // --plot FILE.png
  int table_version = 0;                // 0: newest both tables export
  int reducer_threads = 0;      // --reducer-threads; 0: the machine's share (reducerThreadsFor)
  int64_t timeout_ms = 600000;  // bound on each phase (Tally workers, Gloo ranks)
  bool verbose = false;
  bool progress = true;  // a progress line on stderr on long runs
  TableStyle style = TableStyle::kBench;
  std::string command_name = "tally bench";  // prefix of messages
  // --fault: with faults, the run measures the reduction server at one size (the largest), one
  // type and op (the first), calls back to back for duration_ms, and prints a bandwidth timeline
  // instead of the table. Empty: the table.
  std::vector<Fault> faults;
  int64_t duration_ms = 0;  // --duration; 0: defaultFaultDuration(faults)
  double slow_factor = 10;  // --slow-factor: a slow-reducer link runs at emulate / slow_factor
  // Test hook: the worker of this rank flips the low bit of byte 0 of every result before
  // checking it, so the --check path must report wrong elements. -1: off.
  int corrupt_rank = -1;
};

// The bytes of each call of an all-reduce of `bytes`, and the chunk its last call's count is
// rounded up to (0: none).
uint64_t callBytes(const BenchOptions& o, uint64_t bytes);
uint64_t callChunkBytes(const BenchOptions& o, uint64_t bytes);
// "NCCL's CollNetChain calls (2 channels, chain depth 1, NCCL_BUFFSIZE 4 MiB)", or "1 MiB calls".
std::string callShapeText(const CallShape& shape);

// --algo auto (bench_auto.cc): the setup Tally's tuner would see in this run's workers (ranks =
// nodes = workers, the reducers, TALLY_LINK_MBPS as the workers get it, NCCL_BUFFSIZE), and the
// algorithm NCCL would run for an all-reduce of `bytes` with it: kServer when the tuner's
// CollNet cost is the cheapest entry of NCCL's table and the reducers support the type and op,
// else kRing.
model::CollNetSetup benchSetup(const BenchOptions& o);
Algo autoPick(const BenchOptions& o, uint64_t bytes, bool server_supported);

// The --threads each tally-reducer gets: --reducer-threads, else the machine's cores shared
// among the reducers (at least 1). Every reducer runs on this machine, where on a cluster each
// has its own host; with their own default (every core each) the loops would outnumber the
// cores `reducers` times over.
int reducerThreadsFor(const BenchOptions& o);

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
  // The bytes that crossed the workers' and the reducers' sockets, in and out (cpu_cost.h; 0:
  // none or unknown), and the CPU seconds per GiB of them; -1: unknown, or no reducers.
  uint64_t worker_socket_bytes = 0;
  uint64_t reducer_socket_bytes = 0;
  double worker_cpu_per_socket_gib = -1;
  double reducer_cpu_per_socket_gib = -1;
  Algo picked = Algo::kServer;  // kAuto rows: the algorithm it ran (autoPick)
  bool present = false;         // false: no result (error reported separately, or skipped)
  bool skipped = false;         // not run on purpose (e.g. Gloo for a type other than float32 sum)
};

// Element count and bytes of one size for a type: count = max(1, bytes / size of the type),
// bytes = count x size, as nccl-tests rounds.
uint64_t elementCount(uint64_t bytes, DataType type);

// Checks the options (2 and a message on stderr when wrong), runs the benchmark, prints the table
// to stdout and fills *rows (may be null). Returns the process exit code: 0 when every run
// finished with no wrong element, 1 otherwise, 2 for bad options or a failed setup.
int runBench(const BenchOptions& options, std::vector<BenchRow>* rows);

}  // namespace tally::bench
