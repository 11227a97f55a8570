// SPDX-License-Identifier: Apache-2.0
// Child processes of `tally bench`, its cleanup on SIGINT and SIGTERM, and its progress line.
//
// Why handlers and a self-pipe rather than blocked signals and sigwait(): a blocked mask survives
// fork and exec, so every tally-reducer and tally-gloo-bench started by the bench would ignore
// the SIGTERM that stops it. A handler is reset to the default by exec, and forked workers reset
// it themselves first thing.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
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
  // A failed child usually leaves its peers waiting on it until their own timeouts: after the
  // first failure the others get 10 s to finish, then are killed like late ones.
  driver::WorkerHooks hooks;
  hooks.started = [guard](pid_t pid) { guard->addChild(pid); };
  hooks.reaped = [guard](pid_t pid) { guard->removeChild(pid); };
  hooks.tick = tick;
  hooks.failure_grace_ms = 10000;
  hooks.default_signals = true;
  return driver::runWorkers(n, body, timeout_ms, exits, hooks);
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
