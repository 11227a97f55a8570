// SPDX-License-Identifier: Apache-2.0
// Process helpers for the demo and the functional tests: worker processes standing in for the
// ranks of an NCCL job (forked, or forked and exec'd as a fresh program), and tally-reducer
// processes started with fork/exec.
//
// Every wait is bounded. Children ask the kernel to kill them when the parent dies
// (PR_SET_PDEATHSIG), so a crashed test leaves no orphans behind. Not thread-safe: call from one
// thread of the parent.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tools/driver/emulated_cluster.h"

namespace tally::driver {

struct WorkerExit {
  int rank = -1;
  int exit_code = -1;  // valid when the child exited normally
  int signal = 0;      // the signal that ended it, 0 if none
  bool timed_out = false;
  bool ok() const { return signal == 0 && !timed_out && exit_code == 0; }
  std::string describe() const;  // "rank 2: exit 1", "rank 0: killed by signal 9 (timeout)"
};

// What a caller of runWorkers may add to the plain fork-and-wait.
struct WorkerHooks {
  // In the parent: each child's pid right after its fork, and again once it has been reaped
  // (tally bench keeps the live pids for its signal handler).
  std::function<void(pid_t)> started;
  std::function<void(pid_t)> reaped;
  // In the parent, about every 100 ms while waiting (a progress line).
  std::function<void()> tick;
  // After the first child that fails, the others get this long, then are killed and reported
  // as timed out (a failed rank usually leaves its peers waiting); 0: the whole timeout.
  int64_t failure_grace_ms = 0;
  // In each child, before body: SIGINT and SIGTERM back to their default actions, undoing
  // handlers the parent installed.
  bool default_signals = false;
};

// Forks `nworkers` children; child `rank` dies with the parent, runs body(rank) and _exits with
// its return value (an exception escaping body exits with 70). Waits up to timeout_ms for all of
// them; children still running then are killed with SIGKILL and reported as timed out. Flushes
// stdio before forking. Returns ok when every child was reaped (whatever their exit codes);
// exits holds one entry per rank in rank order.
Status runWorkers(int nworkers, const std::function<int(int rank)>& body, int64_t timeout_ms,
                  std::vector<WorkerExit>* exits, const WorkerHooks& hooks = {});

// One exec'd worker: the program, its arguments (argv[1] on), and variables added to the
// environment it inherits from the parent (replacing one of the same name).
struct WorkerProgram {
  std::string binary;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
};

// runWorkers with a fresh program in every child: child `rank` dies with the parent and execs
// program(rank) at once, so none of the parent's code or state runs in it and the parent may
// have threads of its own while its workers run. (ThreadSanitizer instruments an exec'd child
// fully; a forked child of a multi-threaded parent it ignores, or dies in.) A child whose exec
// fails exits 127. hooks.default_signals does nothing here: exec resets caught signals to their
// defaults. Otherwise as runWorkers: every wait bounded, one entry per rank in *exits.
Status runExecWorkers(int nworkers, const std::function<WorkerProgram(int rank)>& program,
                      int64_t timeout_ms, std::vector<WorkerExit>* exits,
                      const WorkerHooks& hooks = {});

// The end of a forked child: runs body(index), reports an exception escaping it on stderr as
// "<what> <index>: exception: ...", flushes stdio and _exits with body's return value (70 when it
// threw). Never returns.
[[noreturn]] void runChildBody(const std::function<int(int)>& body, int index, const char* what);

// True when every entry is ok(); otherwise appends one line per failed rank to *why.
bool allWorkersOk(const std::vector<WorkerExit>& exits, std::string* why);

// How spawnReducer() starts tally-reducer.
struct ReducerSpawn {
  std::vector<std::string> args;  // every argument after the binary
  // Added to the child's environment, replacing a variable of the same name.
  std::vector<std::pair<std::string, std::string>> env;
  // A named network namespace (an EmulatedNode's netns) the child enters before exec; empty:
  // the caller's namespace. Failing to enter it, the child exits 73.
  std::string netns;
  // In the child just before exec (limits, another user); system calls only.
  std::function<void()> in_child;
};
// A started child: its pid, and the read end of the pipe that is its stdout (close-on-exec).
struct SpawnedReducer {
  pid_t pid = -1;
  int stdout_fd = -1;
};
// Forks and execs `binary` as `spawn` says, and returns at once: the caller reads stdout_fd and
// reaps pid. The child dies with the parent (until in_child changes its user). Everything the
// child needs is built before the fork. The one way tests and tools start a reducer process.
Status spawnReducer(const std::string& binary, const ReducerSpawn& spawn, SpawnedReducer* out);

// Where and how launch() starts a reducer.
struct ReducerOptions {
  std::string listen = "127.0.0.1:0";  // the --listen value
  // A named network namespace (an EmulatedNode's netns) the child enters before exec; empty:
  // the caller's namespace.
  std::string netns;
  std::vector<std::string> extra_args;  // after --listen
};
// A reducer in an emulated node: in its namespace, listening on its address with port 0.
ReducerOptions reducerInNode(const EmulatedNode& node, std::vector<std::string> extra_args = {});

// A running `tally-reducer --listen 127.0.0.1:0 [extra args]`. The constructor-free factory
// start() waits for its ready line "tally-reducer listening on HOST:PORT" on stdout. The rest
// of its stdout (one line at most) stays in the pipe; stderr is inherited. No thread is started,
// so the caller may fork afterwards. The destructor stops it.
class ReducerProcess {
 public:
  static Status start(const std::string& binary, const std::vector<std::string>& extra_args,
                      int64_t timeout_ms, std::unique_ptr<ReducerProcess>* out);
  // start() with a chosen listen address and, optionally, inside a network namespace (the child
  // enters it between fork and exec; failing that, it exits 73 and launch() reports that it
  // ended before its ready line). A different name, not an overload, so start(b, {}, ...) stays
  // unambiguous.
  static Status launch(const std::string& binary, const ReducerOptions& options, int64_t timeout_ms,
                       std::unique_ptr<ReducerProcess>* out);
  ~ReducerProcess();
  ReducerProcess(const ReducerProcess&) = delete;
  ReducerProcess& operator=(const ReducerProcess&) = delete;

