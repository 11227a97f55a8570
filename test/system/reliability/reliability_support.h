// SPDX-License-Identifier: Apache-2.0
// Helpers for the failure tests: reducers with a metrics port, a worker's timed all-reduce, and
// the check of one call's result against the reference.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "test/support/cluster.h"
#include "test/support/sanitizer_build.h"
#include "tools/driver/coll_driver.h"
#include "tools/driver/process.h"

namespace tally::reliability {

using test::kThreadSanitizer;

// The plugin's no-progress timeout in these tests, and the slack allowed on top of it for a
// loaded two-core machine.
inline constexpr int64_t kTimeoutMs = 3000;
inline constexpr int64_t kSlackMs = 7000;

// A free TCP port on 127.0.0.1 (bound once and released; good enough for a test).
int freePort();

// A tally-reducer on `listen` ("127.0.0.1:0" for any port) with a Prometheus endpoint on a free
// port of its own.
struct Reducer {
  std::unique_ptr<driver::ReducerProcess> process;
  int metrics_port = 0;
};
Status startReducer(const std::string& listen, Reducer* out);
std::string reducerList(const std::vector<Reducer>& reducers);

// The reducer's tally_reducer_communicators gauge; nothing when it cannot be read.
std::optional<double> openCommunicators(const Reducer& r);
// Waits up to timeout_ms for the gauge to read `want`; the last value read otherwise.
std::optional<double> waitOpenCommunicators(const Reducer& r, double want, int64_t timeout_ms);

// In a worker: the functional environment with the short kTimeoutMs.
void setFailureEnvironment(const std::string& reducer_list);

// In a worker: one all-reduce of `count` float32 (sum) checked against the reference. Ok only
// when the call succeeded and every element is right.
Status checkedAllreduce(driver::CollComm* comm, size_t count, uint64_t seed);

// In a worker: an all-reduce that is expected to fail. *ms is how long it took; *status its
// outcome.
void timedAllreduce(driver::CollComm* comm, size_t count, Status* status, int64_t* ms);

using Clock = std::chrono::steady_clock;
inline int64_t msSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

}  // namespace tally::reliability
