// SPDX-License-Identifier: Apache-2.0
// Worker processes that are the test program itself, exec'd again: a test registers a worker
// body under a name, and runExecWorkers starts copies of the running program that run only that
// body, as ranks 0 to n-1, with the parameters the test gave them. Each worker is a fresh
// process, not a fork of the test process: the test may have threads of its own while its
// workers run (a fault injector), and ThreadSanitizer instruments the workers fully, which it
// does not do for the forked child of a multi-threaded process.
//
// A test program using it links tally_test_exec_main, whose main() runs the worker its command
// line names (`--tally-worker NAME RANK name=value...`) or else the gtest tests, in place of
// GTest::gtest_main. Nothing of the test process reaches a worker but its parameters, its
// environment and its working directory: a worker opens the store by its directory, not through
// the test's object.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "test/support/cluster.h"
#include "tools/driver/process.h"

namespace tally::functional {

// A worker's parameters: names and text values, on its command line as name=value (a name holds
// no '='; a value may hold anything but a NUL).
class WorkerParams {
 public:
  WorkerParams& set(const std::string& name, const std::string& value);
  WorkerParams& set(const std::string& name, int64_t value);
  // The value of `name`: "" (getInt: `otherwise`) when it was not set, and for getInt when it
  // is no whole number.
  std::string get(const std::string& name) const;
  int64_t getInt(const std::string& name, int64_t otherwise = 0) const;
  // name=value, one argument each; and back (false, with the argument in *bad, for one without
  // a '=').
  std::vector<std::string> toArgs() const;
  static bool fromArgs(const std::vector<std::string>& args, WorkerParams* out, std::string* bad);

 private:
  std::map<std::string, std::string> values_;
};

// A worker: its rank and its parameters in, its exit status out (0: success). It runs in the
// worker process's main thread, alone, and may set the environment before it loads the plugin.
using WorkerBody = std::function<int(int rank, const WorkerParams& params)>;

// Registers `body` as worker `name` of this program; meant for static initialization
// (`const bool kRegistered = registerWorker(...)` at namespace scope), so it returns true.
// A second body under the same name aborts the program: the names are the program's to choose.
bool registerWorker(const std::string& name, WorkerBody body);

// Runs worker `name` in `nworkers` copies of this program (ranks 0 to nworkers-1), each given
// `params`, and waits as driver::runWorkers does: up to timeout_ms, then SIGKILL; they die with
// the thread that called this. Ok when every child was reaped, whatever their exit codes; a
// worker name this program did not register makes every child exit 64.
Status runExecWorkers(const std::string& name, int nworkers, const WorkerParams& params,
                      int64_t timeout_ms, std::vector<driver::WorkerExit>* exits,
                      const driver::WorkerHooks& hooks = {});

// runAll with exec'd workers: "" when every worker exited 0, else a description.
std::string runAllExec(const std::string& name, int nworkers, const WorkerParams& params,
                       int64_t timeout_ms = kWorkerTimeoutMs);

// For main(): when argv names a worker, runs it and exits the process with its status (an
// exception escaping it exits 70, a bad command line 64); otherwise returns.
void runWorkerIfAsked(int argc, char** argv);

}  // namespace tally::functional
