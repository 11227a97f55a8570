// SPDX-License-Identifier: Apache-2.0
// A reducer lost while a communicator forms (docs/failover.md): a reducer that is down, or that
// accepts connections and never answers, does not keep the communicator from forming on the
// others. Every rank leaves it out through one agreed epoch, every call is exact, and when it
// comes back at its address it is taken in again. Too few reducers still fail connect, naming
// each one not joined and why. In every progress mode (raw sockets with their progress thread,
// polled raw sockets, threaded links).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/fd.h"
#include "common/log.h"
#include "test/support/counting_observer.h"
#include "test/support/harness.h"
#include "test/support/warnings.h"

namespace tally::reducer::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRanks = 3;

size_t warningsWith(const std::string& a, const std::string& b) {
  return ::tally::test::WarningLog::with({a, b}).size();
}

// The address of a reducer that was started and stopped: nothing listens there now.
std::string deadAddress() {
  auto servers = startServers(1);
  EXPECT_EQ(servers.size(), 1u);
  return servers.empty() ? "127.0.0.1:1" : servers[0]->address();
}

// A socket that listens on loopback and never accepts: connections to it complete (the
// kernel's backlog) and then hear nothing, like a frozen reducer's.
struct SilentListener {
  Fd fd;
  std::string address;
  SilentListener() {
    fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(fd.get(), 64), 0);
    EXPECT_EQ(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  }
};

// Small integers: sums are exact in any order and for either type.
float valueOf(int rank, uint64_t call, size_t i) {
  return static_cast<float>((i * 7 + rank * 13 + call * 3) % 97);
}

const std::vector<size_t> kCounts = {1, 8191, 100003, 5, 65537};

// One call of round `round` (odd sizes; every other an int32 sum) on every rank at once, each
// result checked against the sum computed here.
Status callEveryRank(const std::vector<std::unique_ptr<CollClient>>& clients, uint64_t call) {
  const size_t count = kCounts[call % kCounts.size()];
  const bool ints = call % 2 == 1;
  std::string bad = onEveryRank(kRanks, [&](int r) -> Status {
    std::vector<float> f(count);
    std::vector<int32_t> n(count);
    for (size_t i = 0; i < count; ++i) {
      f[i] = valueOf(r, call, i);
      n[i] = static_cast<int32_t>(valueOf(r, call, i));
    }
    CollRequest req;
    TALLY_RETURN_IF_ERROR(ints ? post(clients[r].get(), n.data(), n.data(), count, DataType::kInt32,
                                      ReduceOp::kSum, &req)
                               : post(clients[r].get(), f.data(), f.data(), count,
                                      DataType::kFloat32, ReduceOp::kSum, &req));
    TALLY_RETURN_IF_ERROR(waitRequest(&req, nullptr, 20000));
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int q = 0; q < kRanks; ++q) want += valueOf(q, call, i);
      const float got = ints ? static_cast<float>(n[i]) : f[i];
      if (got != want) {
        return Status::internal("call " + std::to_string(call) + " element " + std::to_string(i) +
                                ": " + std::to_string(got) + ", want " + std::to_string(want));
      }
    }
    return Status::ok();
  });
  return bad.empty() ? Status::ok() : Status::internal(bad);
}

class FormationTest : public ::testing::TestWithParam<CollProgress> {
 protected:
  void SetUp() override { ::tally::test::WarningLog::start(); }
  void TearDown() override { ::tally::test::WarningLog::stop(); }

  // Options over `addresses`: a reducer not joined a second after another's Ready is lost.
  CollOptions options(const std::vector<std::string>& addresses) {
    CollOptions o;
    o.reducers = addresses;
    o.slice_bytes = 32 * 1024;
    o.window = 8;
    o.max_requests = 64;
    o.timeouts.connect_ms = 20000;
    o.timeouts.io_ms = 20000;
    o.reducer_timeout_ms = 1000;
    o.rejoin_interval_ms = 100;
    o.progress = GetParam();
    return o;
  }

