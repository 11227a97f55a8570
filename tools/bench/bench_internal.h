// SPDX-License-Identifier: Apache-2.0
// Pieces of `tally bench` shared by its files (tools/bench/bench*.cc); not an interface for
// anything else. Everything here runs in the bench's parent process on its main thread, except
// the worker functions (in a forked worker), RunGuard's watcher thread and a fault run's
// injector thread (bench_fault.cc).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/params.h"
#include "common/status.h"
#include "common/store.h"
#include "tools/bench/bench.h"
#include "tools/driver/coll_driver.h"
#include "tools/driver/emulated_cluster.h"
#include "tools/driver/plugin_library.h"
#include "tools/driver/process.h"
#include "tools/driver/ring_allreduce.h"

namespace tally::bench {

// --- options (bench_options.cc) ---

// Everything runBench checks before it starts a process. *gloo_runs: Gloo was asked for and the
// run includes float32 sum, the one case tally-gloo-bench measures.
Status validateOptions(const BenchOptions& options, bool* gloo_runs);

// The sizes of a type in bytes: each size rounded to whole elements (elementCount), in order,
// without repeats.
std::vector<uint64_t> typeSizes(const BenchOptions& options, DataType type);

// Whether --algo named `a`.
inline bool has(const std::vector<Algo>& algos, Algo a) {
  return std::find(algos.begin(), algos.end(), a) != algos.end();
}

// --- faults (bench_fault_options.cc) ---

// "5s" when whole seconds, else "1500ms".
std::string timeText(int64_t ms);
// The checks of --fault that need other flags: --algo includes rs, every reducer index is below
// --reducers, every fault is before the end of the run, slow and heal have --emulate, and
// --slow-factor is above 1.
Status validateFaultOptions(const BenchOptions& options);
// The rate a slow or heal fault sets the reducer's link to (dividedRate of --emulate by
// --slow-factor, or --emulate itself); empty for the other faults.
std::string faultRate(const BenchOptions& options, const Fault& fault);
// The options a fault run measures with: rs only, the first type and op, the largest size, the
// duration filled in.
BenchOptions faultRunOptions(const BenchOptions& given);

// --- worker (bench_worker.cc) ---

struct WorkerPlan {
  const BenchOptions* options = nullptr;
  std::string reducer_list;                    // TALLY_REDUCERS
  int version = 0;                             // table version
  std::string store_dir;                       // FileStore directory shared with the parent
  std::string ifname;                          // TALLY_SOCKET_IFNAME: "lo", or "eth0" inside a node
  const driver::EmulatedNode* node = nullptr;  // the node of rank r is node r; null: loopback
  std::vector<pid_t> reducer_pids;  // rank 0 reads their CPU around each reduction-server row
};

// A worker's bounds on store waits and barriers, and on a stretch of a comm without progress
// (slow emulated links).
inline constexpr int64_t kStoreTimeoutMs = 120000;
inline constexpr int64_t kCommTimeoutMs = 120000;
// The inputs of size B are fillInput(..., kInputSeed + B, ...).
inline constexpr uint64_t kInputSeed = 0x7a11;

// The body of one forked worker: enters its node, sets the plugin's environment, runs every
// (type, op, size, algorithm) the options ask for and writes the results to the store. Returns
// the worker's exit code.
int runBenchWorker(const WorkerPlan& plan, int rank);

// A worker's side of a run once it is set up: its store, the plugin, and the comms it asked for.
// Declared in the order they are made, so they are destroyed in reverse.
struct WorkerSession {
  std::unique_ptr<Store> store;
  std::unique_ptr<driver::PluginLibrary> lib;
  std::unique_ptr<driver::CollNetApi> coll_api;
  std::unique_ptr<driver::CollComm> coll;
  std::unique_ptr<driver::NetApi> net_api;
  std::unique_ptr<driver::RingComm> ring;
};
// In a forked worker: enters its node, opens the store, sets the plugin's environment (what the
// caller set before wins), loads the plugin and sets up a CollComm (`server`) and a RingComm
// (`ring`). Returns 0, or the worker's exit code after printing why: 2 before the plugin is
// loaded, 3 when a comm cannot be set up.
int openWorker(const WorkerPlan& plan, int rank, bool server, bool ring, WorkerSession* out);
// The end of a worker: a barrier, so no comm is closed while a peer still reads from it, then
// every comm closed. Returns 0, or 5 after printing why.
int closeWorker(const WorkerPlan& plan, int rank, WorkerSession* session);
// Prints "<command>: worker <rank>: <what>: <status>" and returns false when s is an error.
bool reportWorker(const BenchOptions& options, int rank, const Status& s, const char* what);

// The body of one forked worker of a fault run (bench_fault_worker.cc): warm-up calls, a barrier,
// then calls back to back until the duration has passed, each checked; writes faultResultKey.
int runFaultWorker(const WorkerPlan& plan, int rank);

// Store keys shared by the workers and the parent.
// "res/<algo>/<type>/<op>/<bytes>/<rank>" = "<mean us> <wrong or -1> <cpu s> <reducer cpu s>"
// (the CPU seconds of the timed iterations: this worker's, and on rank 0 of a reduction-server
// row the reducers' together; -1 where unknown or not applicable)
std::string resultKey(Algo algo, DataType type, ReduceOp op, uint64_t bytes, int rank);
// "skip/<algo>/<type>/<op>" exists when the plugin does not support that pair (written by rank 0).
std::string skipKey(Algo algo, DataType type, ReduceOp op);
// Rank 0 writes what it starts next: "rs float32 sum 16 MiB 3/8".
inline constexpr char kProgressKey[] = "progress";
// Fault runs. Rank 0 writes the start of the timed calls, in ms of the steady clock
// (CLOCK_MONOTONIC, which every process of the machine and its network namespaces shares), after
// the barrier that ends the warm-up; and the number of calls every worker makes, once it sees the
// duration has passed. "fault/res/<rank>" = "<wrong or -1> <calls> <completion ms>..." (each
// call's completion, ms after the start).
inline constexpr char kFaultStartKey[] = "fault/start";
inline constexpr char kFaultCallsKey[] = "fault/calls";
std::string faultResultKey(int rank);

// --- children and signals (bench_children.cc) ---

// Cleanup on SIGINT and SIGTERM while a run is going: install() sets handlers that wake a watcher
// thread; the watcher takes mutex(), SIGKILLs every registered child, runs the cleanup function,
// and _exits with 128 + the signal. The destructor restores the previous handlers and stops the
// watcher. One RunGuard at a time per process.
class RunGuard {
 public:
  static Status install(std::unique_ptr<RunGuard>* out);
  ~RunGuard();
  RunGuard(const RunGuard&) = delete;
  RunGuard& operator=(const RunGuard&) = delete;

