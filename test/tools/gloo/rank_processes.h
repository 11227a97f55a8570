// SPDX-License-Identifier: Apache-2.0
// Starts the ranks of one tally-gloo-bench run as child processes, collects each one's stdout and
// stderr, and waits for all of them with one deadline (SIGKILL after it). Not thread-safe.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace tally::gloo_bench::test {

struct RankResult {
  int status = -1;  // from waitpid
  bool timed_out = false;
  std::string out;
  std::string err;
  int exitCode() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

// Runs every argv in `ranks` at once (argv[0] a path); returns one result per entry. A child
// that cannot exec exits 127.
inline std::vector<RankResult> runRanks(const std::vector<std::vector<std::string>>& ranks,
                                        std::chrono::milliseconds deadline) {
  struct Running {
    pid_t pid = -1;
    int fds[2] = {-1, -1};  // stdout, stderr read ends
  };
  std::vector<RankResult> results(ranks.size());
  std::vector<Running> running(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    int out_pipe[2];
    int err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
      results[r].err = "pipe failed";
      continue;
    }
    std::vector<char*> argv;
    for (const std::string& a : ranks[r]) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(out_pipe[1], 1);
      ::dup2(err_pipe[1], 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    running[r] = Running{pid, {out_pipe[0], err_pipe[0]}};
    if (pid < 0) {
      ::close(out_pipe[0]);
      ::close(err_pipe[0]);
      running[r] = Running{};
      results[r].err = "fork failed";
    }
  }

  // Read until every pipe is closed (every child exited) or the deadline passes.
  const auto end = std::chrono::steady_clock::now() + deadline;
  bool expired = false;
  while (!expired) {
    std::vector<pollfd> pfds;
    std::vector<std::string*> sinks;
    for (size_t r = 0; r < running.size(); ++r) {
      for (int k = 0; k < 2; ++k) {
        if (running[r].fds[k] < 0) continue;
        pfds.push_back(pollfd{running[r].fds[k], POLLIN, 0});
        sinks.push_back(k == 0 ? &results[r].out : &results[r].err);
      }
    }
    if (pfds.empty()) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      expired = true;
      break;
    }
    if (::poll(pfds.data(), pfds.size(), static_cast<int>(left.count())) < 0) continue;
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(pfds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
        continue;
      }
      ::close(pfds[i].fd);
      for (Running& run : running) {
        for (int& fd : run.fds) {
          if (fd == pfds[i].fd) fd = -1;
        }
      }
    }
  }

  for (size_t r = 0; r < running.size(); ++r) {
    for (int fd : running[r].fds) {
      if (fd >= 0) ::close(fd);
    }
    if (running[r].pid <= 0) continue;
    if (expired) {
      int status = 0;
      if (::waitpid(running[r].pid, &status, WNOHANG) == running[r].pid) {
        results[r].status = status;
        continue;
      }
      ::kill(running[r].pid, SIGKILL);
      results[r].timed_out = true;
    }
    ::waitpid(running[r].pid, &results[r].status, 0);
  }
  return results;
}

}  // namespace tally::gloo_bench::test