  // Connects every rank; fails the test unless each did within `bound_ms`.
  void connectWithin(const CollOptions& o, int64_t bound_ms) {
    const auto start = Clock::now();
    std::vector<Status> st = connectAll(std::vector<CollOptions>(kRanks, o), &clients_);
    for (int r = 0; r < kRanks; ++r)
      ASSERT_TRUE(st[r].isOk()) << "rank " << r << ": " << st[r].toString();
    EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(bound_ms));
  }

  // Every rank warned once that the reducer at `address` (slot `slot`) was lost, naming `why`.
  void expectLostOnEveryRank(const std::string& address, int slot, const std::string& why) {
    const std::string lost = "reducer " + address + " (slot " + std::to_string(slot) + ") lost: ";
    (void)awaitOnEveryRank(lost, "(epoch 1;", Clock::now(), std::chrono::seconds(5));
    EXPECT_EQ(warningsWith(lost, "(epoch 1;"), static_cast<size_t>(kRanks));
    EXPECT_EQ(warningsWith(lost, why), static_cast<size_t>(kRanks)) << why;
  }

  // Waits until `kRanks` warnings contain both parts, or `limit` after `since`; the
  // milliseconds from `since`.
  int64_t awaitOnEveryRank(const std::string& a, const std::string& b, Clock::time_point since,
                           std::chrono::milliseconds limit) {
    while (warningsWith(a, b) < static_cast<size_t>(kRanks) && Clock::now() - since < limit) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
  }

  // A reducer started (again) at `address`, reporting to `observer`.
  void startAt(const std::string& address, CountingObserver* observer,
               std::unique_ptr<ReducerServer>* server) {
    ServerOptions so;
    so.listen = address;
    so.threads = 2;
    so.observer = observer;
    Status st = ReducerServer::start(so, server);
    ASSERT_TRUE(st.isOk()) << st.toString();
  }

  void closeClients() {
    for (auto& c : clients_) {
      if (c) c->close();
    }
  }

  std::vector<std::unique_ptr<CollClient>> clients_;
};

// A reducer down when the communicator forms: connect succeeds on the other two a second after
// their Ready, the calls are exact, and the reducer started again at its address is taken in
// and sums slices.
TEST_P(FormationTest, AReducerDownIsLeftOutAndTakenInWhenItComesBack) {
  auto servers = startServers(2);
  ASSERT_EQ(servers.size(), 2u);
  const std::string dead = deadAddress();
  CollOptions o = options({servers[0]->address(), dead, servers[1]->address()});
  ASSERT_NO_FATAL_FAILURE(connectWithin(o, 8000));
  uint64_t call = 0;
  for (; call < 10; ++call) ASSERT_TRUE(callEveryRank(clients_, call).isOk());
  expectLostOnEveryRank(dead, 1, "could not connect to reducer " + dead);

  CountingObserver observer;
  std::unique_ptr<ReducerServer> back;
  ASSERT_NO_FATAL_FAILURE(startAt(dead, &observer, &back));
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  while ((observer.rejoins.load() == 0 || observer.slices.load() == 0) && Clock::now() < deadline) {
    ASSERT_TRUE(callEveryRank(clients_, call++).isOk());
  }
  EXPECT_EQ(observer.rejoins.load(), 1u);
  EXPECT_GT(observer.slices.load(), 0u);
  for (int k = 0; k < 5; ++k) ASSERT_TRUE(callEveryRank(clients_, call++).isOk());
  closeClients();
}

// A reducer that accepts connections and never answers (frozen) is left out too.
TEST_P(FormationTest, AReducerThatNeverAnswersIsLeftOut) {
  auto servers = startServers(2);
  ASSERT_EQ(servers.size(), 2u);
  SilentListener frozen;
  CollOptions o = options({frozen.address, servers[0]->address(), servers[1]->address()});
  ASSERT_NO_FATAL_FAILURE(connectWithin(o, 8000));
  for (uint64_t call = 0; call < 10; ++call) ASSERT_TRUE(callEveryRank(clients_, call).isOk());
  expectLostOnEveryRank(frozen.address, 0, "not joined within 1000 ms of reducer");
  closeClients();
}

