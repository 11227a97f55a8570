// tally-reducer started as a child process by tests that look at the process itself: its
// arguments, environment, ready line and exit status. TALLY_REDUCER_BIN is the built binary.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tally::reducer::test {

struct ReducerChild {
  pid_t pid = -1;
  FILE* out = nullptr;  // its stdout
};

// Forks and execs tally-reducer with `args`, `env` added to the child's own environment.
// `in_child`, when set, runs in the child just before exec (limits, another user); it must only
// make system calls.
inline ReducerChild spawnReducer(const std::vector<std::string>& args,
                                 const std::vector<std::pair<std::string, std::string>>& env = {},
                                 const std::function<void()>& in_child = {}) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  ReducerChild c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    for (auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    if (in_child) in_child();
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(TALLY_REDUCER_BIN));
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  c.out = fdopen(fds[0], "r");
  return c;
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