  void addChild(pid_t pid);
  void removeChild(pid_t pid);
  // Runs on the watcher thread with mutex() held; set it before creating what it removes.
  void setCleanup(std::function<void()> cleanup);
  // Held by the main thread while it creates or destroys what the cleanup removes.
  std::mutex& mutex() { return mutex_; }

 private:
  RunGuard() = default;
  void watch();
  std::mutex mutex_;
  std::vector<pid_t> children_;
  std::function<void()> cleanup_;
  int pipe_[2] = {-1, -1};
  std::thread watcher_;
};

// Forks n children; child i resets SIGINT/SIGTERM to their defaults, dies with the parent, runs
// body(i) and _exits with its result. Registers the pids with the guard, calls tick() about every
// 100 ms while waiting, SIGKILLs what still runs after timeout_ms, or 10 s after the first child
// that failed (reported as timed out).
Status runChildren(RunGuard* guard, int n, const std::function<int(int)>& body, int64_t timeout_ms,
                   const std::function<void()>& tick, std::vector<driver::WorkerExit>* exits);

// The progress line on stderr: rewritten in place on a terminal, otherwise a plain line when the
// label changed and at least 5 s passed since the last one.
class Progress {
 public:
  explicit Progress(bool enabled);
  void show(const std::string& label);
  void clear();  // erases the line on a terminal

 private:
  bool enabled_;
  bool tty_;
  bool shown_ = false;
  std::string last_;
  std::chrono::steady_clock::time_point last_plain_{};
};

// --- setup (bench_env.cc) ---

// The newest table version both of the plugin's tables export, or `wanted` when it does.
Status pickVersion(const std::string& plugin, int wanted, int* out);

// What a run stands on: the signal guard, the scratch directory and its store, the emulated
// cluster (with --emulate) and, when `server`, the reducers. The destructor stops the reducers,
// removes the cluster, then the directory; SIGINT or SIGTERM meanwhile does the same from the
// guard's watcher. One thread at a time; the options must outlive it.
class BenchEnv {
 public:
  // On failure what was made is taken down again; the message is for the user.
  static Status create(const BenchOptions& options, bool server, std::unique_ptr<BenchEnv>* out);
  ~BenchEnv();
  BenchEnv(const BenchEnv&) = delete;
  BenchEnv& operator=(const BenchEnv&) = delete;