// A join opening to a reducer that never answers holds nothing up: while its thread waits out
// its bound, a second join (to a reducer started again at a lost one's address) is proposed,
// opened beside it and decided, and a loss after it is agreed at once. Before, proposing the
// second join made every rank's keeper wait for the first one's thread (up to
// TALLY_REDUCER_TIMEOUT_MS, no heartbeat meanwhile), and the first one's report was then taken
// for the second's: reducer 1 came back 1.9-2.0 s after it started, or not within 5 s. No
// rank may report one join with another's result.
TEST_P(FormationTest, AJoinToASilentReducerHoldsUpNoOtherJoinNorALoss) {
  auto servers = startServers(3);
  ASSERT_EQ(servers.size(), 3u);
  SilentListener silent;
  CollOptions o = options(
      {silent.address, servers[0]->address(), servers[1]->address(), servers[2]->address()});
  ASSERT_NO_FATAL_FAILURE(connectWithin(o, 8000));
  uint64_t call = 0;
  for (; call < 5; ++call) ASSERT_TRUE(callEveryRank(clients_, call).isOk());
  expectLostOnEveryRank(silent.address, 0, "not joined within 1000 ms of reducer");
  ::tally::test::WarningLog::start(log::Level::kInfo);  // from here the joins' INFO lines too

  // Connections to the silent reducer, taken off its queue and held open without a word. The
  // formation's first; then rank 0 offers it a join, and every rank's join connects.
  std::vector<Fd> held;
  auto take = [&](size_t want, int wait_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(wait_ms);
    size_t got = 0;
    while (got < want && Clock::now() < deadline) {
      pollfd p{silent.fd.get(), POLLIN, 0};
      if (::poll(&p, 1, 5) != 1) continue;
      held.emplace_back(::accept4(silent.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
      ++got;
    }
    return got;
  };
  (void)take(64, 200);
  ASSERT_GE(take(kRanks, 10000), static_cast<size_t>(kRanks))
      << "no join to the silent reducer was opened";

  // Its join is open for about a second. Reducer 1 is lost and started again at its address at
  // once, so rank 0 offers that slot a join too, while the first join's threads still wait.
  const std::string first = servers[0]->address();
  servers[0]->stop();
  servers[0].reset();
  CountingObserver observer;
  std::unique_ptr<ReducerServer> back;
  ASSERT_NO_FATAL_FAILURE(startAt(first, &observer, &back));
  const std::string joined = "reducer " + first + " joined as slot 1";
  const int64_t rejoin_ms =
      awaitOnEveryRank(joined, "continues on", Clock::now(), std::chrono::seconds(5));
  std::fprintf(stderr, "reducer 1 was taken in again %lld ms after it started\n",
               static_cast<long long>(rejoin_ms));
  EXPECT_EQ(warningsWith(joined, "continues on"), static_cast<size_t>(kRanks));
  // About one offer interval (100 ms) when its first join goes through (102-206 ms in 45 runs),
  // 1.35 s once on a loaded machine, where a join called off cost a bound more. Before the fix
  // the keepers waited out the silent reducer's join first: 1.9-2.0 s, or not within 5 s.
  EXPECT_LT(rejoin_ms, 1800) << "the join waited for the silent reducer's join";
  // No rank took the silent reducer's join's result for reducer 1's, as every rank did before.
  const std::vector<std::string> mixed =
      ::tally::test::WarningLog::with({"could not join reducer " + first + ":", silent.address});
  EXPECT_TRUE(mixed.empty()) << mixed.size() << " ranks reported reducer 1's join with another "
                             << "join's result, first: " << (mixed.empty() ? std::string() : mixed.front());

  // Reducer 2 is lost: every rank agrees on it within a few round trips, not a join's bound.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::string second = servers[1]->address();
  const std::string lost = "reducer " + second + " (slot 2) lost: ";
  const auto stopped = Clock::now();
  servers[1]->stop();
  const int64_t took = awaitOnEveryRank(lost, "continues on", stopped, std::chrono::seconds(5));
  EXPECT_EQ(warningsWith(lost, "continues on"), static_cast<size_t>(kRanks));
  std::fprintf(stderr, "the loss of reducer 2 was agreed %lld ms after it stopped\n",
               static_cast<long long>(took));
  EXPECT_LT(took, 1500) << "the loss waited for a join's thread";

  // The calls go on exact, and the reducer started again sums slices.
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  while ((observer.rejoins.load() == 0 || observer.slices.load() == 0) && Clock::now() < deadline) {
    ASSERT_TRUE(callEveryRank(clients_, call++).isOk());
  }
  EXPECT_GE(observer.rejoins.load(), 1u);
  EXPECT_GT(observer.slices.load(), 0u);
  closeClients();
}

// close() while every rank's join to a reducer that never answers is open returns at once: the
// join's threads give up their opening, as close() promises (about 100 ms), rather than waiting
// out the join's bound (here TALLY_REDUCER_TIMEOUT_MS, 3 s): before, closing took 2.7-3.0 s.
TEST_P(FormationTest, CloseDuringAJoinToASilentReducerIsPrompt) {
  auto servers = startServers(2);
  ASSERT_EQ(servers.size(), 2u);
  SilentListener silent;
  CollOptions o = options({silent.address, servers[0]->address(), servers[1]->address()});
  o.reducer_timeout_ms = 3000;
  ASSERT_NO_FATAL_FAILURE(connectWithin(o, 8000));
  for (uint64_t call = 0; call < 3; ++call) ASSERT_TRUE(callEveryRank(clients_, call).isOk());
  // Rank 0 proposes the silent reducer for its slot again; every rank's join then connects.
  // Connections are taken off the listener's queue and held open without a word.
  ::tally::test::WarningLog::start(log::Level::kInfo);
  std::vector<Fd> held;
  const std::string proposed = silent.address + " answers; proposing it for slot 0";
  bool seen = false;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    if (!seen && !::tally::test::WarningLog::with({proposed}).empty()) {
      seen = true;
      deadline = Clock::now() + std::chrono::milliseconds(300);
    }
    pollfd p{silent.fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 5) != 1) continue;
    held.emplace_back(::accept4(silent.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
  }
  ASSERT_TRUE(seen) << "no join to the silent reducer was proposed";
  const auto start = Clock::now();
  const std::string err = onEveryRank(kRanks, [&](int r) {
    clients_[r]->close();
    return Status::ok();
  });
  const int64_t took =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  std::fprintf(stderr, "closing every rank took %lld ms\n", static_cast<long long>(took));
  EXPECT_EQ(err, "");
  EXPECT_LT(took, 1000) << "close() waited for a join's opening";
}

// This process's open descriptors.
size_t openDescriptors() {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++n;
  }
  return n;
}

// A reducer lost and taken back again and again costs the workers no descriptor that outlives
// its link: the ranks' descriptors stay within a bound of where they began, whatever the number
// of cycles. Before, each retired link kept its socket until the communicator closed (3 ranks:
// 3 more descriptors per cycle in the raw modes).
TEST_P(FormationTest, LossAndRejoinCyclesLeakNoDescriptor) {
  auto servers = startServers(2);
  ASSERT_EQ(servers.size(), 2u);
  CollOptions o = options({servers[0]->address(), servers[1]->address()});
  o.rejoin_interval_ms = 20;
  ASSERT_NO_FATAL_FAILURE(connectWithin(o, 8000));
  uint64_t call = 0;
  ASSERT_TRUE(callEveryRank(clients_, call++).isOk());
  const std::string address = servers[0]->address();
  // A hundred with the progress thread; the other modes share the code that frees a link.
  const int kCycles = GetParam() == CollProgress::kThread ? 100 : 30;
  size_t start = 0;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    if (cycle == 5) start = openDescriptors();  // after the first cycles' one-time costs
    servers[0]->stop();
    servers[0].reset();
    const std::string lost = "reducer " + address + " (slot 0) lost: ";
    ASSERT_GE(awaitOnEveryRank(lost, "continues on", Clock::now(), std::chrono::seconds(5)), 0);
    ASSERT_NO_FATAL_FAILURE(startAt(address, nullptr, &servers[0]));
    const std::string joined = "reducer " + address + " joined as slot 0";
    while (warningsWith(joined, "continues on") < static_cast<size_t>(kRanks * (cycle + 1))) {
      ASSERT_TRUE(callEveryRank(clients_, call++).isOk()) << "cycle " << cycle;
    }
    ASSERT_EQ(warningsWith(lost, "continues on"), static_cast<size_t>(kRanks * (cycle + 1)));
  }
  ASSERT_TRUE(callEveryRank(clients_, call++).isOk());
  const size_t end = openDescriptors();
  std::fprintf(stderr, "descriptors after 5 cycles: %zu, after %d: %zu\n", start, kCycles, end);
  EXPECT_LE(end, start + 2 * kRanks) << "descriptors grew with the cycles";
  closeClients();
}

