// SPDX-License-Identifier: Apache-2.0
// Runs the built `tally` binary for the bench tests: stdout and stderr captured, every wait
// bounded, the child's pid known (the emulated tests look for the namespaces named after it).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace tally::bench::test {

struct TallyRun {
  int status = -1;  // exit status, -1 when it did not exit by itself
  bool timed_out = false;
  pid_t pid = -1;
  std::string out;
  std::string err;
  double seconds = 0;
};

// Runs `tally ARGS...`. `env` entries ("NAME=VALUE") are added to the environment. While it runs,
// `during(pid, seconds so far)` is called about every 100 ms; returning true stops calling it.
// `on_stdout(pid, stdout so far)` is called each time stdout grows.
inline TallyRun runTally(
    const std::vector<std::string>& args, int timeout_s, const std::vector<std::string>& env = {},
    const std::function<bool(pid_t, double)>& during = nullptr,
    const std::function<void(pid_t, const std::string&)>& on_stdout = nullptr) {
  TallyRun run;
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) return run;
  std::vector<std::string> argv_s = {TALLY_TEST_TALLY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::fflush(nullptr);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  run.pid = pid;
  int fds[2] = {out_pipe[0], err_pipe[0]};
  std::string* sinks[2] = {&run.out, &run.err};
  const auto deadline = start + std::chrono::seconds(timeout_s);
  bool calling = static_cast<bool>(during);
  while (fds[0] >= 0 || fds[1] >= 0) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      ::kill(pid, SIGKILL);
      run.timed_out = true;
      break;
    }
    if (calling) {
      double so_far = std::chrono::duration<double>(now - start).count();
      if (during(pid, so_far)) calling = false;
    }
    pollfd p[2];
    int n = 0;
    int which[2];
    for (int k = 0; k < 2; ++k) {
      if (fds[k] < 0) continue;
      p[n] = pollfd{fds[k], POLLIN, 0};
      which[n++] = k;
    }
    if (::poll(p, static_cast<nfds_t>(n), 100) <= 0) continue;
    for (int i = 0; i < n; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t got = ::read(p[i].fd, buf, sizeof(buf));
      if (got > 0) {
        sinks[which[i]]->append(buf, static_cast<size_t>(got));
        if (which[i] == 0 && on_stdout) on_stdout(pid, run.out);
      } else {
        ::close(p[i].fd);
        fds[which[i]] = -1;
      }
    }
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  if (!run.timed_out && WIFEXITED(wstatus)) run.status = WEXITSTATUS(wstatus);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

// The common arguments of a small loopback run with the built plugin and reducer.
inline std::vector<std::string> smallRun(std::vector<std::string> more) {
  std::vector<std::string> args = {"bench",
                                   "--plugin",
                                   TALLY_TEST_PLUGIN,
                                   "--reducer",
                                   TALLY_TEST_REDUCER,
                                   "--workers",
                                   "2",
                                   "--reducers",
                                   "1",
                                   "-n",
                                   "2",
                                   "-w",
                                   "1",
                                   "--no-progress"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string tempPath(const std::string& name) {
  return std::filesystem::temp_directory_path().string() + "/tally-bench-test-" +
         std::to_string(::getpid()) + "-" + name;
}

// Output of a shell command (for `ip netns list`); empty when it fails.
inline std::string commandOutput(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

}  // namespace tally::bench::test
