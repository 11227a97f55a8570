// SPDX-License-Identifier: Apache-2.0
// Runs a command line under sh and keeps what a test checks: its exit status and its output,
// stderr joined to stdout. For tests of the built programs (tally, tally-reducer).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace tally::test {

struct CommandRun {
  int status = -1;  // exit status, or -1 when it did not exit normally
  std::string out;  // stdout and stderr together
};

inline CommandRun runCommand(const std::string& command) {
  CommandRun run;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) run.out.append(buf, n);
  const int raw = ::pclose(pipe);
  if (raw != -1 && WIFEXITED(raw)) run.status = WEXITSTATUS(raw);
  return run;
}

}  // namespace tally::test