// The error of a communicator that loses its last reducers names the reducers out of it now:
// one lost and taken back earlier is named once, for its last loss. Before, every loss ever was
// listed, and so that reducer twice.
TEST_P(FormationTest, TheLastErrorNamesAReducerTakenBackOnceForItsLastLoss) {
  auto servers = startServers(2);
  ASSERT_EQ(servers.size(), 2u);
  CollOptions o = options({servers[0]->address(), servers[1]->address()});
  ASSERT_NO_FATAL_FAILURE(connectWithin(o, 8000));
  uint64_t call = 0;
  ASSERT_TRUE(callEveryRank(clients_, call++).isOk());
  const std::string a = servers[0]->address();
  servers[0]->stop();
  servers[0].reset();
  ASSERT_GE(awaitOnEveryRank("reducer " + a + " (slot 0) lost: ", "continues on", Clock::now(),
                             std::chrono::seconds(5)), 0);
  ASSERT_NO_FATAL_FAILURE(startAt(a, nullptr, &servers[0]));
  const std::string joined = "reducer " + a + " joined as slot 0";
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (warningsWith(joined, "continues on") < static_cast<size_t>(kRanks) &&
         Clock::now() < deadline) {
    ASSERT_TRUE(callEveryRank(clients_, call++).isOk());
  }
  ASSERT_EQ(warningsWith(joined, "continues on"), static_cast<size_t>(kRanks));
  servers[0]->stop();
  servers[1]->stop();
  const Status failed = callEveryRank(clients_, call++);
  ASSERT_FALSE(failed.isOk());
  const std::string& text = failed.message();
  size_t named = 0;
  for (size_t at = text.find(a + " ("); at != std::string::npos; at = text.find(a + " (", at + 1)) {
    ++named;
  }
  EXPECT_EQ(named, 1u) << text;
  EXPECT_NE(text.find(servers[1]->address() + " ("), std::string::npos) << text;
  closeClients();
}

