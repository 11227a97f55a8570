// SPDX-License-Identifier: Apache-2.0
#include "tools/driver/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <thread>

#include "common/strings.h"

namespace tally::driver {
namespace {

using Clock = std::chrono::steady_clock;

int64_t msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? left.count() : 0;
}

// In a fresh child: die with the parent, so nothing outlives a crashed test or demo.
void dieWithParent(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The parent may have died between fork() and prctl().
  if (::getppid() != parent) ::_exit(71);
}

void fillExit(int wstatus, WorkerExit* e) {
  if (WIFEXITED(wstatus)) {
    e->exit_code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    e->signal = WTERMSIG(wstatus);
  }
}

// Waits up to timeout_ms for `pid`; true when reaped (status in *wstatus).
bool waitPid(pid_t pid, int64_t timeout_ms, int* wstatus) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto sleep = std::chrono::microseconds(200);
  for (;;) {
    pid_t r = ::waitpid(pid, wstatus, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return true;  // already reaped or not ours: nothing to wait for
    if (Clock::now() >= deadline) return false;
    ::usleep(static_cast<useconds_t>(sleep.count()));
    sleep = std::min(sleep * 2, std::chrono::microseconds(10000));
  }
}

}  // namespace

void runChildBody(const std::function<int(int)>& body, int index, const char* what) {
  int code = 70;
  try {
    code = body(index);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s %d: exception: %s\n", what, index, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s %d: unknown exception\n", what, index);
  }
  std::fflush(nullptr);
  ::_exit(code);
}

std::string WorkerExit::describe() const {
  std::string s = "rank " + std::to_string(rank) + ": ";
  if (timed_out) return s + "timed out and was killed";
  if (signal != 0)
    return s + "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return s + "exit " + std::to_string(exit_code);
}

namespace {

// argv and envp for execve, built in the parent before fork: between fork and exec the child of
// a multi-threaded parent must not allocate. The environment is the parent's with `env` added.
class ExecImage {
 public:
  ExecImage(const std::string& binary, const std::vector<std::string>& args,
            const std::vector<std::pair<std::string, std::string>>& env)
      : binary_(binary) {
    args_.push_back(binary);
    args_.insert(args_.end(), args.begin(), args.end());
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry = *e;
      const std::string name = entry.substr(0, entry.find('='));
      bool replaced = false;
      for (const auto& [k, v] : env) replaced = replaced || k == name;
      if (!replaced) env_.push_back(std::move(entry));
    }
    for (const auto& [k, v] : env) env_.push_back(k + "=" + v);
    // The strings are final: their buffers stay where they are from here on.
    for (auto& a : args_) argv_.push_back(a.data());
    argv_.push_back(nullptr);
    for (auto& e : env_) envp_.push_back(e.data());
    envp_.push_back(nullptr);
    failed_ = "exec " + binary + " failed: errno ";
  }
  ExecImage(const ExecImage&) = delete;
  ExecImage& operator=(const ExecImage&) = delete;

  // In the child: execs, or says why not on stderr (write() and to_chars, which neither
  // allocate nor lock) and _exits 127.
  [[noreturn]] void exec() {
    ::execve(binary_.c_str(), argv_.data(), envp_.data());
    char line[32];
    char* end = std::to_chars(line, line + sizeof(line) - 1, errno).ptr;
    *end++ = '\n';
    ssize_t ignored = ::write(STDERR_FILENO, failed_.data(), failed_.size());
    ignored = ::write(STDERR_FILENO, line, static_cast<size_t>(end - line));
    (void)ignored;
    ::_exit(127);
  }

 private:
  std::string binary_;
  std::vector<std::string> args_;
  std::vector<std::string> env_;
  std::vector<char*> argv_;
  std::vector<char*> envp_;
  std::string failed_;
};

// Starts child `rank` for every rank with start(rank) (its pid, or -1 with errno set), then
// waits for them as runWorkers says. A failed start kills and reaps the children started so far.
Status startAndWait(int nworkers, const std::function<pid_t(int rank)>& start, int64_t timeout_ms,
                    std::vector<WorkerExit>* exits, const WorkerHooks& hooks) {
  std::vector<pid_t> pids;
  std::vector<WorkerExit> result(static_cast<size_t>(nworkers));
  auto reaped = [&](pid_t pid) {
    if (hooks.reaped) hooks.reaped(pid);
  };
  for (int rank = 0; rank < nworkers; ++rank) {
    result[static_cast<size_t>(rank)].rank = rank;
    const pid_t pid = start(rank);
    if (pid < 0) {
      int err = errno;
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) {
        ::waitpid(p, nullptr, 0);
        reaped(p);
      }
      return Status::fromErrno("fork worker " + std::to_string(rank), err);
    }
    if (hooks.started) hooks.started(pid);
    pids.push_back(pid);
  }

  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto next_tick = Clock::now();
  std::vector<bool> done(pids.size(), false);
  size_t remaining = pids.size();
  auto sleep = std::chrono::microseconds(200);
  while (remaining > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int wstatus = 0;
      pid_t r = ::waitpid(pids[i], &wstatus, WNOHANG);
      if (r == pids[i]) {
        fillExit(wstatus, &result[i]);
        reaped(pids[i]);
        done[i] = true;
        --remaining;
        if (!result[i].ok() && remaining > 0 && hooks.failure_grace_ms > 0) {
          deadline =
              std::min(deadline, Clock::now() + std::chrono::milliseconds(hooks.failure_grace_ms));
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
        reaped(pids[i]);
        fillExit(wstatus, &result[i]);
        result[i].timed_out = true;
      }
      break;
    }
    if (hooks.tick && Clock::now() >= next_tick) {
      hooks.tick();
      next_tick = Clock::now() + std::chrono::milliseconds(100);
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(5000));
  }
  *exits = std::move(result);
  return Status::ok();
}

}  // namespace

