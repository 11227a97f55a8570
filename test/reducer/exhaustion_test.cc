// SPDX-License-Identifier: Apache-2.0
// tally-reducer under resource exhaustion, as a process with real limits:
// RLIMIT_NOFILE low and more connections than it has descriptors for; RLIMIT_NPROC at the
// threads it already has while connections that need threads arrive. Each time the reducer must
// stay up, close what does not fit, say so once per interval rather than once per failure, and
// serve a legitimate job correctly once the pressure is gone.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/fd.h"
#include "test/support/counting_observer.h"
#include "test/support/harness.h"
#include "test/support/raw_streams.h"
#include "test/support/reducer_child.h"

namespace tally::reducer::test {
namespace {

namespace tcp = transport::tcp;
using Clock = std::chrono::steady_clock;

// The child's stderr goes here, so its log lines can be counted.
std::string logPath() { return "/tmp/tally_exhaustion_" + std::to_string(getpid()) + ".log"; }

// A tally-reducer with one event loop, started with `in_child` run before exec; its address from
// the ready line.
ReducerChild startReducer(const std::function<void()>& in_child, std::string* address) {
  ReducerChild c = spawnReducer({"--listen", "127.0.0.1:0", "--threads", "1"}, {}, in_child);
  if (c.pid <= 0 || c.out == nullptr) return c;
  char line[256] = {};
  if (fgets(line, sizeof(line), c.out) == nullptr) return c;
  std::string s(line);
  const std::string ready = "tally-reducer listening on ";
  if (s.rfind(ready, 0) == 0) *address = s.substr(ready.size(), s.size() - ready.size() - 1);
  return c;
}

void stopReducer(ReducerChild* c) {
  kill(c->pid, SIGTERM);
  reapReducer(c->pid);
  c->pid = -1;
  if (c->out != nullptr) fclose(c->out);
  c->out = nullptr;
}

bool alive(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, WNOHANG) == 0;
}

// What arrives first on `fd` within timeout_ms: 1 bytes (the Challenge), 0 the reducer closed
// it, -1 nothing.
int firstEvent(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return -1;
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) > 0 ? 1 : 0;
}

// Counts a process's open descriptors or threads from /proc.
int openDescriptors(pid_t pid) {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}
int threadsOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return -1;
}

// Sets the soft RLIMIT_NPROC of `pid` (running as `user`) from a helper process running as that
// user too: changing another process's limits takes CAP_SYS_RESOURCE, which a container's root
// may not have, or the same user. `soft` 0: back to the hard limit.
bool setThreadLimit(pid_t pid, uid_t user, rlim_t soft) {
  pid_t helper = fork();
  if (helper == 0) {
    rlimit limit{};
    if (::setgid(user) != 0 || ::setuid(user) != 0) _exit(1);
    if (::prlimit(pid, RLIMIT_NPROC, nullptr, &limit) != 0) _exit(2);
    limit.rlim_cur = soft != 0 ? soft : limit.rlim_max;
    _exit(::prlimit(pid, RLIMIT_NPROC, &limit, nullptr) == 0 ? 0 : 3);
  }
  int status = 0;
  return helper > 0 && waitpid(helper, &status, 0) == helper && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

// Stops the reducer and removes its log when the test ends, however it ends.
struct Cleanup {
  ReducerChild* child;
  std::string log;
  ~Cleanup() {
    if (child->pid > 0) stopReducer(child);
    ::unlink(log.c_str());
  }
};

int countLines(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

// A two-rank job on `address`: connects within 10 s and sums 3 x 100,003 floats; Ok only when
// every element is right. kLegacy: two sockets a connection, served by threads on the reducer.
Status checkedJob(const std::string& address, CollProgress progress) {
  CollOptions o;
  o.reducers = {address};
  o.slice_bytes = 64 * 1024;
  o.window = 8;
  o.timeouts.connect_ms = 10000;
  o.timeouts.io_ms = 10000;
  o.progress = progress;
  std::vector<std::unique_ptr<CollClient>> clients;
  std::vector<Status> statuses = connectAll({o, o}, &clients);
  for (const Status& st : statuses) TALLY_RETURN_IF_ERROR(st);
  constexpr size_t kCount = 100003;
  for (int call = 0; call < 3; ++call) {
    std::vector<std::vector<float>> bufs(2, std::vector<float>(kCount));
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < kCount; ++i)
        bufs[r][i] = static_cast<float>((i % 251) * (r + 1) + call);
    }
    std::vector<Status> results(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        CollRequest req;
        results[r] = post(clients[r].get(), bufs[r].data(), bufs[r].data(), kCount,
                          DataType::kFloat32, ReduceOp::kSum, &req);
        if (results[r].isOk()) results[r] = waitRequest(&req, nullptr);
      });
    }
    for (auto& t : threads) t.join();
    for (const Status& st : results) TALLY_RETURN_IF_ERROR(st);
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < kCount; ++i) {
        const float want = static_cast<float>((i % 251) * 3 + 2 * call);
        if (bufs[r][i] != want) {
          return Status::internal("rank " + std::to_string(r) + " element " + std::to_string(i) +
                                  ": " + std::to_string(bufs[r][i]) + ", want " +
                                  std::to_string(want));
        }
      }
    }
  }
  return Status::ok();
}