// Fewer reducers joined than TALLY_MIN_REDUCERS: connect fails on every rank, within the bound,
// naming the reducer that was not joined and why.
TEST_P(FormationTest, TooFewReducersFailConnectNamingEachOneLeftOut) {
  auto servers = startServers(1);
  ASSERT_EQ(servers.size(), 1u);
  const std::string dead = deadAddress();
  CollOptions o = options({servers[0]->address(), dead});
  o.min_reducers = 2;
  const auto start = Clock::now();
  std::vector<Status> st = connectAll(std::vector<CollOptions>(kRanks, o), &clients_);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(8));
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(st[r].code(), StatusCode::kTimeout) << st[r].toString();
    EXPECT_NE(st[r].message().find("joined 1 of 2 reducers, fewer than TALLY_MIN_REDUCERS=2"),
              std::string::npos)
        << st[r].toString();
    EXPECT_NE(st[r].message().find("could not connect to reducer " + dead), std::string::npos)
        << st[r].toString();
    EXPECT_EQ(clients_[r], nullptr);
  }
}

// No reducer at all: connect fails at its timeout (no Ready ever starts the shorter wait),
// naming both.
TEST_P(FormationTest, NoReducerFailsConnectNamingEach) {
  const std::string a = deadAddress();
  const std::string b = deadAddress();
  CollOptions o = options({a, b});
  o.timeouts.connect_ms = 1500;
  std::vector<Status> st = connectAll(std::vector<CollOptions>(kRanks, o), &clients_);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(st[r].code(), StatusCode::kTimeout) << st[r].toString();
    EXPECT_NE(st[r].message().find("no reducer could be joined"), std::string::npos)
        << st[r].toString();
    EXPECT_NE(st[r].message().find(a), std::string::npos) << st[r].toString();
    EXPECT_NE(st[r].message().find(b), std::string::npos) << st[r].toString();
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, FormationTest,
                         ::testing::Values(CollProgress::kThread, CollProgress::kPoll,
                                           CollProgress::kLegacy),
                         progressName);

}  // namespace
}  // namespace tally::reducer::test
