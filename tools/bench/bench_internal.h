// Pieces of `tally bench` shared by its files (tools/bench/bench*.cc); not an interface for
// anything else. Everything here runs in the bench's parent process on its main thread, except
// runBenchWorker (in a forked worker) and RunGuard's watcher thread.
#pragma once

#include <sys/types.h>

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
#include "tools/bench/bench.h"
#include "tools/driver/emulated_cluster.h"
#include "tools/driver/process.h"

namespace tally::bench {

// --- options (bench_options.cc) ---

// Everything runBench checks before it starts a process. *gloo_runs: Gloo was asked for and the
// run includes float32 sum, the one case tally-gloo-bench measures.
Status validateOptions(const BenchOptions& options, bool* gloo_runs);

// The sizes of a type in bytes: each size rounded to whole elements (elementCount), in order,
// without repeats.
std::vector<uint64_t> typeSizes(const BenchOptions& options, DataType type);

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

// The body of one forked worker: enters its node, sets the plugin's environment, runs every
// (type, op, size, algorithm) the options ask for and writes the results to the store. Returns
// the worker's exit code.
int runBenchWorker(const WorkerPlan& plan, int rank);

// Store keys shared by the workers and the parent.
// "res/<algo>/<type>/<op>/<bytes>/<rank>" = "<mean us> <wrong or -1> <cpu s> <reducer cpu s>"
// (the CPU seconds of the timed iterations: this worker's, and on rank 0 of a reduction-server
// row the reducers' together; -1 where unknown or not applicable)
std::string resultKey(Algo algo, DataType type, ReduceOp op, uint64_t bytes, int rank);
// "skip/<algo>/<type>/<op>" exists when the plugin does not support that pair (written by rank 0).
std::string skipKey(Algo algo, DataType type, ReduceOp op);
// Rank 0 writes what it starts next: "rs float32 sum 16 MiB 3/8".
inline constexpr char kProgressKey[] = "progress";

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
};
std::vector<RatioRow> computeRatios(const BenchOptions& options, const std::vector<BenchRow>& rows);

}  // namespace tally::bench