Status runWorkers(int nworkers, const std::function<int(int rank)>& body, int64_t timeout_ms,
                  std::vector<WorkerExit>* exits, const WorkerHooks& hooks) {
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  return startAndWait(
      nworkers,
      [&](int rank) -> pid_t {
        const pid_t pid = ::fork();
        if (pid == 0) {
          if (hooks.default_signals) {
            ::signal(SIGINT, SIG_DFL);
            ::signal(SIGTERM, SIG_DFL);
          }
          dieWithParent(parent);
          runChildBody(body, rank, "worker");
        }
        return pid;
      },
      timeout_ms, exits, hooks);
}

Status runExecWorkers(int nworkers, const std::function<WorkerProgram(int rank)>& program,
                      int64_t timeout_ms, std::vector<WorkerExit>* exits,
                      const WorkerHooks& hooks) {
  std::vector<std::unique_ptr<ExecImage>> images;
  for (int rank = 0; rank < nworkers; ++rank) {
    const WorkerProgram p = program(rank);
    images.push_back(std::make_unique<ExecImage>(p.binary, p.args, p.env));
  }
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  return startAndWait(
      nworkers,
      [&](int rank) -> pid_t {
        ExecImage* image = images[static_cast<size_t>(rank)].get();
        const pid_t pid = ::fork();
        if (pid == 0) {
          dieWithParent(parent);
          image->exec();
        }
        return pid;
      },
      timeout_ms, exits, hooks);
}

bool allWorkersOk(const std::vector<WorkerExit>& exits, std::string* why) {
  bool ok = true;
  for (const auto& e : exits) {
    if (e.ok()) continue;
    ok = false;
    if (why) *why += e.describe() + "\n";
  }
  return ok;
}

ReducerProcess::ReducerProcess(pid_t pid, int out_fd, std::string address)
    : pid_(pid), out_fd_(out_fd), address_(std::move(address)) {
  // The pipe stays open unread: tally-reducer prints at most one more line (the metrics URL), far
  // below what a pipe holds. No thread drains it, so a test process that starts reducers and
  // then forks workers is still single-threaded at the fork (ThreadSanitizer needs that).
}

ReducerOptions reducerInNode(const EmulatedNode& node, std::vector<std::string> extra_args) {
  ReducerOptions options;
  options.listen = node.address + ":0";
  options.netns = node.netns;
  options.extra_args = std::move(extra_args);
  return options;
}

Status ReducerProcess::start(const std::string& binary, const std::vector<std::string>& extra_args,
                             int64_t timeout_ms, std::unique_ptr<ReducerProcess>* out) {
  ReducerOptions options;
  options.extra_args = extra_args;
  return launch(binary, options, timeout_ms, out);
}

Status spawnReducer(const std::string& binary, const ReducerSpawn& spawn, SpawnedReducer* out) {
  ExecImage image(binary, spawn.args, spawn.env);
  const std::string netns_path = spawn.netns.empty() ? "" : EmulatedCluster::netnsPath(spawn.netns);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::fromErrno("pipe for tally-reducer", errno);
  std::fflush(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::fromErrno("fork tally-reducer", err);
  }
  if (pid == 0) {
    dieWithParent(parent);
    // dup2 clears O_CLOEXEC on the new descriptor; the originals close at exec.
    if (::dup2(fds[1], STDOUT_FILENO) < 0) ::_exit(72);
    if (!netns_path.empty()) {
      int err = EmulatedCluster::enterPath(netns_path.c_str());
      if (err != 0) {
        std::fprintf(stderr, "enter network namespace %s: %s\n", netns_path.c_str(),
                     std::strerror(err));
        ::_exit(73);
      }
    }
    if (spawn.in_child) spawn.in_child();
    image.exec();
  }
  ::close(fds[1]);
  out->pid = pid;
  out->stdout_fd = fds[0];
  return Status::ok();
}