// 300 silent connections to a reducer limited to 64 descriptors: it runs out, closes the
// connections it has no room for, and once the sockets go a job connects and sums correctly.
TEST(ResourceExhaustion, RunningOutOfDescriptors) {
  const std::string log = logPath();
  std::string address;
  ReducerChild c = startReducer(
      [&log] {
        int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) ::dup2(fd, 2);
        rlimit limit{64, 64};
        ::setrlimit(RLIMIT_NOFILE, &limit);
      },
      &address);
  Cleanup cleanup{&c, log};
  ASSERT_GT(c.pid, 0);
  ASSERT_FALSE(address.empty());
  const int port = portOf(address);

  std::vector<Fd> held;
  for (int i = 0; i < 300; ++i) {
    Fd fd = rawConnect(port);
    ASSERT_TRUE(fd.valid());
    held.push_back(std::move(fd));
  }
  // The reducer took what it could: its table is full.
  EXPECT_TRUE(waitUntil([&] { return openDescriptors(c.pid) >= 62; }, std::chrono::seconds(5)))
      << openDescriptors(c.pid) << " descriptors open";
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_TRUE(alive(c.pid));

  held.clear();  // the pressure goes
  auto start = Clock::now();
  Status st = checkedJob(address, CollProgress::kThread);
  EXPECT_TRUE(st.isOk()) << st.toString();
  st = checkedJob(address, CollProgress::kLegacy);
  EXPECT_TRUE(st.isOk()) << st.toString();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  // Nothing of the pressure is still held, and it was reported once, not per failure.
  EXPECT_TRUE(waitUntil([&] { return openDescriptors(c.pid) < 20; }, std::chrono::seconds(5)))
      << openDescriptors(c.pid) << " descriptors still open";
  const int reports = countLines(log, "Too many open files");
  EXPECT_GE(reports, 1);
  EXPECT_LE(reports, 2);
}

// A reducer running as an unprivileged user (the limit does not bind root) with RLIMIT_NPROC
// at the threads it has: connections served by threads fail to start them, at each step of
// their set-up (the reader and writer threads, the transport's helper threads). Each such
// connection is closed alone; with the limit lifted a job on threads sums correctly.
TEST(ResourceExhaustion, RunningOutOfThreads) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run the reducer as another user";
  const std::string log = logPath();
  const uid_t user = static_cast<uid_t>(60000 + getpid() % 5000);  // nobody else's
  std::string address;
  ReducerChild c = startReducer(
      [&log, user] {
        int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) ::dup2(fd, 2);
        if (::setgid(user) != 0 || ::setuid(user) != 0) _exit(126);
      },
      &address);
  Cleanup cleanup{&c, log};
  ASSERT_GT(c.pid, 0);
  ASSERT_FALSE(address.empty()) << "could not start tally-reducer as uid " << user;
  const int baseline = threadsOf(c.pid);
  ASSERT_GT(baseline, 0);

  // Room for 0, 1, then 2 more threads: the writer, the reader, then the transport's helpers
  // cannot start.
  for (int room = 0; room < 3; ++room) {
    ASSERT_TRUE(waitUntil([&] { return threadsOf(c.pid) == baseline; }, std::chrono::seconds(5)));
    ASSERT_TRUE(setThreadLimit(c.pid, user, static_cast<rlim_t>(baseline + room)));
    std::vector<Fd> fds = connectStreams(address, 2, 0xc0ffee + static_cast<uint64_t>(room));
    ASSERT_EQ(fds.size(), 2u);
    EXPECT_EQ(firstEvent(fds[0].get(), 5000), 0) << "with room for " << room << " threads";
    ASSERT_TRUE(alive(c.pid)) << "the reducer died with room for " << room << " threads";
    if (room == 0) {
      // Workers' one-socket TCP connections need no thread: they are served all along.
      Status st = checkedJob(address, CollProgress::kThread);
      EXPECT_TRUE(st.isOk()) << st.toString();
    }
  }
  ASSERT_TRUE(setThreadLimit(c.pid, user, 0));
  Status st = checkedJob(address, CollProgress::kLegacy);
  EXPECT_TRUE(st.isOk()) << st.toString();
  EXPECT_GE(countLines(log, "Resource temporarily unavailable"), 1);
}

}  // namespace
}  // namespace tally::reducer::test
