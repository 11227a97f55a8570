// SPDX-License-Identifier: Apache-2.0
// tally-reducer started as a child process by tests that look at the process itself: its
// arguments, environment, ready line and exit status. The start is the plugin driver's
// (driver::spawnReducer), the one way every test and tool starts a reducer; this adds a stdio
// stream over its stdout and a bounded reap. TALLY_REDUCER_BIN is the built binary.
#pragma once

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tools/driver/process.h"

namespace tally::reducer::test {

struct ReducerChild {
  pid_t pid = -1;
  FILE* out = nullptr;  // its stdout
};

// Forks and execs tally-reducer with `args`, `env` added to the child's own environment.
// `in_child`, when set, runs in the child just before exec (limits, another user); it must only
// make system calls. pid stays -1 when the fork failed.
inline ReducerChild spawnReducer(const std::vector<std::string>& args,
                                 const std::vector<std::pair<std::string, std::string>>& env = {},
                                 const std::function<void()>& in_child = {}) {
  driver::ReducerSpawn spawn;
  spawn.args = args;
  spawn.env = env;
  spawn.in_child = in_child;
  driver::SpawnedReducer child;
  if (!driver::spawnReducer(TALLY_REDUCER_BIN, spawn, &child).isOk()) return {};
  return {child.pid, fdopen(child.stdout_fd, "r")};
}

// Waits up to timeout_ms for the child to exit, then kills it. Its exit status, or -1 when it
// died of a signal or had to be killed.
inline int reapReducer(pid_t pid, int64_t timeout_ms = 10000) {
  for (int64_t waited = 0; waited < timeout_ms; waited += 10) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

}  // namespace tally::reducer::test