  // "HOST:PORT" from the ready line.
  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }
  // SIGTERM, wait up to timeout_ms, then SIGKILL. Ok when it exited with status 0 after SIGTERM
  // (or died of SIGTERM). Idempotent.
  Status stop(int64_t timeout_ms = 5000);
  // SIGKILL now and reap, for kill-a-peer cases.
  void kill();

 private:
  ReducerProcess(pid_t pid, int out_fd, std::string address);
  pid_t pid_;
  int out_fd_;
  std::string address_;
  bool reaped_ = false;
};

// Starts `count` reducers; on failure stops those already started.
Status startReducers(const std::string& binary, int count,
                     const std::vector<std::string>& extra_args, int64_t timeout_ms,
                     std::vector<std::unique_ptr<ReducerProcess>>* out);
// Starts one reducer per entry of `each` (e.g. reducerInNode() for every reducer node); on
// failure stops those already started and leaves *out untouched.
Status startReducers(const std::string& binary, const std::vector<ReducerOptions>& each,
                     int64_t timeout_ms, std::vector<std::unique_ptr<ReducerProcess>>* out);
// "a:1,b:2" from the reducers' addresses, the TALLY_REDUCERS syntax.
std::string reducerList(const std::vector<std::unique_ptr<ReducerProcess>>& reducers);

// Path of the running executable (/proc/self/exe); "" when it cannot be read.
std::string selfPath();
// Directory of the running executable (/proc/self/exe), without a trailing slash.
std::string selfDirectory();

// Makes a fresh directory under $TMPDIR (or /tmp) named tally-<what>-XXXXXX; removes it and its
// files (one level) when destroyed.
class TempDir {
 public:
  static Status create(const std::string& what, std::unique_ptr<TempDir>* out);
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace tally::driver
