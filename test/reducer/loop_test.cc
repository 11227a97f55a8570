// SPDX-License-Identifier: Apache-2.0
// The reducer's event loops (reducer/loop.h): the thread count does not grow with connections,
// idle connections cost a loop nothing while others all-reduce, and closed ones are forgotten.
#include <dirent.h>
#include <sys/resource.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test/support/counting_observer.h"
#include "test/support/harness.h"
#include "transport/network.h"

namespace tally::reducer::test {
namespace {

int threadCount() {
  int n = 0;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n;
}

bool waitFor(const std::function<bool()>& done, int64_t ms = 10000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// A reducer of `loops` event loops with `count` connections that never say anything: each
// holds a socket on the reducer, not a thread.
struct IdleReducer {
  CountingObserver observer;
  std::unique_ptr<ReducerServer> server;
  std::vector<std::unique_ptr<transport::Connection>> idle;

  void start(int loops, int count) {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.threads = loops;
    o.observer = &observer;
    ASSERT_TRUE(ReducerServer::start(o, &server).isOk());
    transport::NetworkConfig net;
    net.tcp.sockets = 1;
    net.timeouts.connect_ms = 5000;
    transport::ConnectionOptions one;
    one.sockets = 1;
    idle.resize(static_cast<size_t>(count));
    for (auto& c : idle) {
      ASSERT_TRUE(transport::connectDefault(server->address(), net, one, &c).isOk());
    }
    ASSERT_TRUE(waitFor([&] { return observer.connections.load() == count; }))
        << observer.connections.load() << " connections open";
  }
};

TEST(EventLoops, ThreadsStayAtTheLoopCountWith256Connections) {
  constexpr int kLoops = 2;
  constexpr int kIdle = 256;
  const int before = threadCount();
  ASSERT_GT(before, 0);
  IdleReducer reducer;
  reducer.start(kLoops, kIdle);
  if (HasFatalFailure()) return;
  CountingObserver& observer = reducer.observer;
  std::unique_ptr<ReducerServer>& server = reducer.server;
  // The loops and the accept thread; the idle clients' connections start no helper threads
  // until they post.
  EXPECT_LE(threadCount() - before, kLoops + 2) << "threads grew with connections";

  // Four workers all-reduce beside them, checked.
  const int kRanks = 4;
  CollOptions co;
  co.reducers = {server->address()};
  co.slice_bytes = 64 << 10;
  co.timeouts.connect_ms = 5000;
  co.timeouts.io_ms = 10000;
  std::vector<std::unique_ptr<CollClient>> clients;
  for (const Status& s : connectAll(std::vector<CollOptions>(kRanks, co), &clients)) {
    ASSERT_TRUE(s.isOk()) << s.toString();
  }
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> v(300001, static_cast<float>(r + 1));
      CollRequest req;
      Status s = post(clients[r].get(), v.data(), v.data(), v.size(), DataType::kFloat32,
                      ReduceOp::kSum, &req);
      if (s.isOk()) s = waitRequest(&req, nullptr);
      if (!s.isOk()) {
        errors[r] = s.toString();
      } else if (v.front() != 10.0f || v.back() != 10.0f) {
        errors[r] = "wrong sum " + std::to_string(v.front());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  for (auto& c : clients) c->close();
  clients.clear();

  reducer.idle.clear();  // closes them: the reducer forgets every one
  EXPECT_TRUE(waitFor([&] { return observer.connections.load() == 0; }))
      << observer.connections.load() << " connections still open";
  server->stop();
  EXPECT_EQ(observer.errors[static_cast<size_t>(ServerError::kInternal)].load(), 0u);
}

double processCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// An idle reducer sleeps: its loops wake once a tick for the timeouts and never poll in between.
// (A wait rounded down to whole milliseconds once turned the last millisecond before every tick
// into a busy loop of epoll_wait calls: about 1% of a core per loop, 90,000 wasted syscalls in a
// 6 s benchmark.) The bound is a tenth of that for the whole process.
TEST(EventLoops, AnIdleReducerDoesNotSpin) {
  constexpr int kLoops = 4;
  IdleReducer reducer;
  reducer.start(kLoops, kLoops);
  if (HasFatalFailure()) return;
  constexpr double kSeconds = 2.0;
  const double cpu0 = processCpuSeconds();
  std::this_thread::sleep_for(std::chrono::duration<double>(kSeconds));
  const double used = processCpuSeconds() - cpu0;
  EXPECT_LT(used, kLoops * kSeconds * 0.01 / 10 + 0.005)
      << used * 1000 << " ms of CPU in " << kSeconds << " s idle";
}

}  // namespace
}  // namespace tally::reducer::test
