// SPDX-License-Identifier: Apache-2.0
// The failover tests' workload (failover_test.cc): a seeded mix of all-reduce, all-gather and
// reduce-scatter calls over every type and operation, the same on every rank, each checked
// against the driver's independent reference and folded into a digest that every rank must
// share. Workers record when each call completed, so the test can say how long calls stalled
// around a fault.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/types.h"
#include "test/support/sanitizer_build.h"
#include "tools/driver/coll_driver.h"

namespace tally::reliability {

// The short reducer timeout the failover tests run with (TALLY_REDUCER_TIMEOUT_MS), and the
// bounds that count from it. Under ThreadSanitizer on a loaded machine the instrumented reducers
// go quiet for longer than 1.5 s with no fault, and a rejoin's opening over libfabric (which
// gets the same time) takes longer: 5 s there.
inline constexpr int64_t kReducerTimeoutMs = test::kThreadSanitizer ? 5000 : 1500;

struct CallPlan {
  enum class Kind { kAllReduce, kAllGather, kReduceScatter };
  Kind kind = Kind::kAllReduce;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  size_t count = 0;  // all-reduce: elements; all-gather: bytes per rank; reduce-scatter: per rank
  uint64_t seed = 0;
};

// Call `index` of the workload seeded `seed`: a pure function, so every rank plans alike.
CallPlan planCall(uint64_t seed, uint64_t index);
std::string describeCall(const CallPlan& plan);

// What a worker measured over a run of calls.
struct RunResult {
  uint64_t calls = 0;
  uint64_t digest = 0;  // of every all-reduce and all-gather output, in order
  int64_t longest_gap_ms = 0;  // between two completions (or the start and the first)
  int64_t last_done_ms = 0;    // steady clock, ms, when the last call completed
  std::vector<int64_t> done_ms;  // steady clock, ms, when each call completed
};

// How long after each fault (steady clock, ms) the first call completed: what "calls resume
// within" measures. A fault after the last completion gets -1.
std::vector<int64_t> resumeAfter(const std::vector<int64_t>& done_ms,
                                 const std::vector<int64_t>& fault_ms);
// The completion times as text for the store ("t1 t2 ..."), and back.
std::string formatTimes(const std::vector<int64_t>& ms);
std::vector<int64_t> parseTimes(const std::string& text);

// Runs calls [0, ncalls) of the workload on `comm`, each checked exactly against the reference.
// Stops at the first error or wrong element (the Status says which call and element).
// pause_every > 0: sleeps pause_ms after every pause_every calls (so faults also fall between
// calls).
Status runWorkload(driver::CollComm* comm, uint64_t seed, uint64_t ncalls, int pause_every,
                   int pause_ms, RunResult* out);

// The same, for as long as last_call() (asked before every call) is above the call's index:
// for runs whose length another process decides.
Status runWorkloadWhile(driver::CollComm* comm, uint64_t seed,
                        const std::function<uint64_t()>& last_call, int pause_every,
                        int pause_ms, RunResult* out);

// "ok <calls> <digest> <gap_ms> <last_ms>", or "error <calls> <now_ms> <status>" (the calls
// done before the error, and when it came), for the store.
std::string formatResult(const Status& st, const RunResult& r);
// Parses formatResult's text; *error gets the error text, if any (then r->calls holds the calls
// done and r->last_done_ms when the error came).
bool parseResult(const std::string& text, RunResult* r, std::string* error);

// The steady clock in ms, comparable across the processes of one machine.
int64_t steadyMs();

}  // namespace tally::reliability
