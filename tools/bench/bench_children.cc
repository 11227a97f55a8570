// Child processes of `tally bench`, its cleanup on SIGINT and SIGTERM, and its progress line.
//
// Why handlers and a self-pipe rather than blocked signals and sigwait(): a blocked mask survives
// fork and exec, so every tally-reducer and tally-gloo-bench started by the bench would ignore
// the SIGTERM that stops it. A handler is reset to the default by exec, and forked workers reset
// it themselves first thing.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include "tools/bench/bench_internal.h"

namespace tally::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The write end of the installed guard's pipe: the only state a signal handler can reach.
std::atomic<int> g_signal_fd{-1};
struct sigaction g_old_int, g_old_term;

void onSignal(int sig) {
  int fd = g_signal_fd.load();
  if (fd < 0) return;
  unsigned char b = static_cast<unsigned char>(sig);
  int saved = errno;
  (void)!::write(fd, &b, 1);
  errno = saved;
}

void fillExit(int wstatus, driver::WorkerExit* e) {
  if (WIFEXITED(wstatus)) e->exit_code = WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) e->signal = WTERMSIG(wstatus);
}

}  // namespace

Status RunGuard::install(std::unique_ptr<RunGuard>* out) {
  std::unique_ptr<RunGuard> guard(new RunGuard());
  if (::pipe2(guard->pipe_, O_CLOEXEC) != 0) return Status::fromErrno("pipe", errno);
  guard->watcher_ = std::thread([g = guard.get()] { g->watch(); });
  g_signal_fd.store(guard->pipe_[1]);
  struct sigaction sa = {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
  *out = std::move(guard);
  return Status::ok();
}

RunGuard::~RunGuard() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  g_signal_fd.store(-1);
  unsigned char stop = 0;
  (void)!::write(pipe_[1], &stop, 1);
  if (watcher_.joinable()) watcher_.join();
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

void RunGuard::watch() {
  for (;;) {
    unsigned char sig = 0;
    ssize_t n = ::read(pipe_[0], &sig, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || sig == 0) return;  // the destructor's stop byte
    std::lock_guard<std::mutex> lock(mutex_);
    for (pid_t pid : children_) ::kill(pid, SIGKILL);
    for (pid_t pid : children_) ::waitpid(pid, nullptr, 0);
    std::fprintf(stderr, "\ninterrupted by %s: cleaning up\n", strsignal(sig));
    if (cleanup_) cleanup_();
    std::fflush(nullptr);
    ::_exit(128 + sig);
  }
}

void RunGuard::addChild(pid_t pid) {
  std::lock_guard<std::mutex> lock(mutex_);
  children_.push_back(pid);
}

void RunGuard::removeChild(pid_t pid) {
  std::lock_guard<std::mutex> lock(mutex_);
  children_.erase(std::remove(children_.begin(), children_.end(), pid), children_.end());
}

void RunGuard::setCleanup(std::function<void()> cleanup) {
  std::lock_guard<std::mutex> lock(mutex_);
  cleanup_ = std::move(cleanup);
}

Status runChildren(RunGuard* guard, int n, const std::function<int(int)>& body, int64_t timeout_ms,
                   const std::function<void()>& tick, std::vector<driver::WorkerExit>* exits) {
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  std::vector<pid_t> pids;
  std::vector<driver::WorkerExit> result(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    result[static_cast<size_t>(i)].rank = i;
    pid_t pid = ::fork();
    if (pid < 0) {
      int err = errno;
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) {
        ::waitpid(p, nullptr, 0);
        guard->removeChild(p);
      }
      return Status::fromErrno("fork child " + std::to_string(i), err);
    }
    if (pid == 0) {
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(71);  // the parent died before prctl
      driver::runChildBody(body, i, "child");
    }
    guard->addChild(pid);
    pids.push_back(pid);
  }

  // A failed child usually leaves its peers waiting on it until their own timeouts: after the
  // first failure the others get kFailureGrace to finish, then are killed like late ones.
  constexpr auto kFailureGrace = std::chrono::seconds(10);
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto next_tick = Clock::now();
  std::vector<bool> done(pids.size(), false);
  size_t remaining = pids.size();
  while (remaining > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int wstatus = 0;
      if (::waitpid(pids[i], &wstatus, WNOHANG) == pids[i]) {
        fillExit(wstatus, &result[i]);
        guard->removeChild(pids[i]);
        done[i] = true;
        --remaining;
        if (!result[i].ok() && remaining > 0) {
          deadline = std::min(deadline, Clock::now() + kFailureGrace);
        }
      }
    }
    if (remaining == 0) break;
    if (Clock::now() >= deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (done[i]) continue;
        ::kill(pids[i], SIGKILL);
        int wstatus = 0;
        ::waitpid(pids[i], &wstatus, 0);
        guard->removeChild(pids[i]);
        fillExit(wstatus, &result[i]);
        result[i].timed_out = true;
      }
      break;
    }
    if (tick && Clock::now() >= next_tick) {
      tick();
      next_tick = Clock::now() + std::chrono::milliseconds(100);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  *exits = std::move(result);
  return Status::ok();
}

Progress::Progress(bool enabled) : enabled_(enabled), tty_(::isatty(STDERR_FILENO) == 1) {
  last_plain_ = Clock::now();
}

void Progress::show(const std::string& label) {
  if (!enabled_ || label.empty() || label == last_) return;
  if (tty_) {
    std::fprintf(stderr, "\r[%s]\x1b[K", label.c_str());
    std::fflush(stderr);
    shown_ = true;
  } else {
    // A log gets a line only every few seconds: short runs stay quiet.
    if (Clock::now() - last_plain_ < std::chrono::seconds(5)) return;
    std::fprintf(stderr, "[%s]\n", label.c_str());
    last_plain_ = Clock::now();
  }
  last_ = label;
}

void Progress::clear() {
  if (tty_ && shown_) {
    std::fprintf(stderr, "\r\x1b[K");
    std::fflush(stderr);
  }
  shown_ = false;
  last_.clear();
}

}  // namespace tally::bench
