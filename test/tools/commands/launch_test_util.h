// SPDX-License-Identifier: Apache-2.0
// Helpers for the tally launch tests: the cluster variables of a small job, and child processes
// run with an explicit environment whose stdout and stderr are captured, every wait bounded.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace tally::commands::test {

// The job of the Vertex AI documentation's example: a primary, two workers, two reducers and
// three evaluators, trial 7; `type` and `index` pick this replica's task.
inline std::string clusterSpec(
    const std::string& type, int index,
    const std::string& reducers = R"("reducer-0:2222", "reducer-1:2222")") {
  return R"({"cluster": {"workerpool0": ["primary-0:2222"],)"
         R"( "workerpool1": ["worker-0:2222", "worker-1:2222"],)"
         R"( "workerpool2": [)" +
         reducers +
         R"(],)"
         R"( "workerpool3": ["eval-0:2222", "eval-1:2222", "eval-2:2222"]},)"
         R"( "environment": "cloud", "task": {"type": ")" +
         type + R"(", "index": )" + std::to_string(index) +
         R"(, "trial": "7"}, "job": {"workerPoolSpecs": []}})";
}

// The same job as TF_CONFIG: chief, two workers, one ps; the evaluator is never listed.
inline std::string tfConfig(const std::string& type, int index) {
  return R"({"cluster": {")" + std::string(type == "master" ? "master" : "chief") +
         R"(": ["tf-chief-0:2222"], "worker": ["tf-worker-0:2222", "tf-worker-1:2222"],)"
         R"( "ps": ["tf-ps-0:2222"]}, "environment": "cloud",)"
         R"( "task": {"type": ")" +
         type + R"(", "index": )" + std::to_string(index) + "}}";
}

struct RunResult {
  int status = -1;  // from waitpid
  bool timed_out = false;
  std::string out;
  std::string err;
  int exitCode() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

// A child process with its stdout and stderr on pipes. Not thread-safe.
class Child {
 public:
  using Clock = std::chrono::steady_clock;

  // Runs `argv` (argv[0] a path) with exactly `env` as its environment.
  bool start(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    int out_pipe[2];
    int err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) return false;
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) return false;
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<char*> envp;
    for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    std::fflush(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out_pipe[1], 1);
      ::dup2(err_pipe[1], 2);
      ::execve(args[0], args.data(), envp.data());
      ::_exit(126);
    }
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    fds_[0] = out_pipe[0];
    fds_[1] = err_pipe[0];
    return pid_ > 0;
  }

  // Reads until stdout holds `needle`, both pipes are closed, or timeout_ms passes.
  bool waitForOutput(const std::string& needle, int timeout_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (result_.out.find(needle) == std::string::npos) {
      if (!pump(deadline)) break;
    }
    return result_.out.find(needle) != std::string::npos;
  }

  void signal(int sig) {
    if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
  }

  // Reads both pipes to their end and reaps the child; past timeout_ms it is killed (SIGKILL)
  // and the result says timed_out.
  RunResult finish(int timeout_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (pump(deadline)) {
    }
    while (!reaped_) {
      pid_t r = ::waitpid(pid_, &result_.status, WNOHANG);
      if (r == pid_ || r < 0) {
        reaped_ = true;
      } else if (Clock::now() >= deadline) {
        result_.timed_out = true;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &result_.status, 0);
        reaped_ = true;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    closeFds();
    return result_;
  }

  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    closeFds();
  }

 private:
  // One poll and read; false once both pipes are closed or the deadline has passed.
  bool pump(Clock::time_point deadline) {
    pollfd pfds[2];
    int n = 0;
    for (int fd : fds_) {
      if (fd >= 0) pfds[n++] = {fd, POLLIN, 0};
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (n == 0 || left <= 0) return false;
    if (::poll(pfds, static_cast<nfds_t>(n), static_cast<int>(left)) < 0) return false;
    for (int i = 0; i < n; ++i) {
      if (pfds[i].revents == 0) continue;
      char buf[4096];
      ssize_t got = ::read(pfds[i].fd, buf, sizeof(buf));
      const int slot = pfds[i].fd == fds_[0] ? 0 : 1;
      if (got > 0) {
        (slot == 0 ? result_.out : result_.err).append(buf, static_cast<size_t>(got));
      } else {
        ::close(fds_[slot]);
        fds_[slot] = -1;
      }
    }
    return true;
  }

  void closeFds() {
    for (int& fd : fds_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }

  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};
  bool reaped_ = false;
  RunResult result_;
};

inline const std::string kPath = "PATH=/usr/local/bin:/usr/bin:/bin";

// `tally launch ARGS...` with `env` (plus PATH) as its whole environment.
inline RunResult runLaunch(const std::vector<std::string>& args, std::vector<std::string> env,
                           int timeout_ms = 20000) {
  std::vector<std::string> argv = {TALLY_BIN, "launch"};
  argv.insert(argv.end(), args.begin(), args.end());
  env.push_back(kPath);
  Child child;
  if (!child.start(argv, env)) return {};
  return child.finish(timeout_ms);
}

// Runs `script` with /bin/sh -c and `env` (plus PATH).
inline RunResult runScript(const std::string& script, std::vector<std::string> env) {
  env.push_back(kPath);
  Child child;
  if (!child.start({"/bin/sh", "-c", script}, env)) return {};
  return child.finish(20000);
}

}  // namespace tally::commands::test
