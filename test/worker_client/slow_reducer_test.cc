// SPDX-License-Identifier: Apache-2.0
// A reducer far slower than its peers (docs/failover.md, "A slow reducer"): the link to one of
// three reducers runs through a proxy that forwards about 2 MB/s each way (0.5 under TSan) while
// the others run at loopback speed, so every call waits for that one. Every rank must see it dropped as slow,
// well before TALLY_REDUCER_TIMEOUT_MS (it is never silent), every call exact; once its link is
// fast again it is taken back. Reducers all alike slow drop nobody. In every progress mode.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test/support/harness.h"
#include "test/support/sanitizer_build.h"
#include "test/support/warnings.h"
#include "test/system/security/flip_proxy.h"

namespace tally::reducer::test {
namespace {

using security_test::FlipProxy;
using Clock = std::chrono::steady_clock;

constexpr int kRanks = 2;
constexpr int kReducers = 3;
// Under TSan every rank's own work between calls (filling and checking 3 MiB) takes long enough
// to leave the slow link idle for more than a tenth of each call at 2 MB/s: slower there, so that
// it is still busy nearly all the time.
constexpr uint64_t kSlowBytesPerSecond = (::tally::test::kThreadSanitizer ? 500 : 2000) * 1000;
// The reducer timeout the ranks run with, and the bound on the drop, which must come before it
// (TSan: a window in which the rank's own work left the link idle starts the count over).
constexpr int64_t kReducerTimeoutMs = ::tally::test::kThreadSanitizer ? 30000 : 10000;
constexpr int64_t kDropBoundMs = kReducerTimeoutMs - 500;
// One 1 MiB slice per reducer and call.
constexpr size_t kCount = kReducers * (1 << 20) / 4;

class SlowReducer : public ::testing::TestWithParam<CollProgress> {
 protected:
  void SetUp() override { ::tally::test::WarningLog::start(log::Level::kWarn); }
  void TearDown() override {
    for (auto& c : clients_) {
      if (c) c->close();
    }
    clients_.clear();
    proxies_.clear();
    servers_.clear();
    ::tally::test::WarningLog::stop();
  }

  // Reducer r behind a proxy for every r in `proxied`; the clients connected.
  void form(const std::vector<int>& proxied) {
    servers_ = startServers(kReducers);
    ASSERT_EQ(servers_.size(), static_cast<size_t>(kReducers));
    CollOptions o = optionsFor({}, 1 << 20);
    o.reducers.clear();
    for (int r = 0; r < kReducers; ++r) {
      if (std::find(proxied.begin(), proxied.end(), r) == proxied.end()) {
        o.reducers.push_back(servers_[r]->address());
        continue;
      }
      proxies_.push_back(FlipProxy::start(servers_[r]->address()));
      ASSERT_NE(proxies_.back(), nullptr);
      o.reducers.push_back(proxies_.back()->address());
    }
    o.slices_per_reducer = 1;
    o.slow_reducer_factor = paramDefaultNumber("TALLY_SLOW_REDUCER_FACTOR");  // off in optionsFor
    o.progress = GetParam();
    // Long: a drop within it is the slowness check's, not the silence timeout's.
    o.reducer_timeout_ms = kReducerTimeoutMs;
    o.rejoin_interval_ms = 200;
    o.timeouts.io_ms = 30000;
    for (const Status& s : connectAll(std::vector<CollOptions>(kRanks, o), &clients_)) {
      ASSERT_TRUE(s.isOk()) << s.toString();
    }
  }

