// SPDX-License-Identifier: Apache-2.0
// A rank that closes its communicator cleanly (Bye) while the others go on: their next call fails
// within a round trip, with a reason that names the rank, not at TALLY_TIMEOUT_MS with one that
// blames a reducer. And a normal teardown, every rank closing once its calls are done (at once or
// one after another), logs no WARN anywhere, workers or reducers. Three ranks and two in-process
// reducers, every progress mode.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "test/support/harness.h"
#include "test/support/warnings.h"

namespace tally::reducer::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRanks = 3;
constexpr int kCalls = 3;
constexpr size_t kCount = 100003;  // floats: several slices on each reducer
constexpr int64_t kIoTimeoutMs = 30000;

float valueOf(int rank, int call, size_t i) {
  return static_cast<float>((i * 7 + rank * 13 + call * 5) % 97);  // exact sums in any order
}

// `rank`'s call number `call`, posted and waited for; its result checked.
Status exactCall(CollClient* c, int rank, int call) {
  std::vector<float> buf(kCount);
  for (size_t i = 0; i < kCount; ++i) buf[i] = valueOf(rank, call, i);
  CollRequest req;
  TALLY_RETURN_IF_ERROR(
      post(c, buf.data(), buf.data(), kCount, DataType::kFloat32, ReduceOp::kSum, &req));
  size_t bytes = 0;
  TALLY_RETURN_IF_ERROR(waitRequest(&req, &bytes));
  for (size_t i = 0; i < kCount; ++i) {
    float want = 0;
    for (int q = 0; q < kRanks; ++q) want += valueOf(q, call, i);
    if (buf[i] != want) {
      return Status::internal("call " + std::to_string(call) + " element " + std::to_string(i) +
                              ": " + std::to_string(buf[i]) + " != " + std::to_string(want));
    }
  }
  return Status::ok();
}

class ByeTest : public ::testing::TestWithParam<CollProgress> {
 protected:
  void SetUp() override {
    ::tally::test::WarningLog::start();
    servers_ = startServers(2);
    ASSERT_EQ(servers_.size(), 2u);
    CollOptions o = optionsFor(servers_);
    o.progress = GetParam();
    o.timeouts.io_ms = kIoTimeoutMs;
    auto st = connectAll(std::vector<CollOptions>(kRanks, o), &clients_);
    for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  }
  void TearDown() override {
    for (auto& c : clients_) {
      if (c) c->close();
    }
    clients_.clear();
    servers_.clear();
    ::tally::test::WarningLog::stop();
  }

  // Every rank runs kCalls exact calls.
  void exactCalls() {
    const std::string err = onEveryRank(kRanks, [&](int r) -> Status {
      for (int call = 0; call < kCalls; ++call) {
        TALLY_RETURN_IF_ERROR(exactCall(clients_[r].get(), r, call));
      }
      return Status::ok();
    });
    ASSERT_EQ(err, "");
  }

  std::vector<std::unique_ptr<ReducerServer>> servers_;
  std::vector<std::unique_ptr<CollClient>> clients_;
};

TEST_P(ByeTest, TheOthersNextCallFailsAtOnceNamingTheRankThatClosed) {
  exactCalls();
  clients_[2]->close();
  // Ranks 0 and 1 go on with a call rank 2 will never post.
  std::vector<Status> st(2);
  std::vector<int64_t> took_ms(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> buf(kCount, 1.0f);
      CollRequest req;
      const auto start = Clock::now();
      st[r] = post(clients_[r].get(), buf.data(), buf.data(), kCount, DataType::kFloat32,
                   ReduceOp::kSum, &req);
      // Well past TALLY_TIMEOUT_MS, so that the failure shows whichever way it comes.
      if (st[r].isOk()) st[r] = waitRequest(&req, nullptr, kIoTimeoutMs + 15000);
      took_ms[r] =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(st[r].isOk()) << "rank " << r;
    EXPECT_LT(took_ms[r], 2000) << "rank " << r << ": " << st[r].toString();
    EXPECT_NE(st[r].message().find("rank 2 (peer "), std::string::npos)
        << "rank " << r << ": " << st[r].toString();
    EXPECT_NE(st[r].message().find("closed its communicator"), std::string::npos)
        << "rank " << r << ": " << st[r].toString();
  }
  // Rank 2 had left: the failure is not its to report.
  EXPECT_TRUE(::tally::test::WarningLog::with({"CollNet rank 2"}).empty());
}

// NCCL's teardown: every rank closes its communicator once its calls are done.
TEST_P(ByeTest, EveryRankClosingAfterItsCallsLogsNoWarning) {
  exactCalls();
  const std::string err = onEveryRank(kRanks, [&](int r) -> Status {
    clients_[r]->close();
    return Status::ok();
  });
  EXPECT_EQ(err, "");
  for (auto& s : servers_) s->stop();
  EXPECT_EQ(::tally::test::WarningLog::with({}), std::vector<std::string>{});
}

// The same, one rank after another, the others idle meanwhile (their Pings answered).
TEST_P(ByeTest, RanksClosingOneAfterAnotherLogNoWarning) {
  exactCalls();
  for (int r = kRanks - 1; r >= 0; --r) {
    clients_[r]->close();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  for (auto& s : servers_) s->stop();
  EXPECT_EQ(::tally::test::WarningLog::with({}), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(Modes, ByeTest,
                         ::testing::Values(CollProgress::kThread, CollProgress::kPoll,
                                           CollProgress::kLegacy),
                         progressName);

}  // namespace
}  // namespace tally::reducer::test