  RunGuard* guard() { return guard_.get(); }
  Store* store() { return store_.get(); }
  const std::string& dir() const { return dir_->path(); }
  const std::vector<driver::EmulatedNode>* nodes() const;  // null on loopback
  const driver::EmulatedNode* workerNode(int rank) const;  // null on loopback
  std::string reducerList() const;                         // TALLY_REDUCERS
  std::vector<pid_t> reducerPids() const;

  // For --fault. kill: SIGKILL reducer i and reap it. signal: send it `sig` (SIGSTOP, SIGCONT).
  // restart: a new tally-reducer at the address reducer i had (in its node when emulating) in
  // its place, registered with the guard; the calling thread becomes its parent, and it dies when
  // that thread ends (PR_SET_PDEATHSIG), so that thread must outlive the run or stop it first
  // (stopReducer). setReducerRate: reducer i's link, both ways, at `rate`
  // (EmulatedCluster::setRate); kInvalidUsage without an emulated cluster.
  void killReducer(int i);
  void signalReducer(int i, int sig);
  Status restartReducer(int i);
  Status stopReducer(int i);
  Status setReducerRate(int i, const std::string& rate);

 private:
  explicit BenchEnv(const BenchOptions& options) : o_(options) {}
  driver::ReducerOptions reducerOptions(int i, const std::string& listen) const;
  // Reducer i's node in the emulated cluster: the reducers' nodes come after the workers'.
  int reducerNode(int i) const { return o_.workers + i; }

  const BenchOptions& o_;
  // Declared before guard_, so that it outlives the guard whose cleanup reads it.
  std::unique_ptr<driver::EmulatedCluster> cluster_;
  std::unique_ptr<RunGuard> guard_;
  std::unique_ptr<driver::TempDir> dir_;
  std::unique_ptr<Store> store_;
  std::vector<std::unique_ptr<driver::ReducerProcess>> reducers_;
};

// --- Gloo (bench_gloo.cc) ---

// Runs tally-gloo-bench's ranks for float32 sum on every size (in the workers' nodes when
// emulating) and appends one row per (Gloo algorithm, size) to *rows (absent rows when a rank
// failed; the failure is printed). Ok unless the ranks could not be started.
Status runGloo(const BenchOptions& options, RunGuard* guard,
               const std::vector<driver::EmulatedNode>* nodes, const std::string& dir,
               Progress* progress, std::vector<BenchRow>* rows, bool* failed);

// --- report (bench_report.cc) ---

struct RunInfo {
  int version = 0;
  std::string reducer_list;
  std::string hostname;
  unsigned cores = 0;
  std::vector<std::string> notes;  // printed under the header and stored in the JSON
};

RunInfo machineInfo();
void printHeader(const BenchOptions& options, const RunInfo& info);

// One line of the table: a (type, op, size).
struct TableLine {
  DataType type;
  ReduceOp op;
  uint64_t bytes;
};

// Prints the table a line at a time, so each size shows as soon as it is measured: printHead()
// once, then printNext() for each line in order (next() says which; the caller calls it once
// `rows` holds that line's result of every algorithm, present or not), then finish(), which
// prints the lines still due and the closing line and returns the wrong elements in `rows`.
class TablePrinter {
 public:
  explicit TablePrinter(const BenchOptions& options);
  void printHead();
  const TableLine* next() const;  // null when every line was printed
  void printNext(const std::vector<BenchRow>& rows);
  uint64_t finish(const std::vector<BenchRow>& rows);