  // Runs exact int32 all-reduces on every rank until `until` (asked on the test's thread every
  // 20 ms) holds or timeout_ms passes; the ranks stop after the same call. Returns "" or the
  // first failure; *waited: how long until `until` held (-1: never). With in_place, each call's
  // result lands over its input.
  std::string callUntil(const std::function<bool()>& until, int64_t timeout_ms,
                        int64_t* waited, bool in_place = false) {
    std::atomic<uint64_t> last{UINT64_MAX};
    std::vector<std::atomic<uint64_t>> done(kRanks);
    for (auto& d : done) d.store(0);
    std::string err;
    std::thread ranks([&] {
      err = onEveryRank(kRanks, [&](int r) {
        std::vector<int32_t> in(kCount), out(kCount);
        for (uint64_t call = 0; call < last.load(); ++call) {
          for (size_t i = 0; i < kCount; ++i) {
            in[i] = static_cast<int32_t>((i + call) % 1000 + r * 7);
          }
          if (in_place) {
            out = in;
          } else {
            std::fill(out.begin(), out.end(), -1);
          }
          CollRequest req;
          TALLY_RETURN_IF_ERROR(post(clients_[r].get(), in_place ? out.data() : in.data(),
                                     out.data(), kCount, DataType::kInt32, ReduceOp::kSum, &req));
          TALLY_RETURN_IF_ERROR(waitRequest(&req, nullptr, 30000));
          for (size_t i = 0; i < kCount; ++i) {
            const int32_t want = static_cast<int32_t>(2 * ((i + call) % 1000) + 7);
            if (out[i] != want) {
              return Status::internal("call " + std::to_string(call) + " element " +
                                      std::to_string(i) + ": " + std::to_string(out[i]) +
                                      ", want " + std::to_string(want));
            }
          }
          done[r].store(call + 1);
        }
        return Status::ok();
      });
    });
    const auto start = Clock::now();
    *waited = -1;
    while (Clock::now() - start < std::chrono::milliseconds(timeout_ms)) {
      if (until()) {
        *waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start)
                      .count();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // Every rank is at most one call ahead of another: two past the furthest is one they all
    // reach.
    uint64_t furthest = 0;
    for (auto& d : done) furthest = std::max(furthest, d.load());
    last.store(furthest + 2);
    ranks.join();
    return err;
  }

  static size_t countLines(const std::vector<std::string>& parts) {
    return ::tally::test::WarningLog::with(parts).size();
  }

  std::vector<std::unique_ptr<ReducerServer>> servers_;
  std::vector<std::unique_ptr<FlipProxy>> proxies_;
  std::vector<std::unique_ptr<CollClient>> clients_;
};

TEST_P(SlowReducer, IsDroppedWithinSecondsAndTakenBackOnceFast) {
  form({2});
  ASSERT_FALSE(HasFailure());
  const std::string slow = proxies_[0]->address();
  int64_t waited = 0;
  // At full speed first: nobody is slow.
  EXPECT_EQ(callUntil([] { return false; }, 1000, &waited), "");
  EXPECT_EQ(countLines({"lost: "}), 0u);
  proxies_[0]->throttle(FlipProxy::Direction::kToServer, kSlowBytesPerSecond);
  proxies_[0]->throttle(FlipProxy::Direction::kToClient, kSlowBytesPerSecond);
  const std::vector<std::string> dropped{"reducer " + slow + " (slot 2) lost: slower than its peers"};
  EXPECT_EQ(callUntil([&] { return countLines(dropped) >= kRanks; }, kReducerTimeoutMs + 5000,
                      &waited),
            "");
  // Three half-second windows, the agreement, and a slow call or two in flight meanwhile (about
  // 2.5 s; slack for a loaded machine), before the reducer timeout could run out.
  EXPECT_GE(waited, 1500);
  EXPECT_LT(waited, kDropBoundMs) << "the slow reducer was not dropped on every rank in time";
  EXPECT_EQ(countLines({"not even a Pong"}), 0u);
  // Fast again: taken back after its wait (four rejoin intervals).
  proxies_[0]->unthrottle(FlipProxy::Direction::kToServer);
  proxies_[0]->unthrottle(FlipProxy::Direction::kToClient);
  const std::vector<std::string> joined{"reducer " + slow + " joined as slot 2"};
  EXPECT_EQ(callUntil([&] { return countLines(joined) >= kRanks; }, 10000, &waited), "");
  EXPECT_GE(waited, 0) << "not taken back";
  // It sums slices again, exact, and stays.
  EXPECT_EQ(callUntil([] { return false; }, 1500, &waited), "");
  EXPECT_EQ(countLines({"lost: slower than its peers"}), static_cast<size_t>(kRanks));
}

// In-place calls larger than a copy kept aside: a result from the slow reducer that has started
// to land overwrites the input that the loss would sum again elsewhere. A drop as slow is the
// keeper's choice, made while that reducer still answers: the ranks first let what it has in
// hand for such calls finish, and no call fails.
TEST_P(SlowReducer, InPlaceCallsSurviveTheDrop) {
  form({2});
  ASSERT_FALSE(HasFailure());
  // INFO too: each rank says how its link to the reducer dropped as slow ended.
  ::tally::test::WarningLog::start(log::Level::kInfo);
  const std::string slow = proxies_[0]->address();
  proxies_[0]->throttle(FlipProxy::Direction::kToServer, kSlowBytesPerSecond);
  proxies_[0]->throttle(FlipProxy::Direction::kToClient, kSlowBytesPerSecond);
  const std::vector<std::string> dropped{"reducer " + slow + " (slot 2) lost: slower than its peers",
                                        "continues on"};
  int64_t waited = 0;
  EXPECT_EQ(callUntil([&] { return countLines(dropped) >= kRanks; }, kReducerTimeoutMs + 5000,
                      &waited, true),
            "");
  EXPECT_GE(waited, 0) << "the slow reducer was not dropped";
  EXPECT_EQ(countLines({"overwritten"}), 0u);
  // Every rank let the link finish first: it ended with nothing of its landing.
  const std::vector<std::string> ends =
      ::tally::test::WarningLog::with({"reducer " + slow + " (slot 2) ends after"});
  EXPECT_EQ(ends.size(), static_cast<size_t>(kRanks));
  for (const std::string& line : ends) {
    EXPECT_NE(line.find("(0 landing)"), std::string::npos) << line;
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  // And on two reducers, in place, exact.
  EXPECT_EQ(callUntil([] { return false; }, 1000, &waited, true), "");
}

TEST_P(SlowReducer, ReducersAllAlikeSlowDropNobody) {
  form({0, 1, 2});
  ASSERT_FALSE(HasFailure());
  for (auto& p : proxies_) {
    p->throttle(FlipProxy::Direction::kToServer, 2 * kSlowBytesPerSecond);
    p->throttle(FlipProxy::Direction::kToClient, 2 * kSlowBytesPerSecond);
  }
  int64_t waited = 0;
  EXPECT_EQ(callUntil([] { return false; }, 4000, &waited), "");
  EXPECT_EQ(countLines({"lost: "}), 0u);
}

INSTANTIATE_TEST_SUITE_P(Progress, SlowReducer,
                         ::testing::Values(CollProgress::kThread, CollProgress::kPoll,
                                           CollProgress::kLegacy),
                         progressName);

}  // namespace
}  // namespace tally::reducer::test
