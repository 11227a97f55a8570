// SPDX-License-Identifier: Apache-2.0
// The keeper's Pings (docs/failover.md, "A silent reducer"), counted at a reducer the test plays
// (test/support/fake_reducer.h): an idle link is pinged at a quarter of TALLY_REDUCER_TIMEOUT_MS,
// and with a timeout of 0 ("only a failed connection drops a reducer") never. In every progress
// mode.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "test/support/fake_reducer.h"
#include "test/support/harness.h"

namespace tally::reducer::test {
namespace {

constexpr int kRanks = 2;

class Heartbeat : public ::testing::TestWithParam<CollProgress> {
 protected:
  void TearDown() override {
    for (auto& c : clients_) {
      if (c) c->close();
    }
    clients_.clear();
    if (fake_) fake_->stop();
  }

  // Both ranks on the fake alone, with this reducer timeout; one exact all-reduce, so the link
  // has carried data before it idles.
  void form(int64_t reducer_timeout_ms) {
    ASSERT_TRUE(FakeReducer::start(kRanks, FakeScript{}, &fake_).isOk());
    CollOptions o = optionsFor({});
    o.reducers.push_back(fake_->address());
    o.progress = GetParam();
    o.reducer_timeout_ms = reducer_timeout_ms;
    o.rejoin_interval_ms = 0;
    for (const Status& s : connectAll(std::vector<CollOptions>(kRanks, o), &clients_)) {
      ASSERT_TRUE(s.isOk()) << s.toString();
    }
    const std::string err = onEveryRank(kRanks, [&](int r) {
      std::vector<int32_t> in(1001), out(1001, -1);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i * 3 + r * 1000);
      CollRequest req;
      TALLY_RETURN_IF_ERROR(post(clients_[r].get(), in.data(), out.data(), in.size(),
                                 DataType::kInt32, ReduceOp::kSum, &req));
      size_t bytes = 0;
      TALLY_RETURN_IF_ERROR(waitRequest(&req, &bytes));
      for (size_t i = 0; i < out.size(); ++i) {
        if (out[i] != static_cast<int32_t>(2 * i * 3 + 1000)) {
          return Status::internal("test: element " + std::to_string(i) + " is " +
                                  std::to_string(out[i]));
        }
      }
      return Status::ok();
    });
    ASSERT_EQ(err, "");
  }

  std::unique_ptr<FakeReducer> fake_;
  std::vector<std::unique_ptr<CollClient>> clients_;
};

TEST_P(Heartbeat, TimeoutZeroSendsNoPings) {
  form(0);
  const uint64_t before = fake_->pings();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(fake_->pings() - before, 0u);
}

// At 800 ms a silent link is pinged every 200 ms (one Ping until it is answered): over an idle
// second each rank sends a few, not one per keeper tick.
TEST_P(Heartbeat, AnIdleLinkIsPingedAtAQuarterOfTheTimeout) {
  form(800);
  const uint64_t before = fake_->pings();
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const uint64_t pings = fake_->pings() - before;
  EXPECT_GE(pings, static_cast<uint64_t>(kRanks * 2));
  EXPECT_LE(pings, static_cast<uint64_t>(kRanks * 8));
}

INSTANTIATE_TEST_SUITE_P(Progress, Heartbeat,
                         ::testing::Values(CollProgress::kThread, CollProgress::kPoll,
                                           CollProgress::kLegacy),
                         progressName);

}  // namespace
}  // namespace tally::reducer::test