 private:
  const BenchOptions& o_;
  std::vector<TableLine> lines_;
  size_t next_ = 0;
};
Status writeJson(const BenchOptions& options, const RunInfo& info,
                 const std::vector<BenchRow>& rows, int exit_code);
bool gnuplotAvailable();
Status writePlot(const BenchOptions& options, const std::vector<BenchRow>& rows);

// algbw and busbw of a row from its bytes and time.
void fillBandwidth(int workers, BenchRow* row);
// The CPU columns of a row from its CPU seconds (tools/bench/cpu_cost.h defines "moved").
void fillCpuCost(int workers, int iters, BenchRow* row);

// Reduction server over ring, and over Gloo's better algorithm, per (type, op, size) in the
// table's order; -1 where either side is missing. Empty when no ratio applies.
struct RatioRow {
  DataType type;
  ReduceOp op;
  uint64_t bytes;
  double over_ring;
  double over_gloo;
  double auto_over_best;  // auto over the better of rs and ring
};
std::vector<RatioRow> computeRatios(const BenchOptions& options, const std::vector<BenchRow>& rows);

// Runs a gnuplot script (written to a scratch file first), bounded in time.
Status runGnuplotScript(const std::string& script);
// The script's first lines: a PNG terminal of width x height, pngcairo when gnuplot has it.
std::string gnuplotTerminal(int width, int height);

// --- fault runs (bench_fault.cc, bench_fault_report.cc) ---

// `tally bench --fault`: checks the options, sets up as runBench does, runs the workers while a
// thread injects the faults, and reports the timeline. Returns the exit code (0, 1 or 2).
int runFaultBench(const BenchOptions& given);

// "kill-reducer" and the others: the event's long name.
const char* faultEventName(FaultKind kind);

struct InjectedFault {
  double at_ms = -1;  // when it was done, ms after the start; -1: never (the run ended first)
  std::string error;  // why it failed (a restart that could not start); empty when it worked
};

// What a fault run measured.
struct FaultRunData {
  std::vector<InjectedFault> injected;  // one per fault of the options, in their order
  // Call i completed at completions_ms[i], ms after the start: when its slowest worker had it.
  std::vector<double> completions_ms;
  int64_t wrong = 0;    // elements wrong over every worker and call; -1: not checked
  bool failed = false;  // a worker or a fault failed (printed when found)
};

struct FaultBucket {
  double start_ms = 0;
  int calls = 0;               // calls completed in [start, start + bucket)
  double algbw_gbs = 0;        // calls x bytes / bucket length
  std::vector<size_t> faults;  // indices of the faults done in it
};
// The time from one fault (or the start) to the next (or the end of the duration), and the mean
// algbw of the buckets wholly inside it.
struct FaultSpan {
  int from = -1;  // fault index; -1: the start
  int to = -1;    // fault index; -1: the end
  double from_ms = 0, to_ms = 0;
  int buckets = 0;        // whole buckets inside
  double algbw_gbs = -1;  // their mean; -1 when there are none
  // bytes / the median time between consecutive completions inside the span: free of the
  // buckets' rounding to whole calls, which matters once a call takes about a bucket; -1: fewer
  // than two completions inside.
  double call_algbw_gbs = -1;
};
// The longest stretch without a completion from a fault until the next fault (or the end of the
// duration); a gap that spans either fault is cut at it.
struct FaultStall {
  size_t fault = 0;
  double from_ms = 0, to_ms = 0;
  bool resumed = false;  // a call completed after the fault
  double first_ms = -1;  // the first completion after the fault; -1: none
};
struct FaultTimeline {
  int64_t bucket_ms = 0;
  std::vector<FaultBucket> buckets;
  std::vector<FaultSpan> spans;
  std::vector<FaultStall> stalls;
  double median_gap_ms = -1;  // between consecutive completions over the run; -1: fewer than 2
};

// 500 ms, or the duration / 60 rounded up to 100 ms when that is longer.
int64_t faultBucketMs(int64_t duration_ms);
// When fault i happened: when it was injected, else when it was due.
double faultMs(const BenchOptions& options, const FaultRunData& data, size_t i);
FaultTimeline computeTimeline(const BenchOptions& options, const FaultRunData& data);
// The timeline table, the summary and the verdict on stdout; returns the exit code (1 when an
// element was wrong or something failed, else 0).
int printFaultReport(const BenchOptions& options, const FaultRunData& data,
                     const FaultTimeline& timeline);
Status writeFaultJson(const BenchOptions& options, const RunInfo& info, const FaultRunData& data,
                      const FaultTimeline& timeline, int exit_code);
Status writeFaultPlot(const BenchOptions& options, const FaultRunData& data,
                      const FaultTimeline& timeline);

}  // namespace tally::bench
