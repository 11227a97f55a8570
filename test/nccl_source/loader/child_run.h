// SPDX-License-Identifier: Apache-2.0
// Runs this test program again as a child with an environment of the test's choosing, and keeps
// its output: each loader case needs a fresh process, since NCCL's loader keeps its state in
// process-wide statics set up once.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tally::nccl_source {

struct ChildRun {
  int status = -1;         // exit status, or -1 when it did not exit normally
  bool timed_out = false;  // killed after the deadline
  std::string out;         // stdout
  std::string err;         // stderr
};

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// Runs /proc/self/exe with `args`. The child's environment is this process's minus every NCCL_,
// TALLY_ and cluster variable and LD_PRELOAD and LD_LIBRARY_PATH, plus `env`. Killed after
// `timeout_ms`.
ChildRun runSelf(const std::vector<std::string>& args, const EnvVars& env, int timeout_ms);

// A child's report is lines of `verb name key=value key=value ...`: the value of `key` in
// `line` ("" when absent).
std::string reportField(const std::string& line, const std::string& key);

// How many of `lines` contain `text`.
int countContaining(const std::vector<std::string>& lines, const std::string& text);

}  // namespace tally::nccl_source