Status ReducerProcess::launch(const std::string& binary, const ReducerOptions& options,
                              int64_t timeout_ms, std::unique_ptr<ReducerProcess>* out) {
  ReducerSpawn spawn;
  spawn.args = {"--listen", options.listen};
  spawn.args.insert(spawn.args.end(), options.extra_args.begin(), options.extra_args.end());
  spawn.netns = options.netns;
  SpawnedReducer child;
  TALLY_RETURN_IF_ERROR(spawnReducer(binary, spawn, &child));
  const pid_t pid = child.pid;
  const int out_fd = child.stdout_fd;

  // Read the ready line byte by byte, so nothing after it is consumed here.
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string line;
  Status failure;
  for (;;) {
    struct pollfd p = {out_fd, POLLIN, 0};
    int64_t left = msLeft(deadline);
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      failure = Status::fromErrno("poll tally-reducer stdout", errno);
      break;
    }
    if (r == 0) {
      if (left == 0) {
        failure = Status::timeout("tally-reducer printed no ready line within " +
                                  std::to_string(timeout_ms) + " ms (got \"" + line + "\")");
        break;
      }
      continue;
    }
    char c;
    ssize_t n = ::read(out_fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failure = Status::remote("tally-reducer " + binary + " exited before its ready line (got \"" +
                               line + "\")");
      break;
    }
    if (c != '\n') {
      line.push_back(c);
      continue;
    }
    static const char kReady[] = "tally-reducer listening on ";
    if (line.rfind(kReady, 0) == 0) {
      std::string address = line.substr(sizeof(kReady) - 1);
      trimRight(&address);
      out->reset(new ReducerProcess(pid, out_fd, std::move(address)));
      return Status::ok();
    }
    line.clear();  // some other line: keep waiting for the ready one
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::close(out_fd);
  return failure;
}

Status ReducerProcess::stop(int64_t timeout_ms) {
  if (reaped_) return Status::ok();
  ::kill(pid_, SIGTERM);
  int wstatus = 0;
  bool reaped = waitPid(pid_, timeout_ms, &wstatus);
  if (!reaped) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &wstatus, 0);
  }
  reaped_ = true;
  ::close(out_fd_);
  if (!reaped)
    return Status::timeout("tally-reducer pid " + std::to_string(pid_) + " ignored SIGTERM");
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return Status::ok();
  if (WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGTERM) return Status::ok();
  return Status::remote("tally-reducer pid " + std::to_string(pid_) + " ended with status " +
                        std::to_string(wstatus));
}

void ReducerProcess::kill() {
  if (reaped_) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  reaped_ = true;
  ::close(out_fd_);
}

ReducerProcess::~ReducerProcess() {
  if (!reaped_) (void)stop(2000);
}

Status startReducers(const std::string& binary, int count,
                     const std::vector<std::string>& extra_args, int64_t timeout_ms,
                     std::vector<std::unique_ptr<ReducerProcess>>* out) {
  std::vector<std::unique_ptr<ReducerProcess>> started;
  for (int i = 0; i < count; ++i) {
    std::unique_ptr<ReducerProcess> r;
    TALLY_RETURN_IF_ERROR(ReducerProcess::start(binary, extra_args, timeout_ms, &r));
    started.push_back(std::move(r));
  }
  *out = std::move(started);
  return Status::ok();
}

Status startReducers(const std::string& binary, const std::vector<ReducerOptions>& each,
                     int64_t timeout_ms, std::vector<std::unique_ptr<ReducerProcess>>* out) {
  std::vector<std::unique_ptr<ReducerProcess>> started;
  for (const auto& options : each) {
    std::unique_ptr<ReducerProcess> r;
    TALLY_RETURN_IF_ERROR(ReducerProcess::launch(binary, options, timeout_ms, &r));
    started.push_back(std::move(r));
  }
  *out = std::move(started);
  return Status::ok();
}

std::string reducerList(const std::vector<std::unique_ptr<ReducerProcess>>& reducers) {
  std::string list;
  for (const auto& r : reducers) {
    if (!list.empty()) list += ",";
    list += r->address();
  }
  return list;
}

std::string selfPath() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

std::string selfDirectory() {
  const std::string path = selfPath();
  if (path.empty()) return ".";
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

Status TempDir::create(const std::string& what, std::unique_ptr<TempDir>* out) {
  std::string tmpl = std::filesystem::temp_directory_path().string() + "/tally-" + what + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return Status::fromErrno("mkdtemp " + tmpl, errno);
  out->reset(new TempDir(tmpl));
  return Status::ok();
}

TempDir::~TempDir() {
  DIR* dir = ::opendir(path_.c_str());
  if (dir != nullptr) {
    while (struct dirent* e = ::readdir(dir)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      ::unlink((path_ + "/" + e->d_name).c_str());
    }
    ::closedir(dir);
  }
  ::rmdir(path_.c_str());
}

}  // namespace tally::driver
