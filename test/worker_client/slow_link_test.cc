// A reducer behind a slow link (docs/failover.md, "A silent reducer"): a result whose body takes
// longer than TALLY_REDUCER_TIMEOUT_MS to arrive, still arriving, is a reducer heard, not a
// silent one. The reducer's side of every rank's connection runs through a proxy that forwards
// it at 300 KB/s, so each 1 MiB result takes about 3.5 s, and its Pongs wait behind it. In every
// progress mode.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "test/support/harness.h"
#include "test/support/warnings.h"
#include "test/system/security/flip_proxy.h"

namespace tally::reducer::test {
namespace {

using security_test::FlipProxy;

constexpr int kRanks = 2;

class SlowLink : public ::testing::TestWithParam<CollProgress> {
 protected:
  void SetUp() override { ::tally::test::WarningLog::start(); }
  void TearDown() override {
    for (auto& c : clients_) {
      if (c) c->close();
    }
    clients_.clear();
    proxy_.reset();
    servers_.clear();
    ::tally::test::WarningLog::stop();
  }

  std::vector<std::unique_ptr<ReducerServer>> servers_;
  std::unique_ptr<FlipProxy> proxy_;
  std::vector<std::unique_ptr<CollClient>> clients_;
};

// Before, every rank dropped the reducer behind the proxy a second into its result's body
// ("nothing from reducer ... for 1000 ms, not even a Pong").
TEST_P(SlowLink, AResultBodySlowerThanTheReducerTimeoutKeepsItsReducer) {
  servers_ = startServers(2);
  ASSERT_EQ(servers_.size(), 2u);
  proxy_ = FlipProxy::start(servers_[1]->address());
  ASSERT_NE(proxy_, nullptr);
  CollOptions o = optionsFor({}, 1 << 20);
  o.reducers = {servers_[0]->address(), proxy_->address()};
  o.slices_per_reducer = 1;  // one 1 MiB slice per reducer and call: one long body
  o.progress = GetParam();
  o.reducer_timeout_ms = 1000;
  o.rejoin_interval_ms = 0;
  o.timeouts.io_ms = 20000;
  for (const Status& s : connectAll(std::vector<CollOptions>(kRanks, o), &clients_)) {
    ASSERT_TRUE(s.isOk()) << s.toString();
  }
  proxy_->throttle(FlipProxy::Direction::kToClient, 300 * 1000);
  // Two 1 MiB slices, one per reducer; int32 sums of known values.
  constexpr size_t kCount = 2 * (1 << 20) / 4;
  const std::string err = onEveryRank(kRanks, [&](int r) {
    std::vector<int32_t> in(kCount), out(kCount, -1);
    for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<int32_t>(i % 1000 + r * 7);
    CollRequest req;
    TALLY_RETURN_IF_ERROR(post(clients_[r].get(), in.data(), out.data(), kCount,
                               DataType::kInt32, ReduceOp::kSum, &req));
    TALLY_RETURN_IF_ERROR(waitRequest(&req, nullptr, 30000));
    for (size_t i = 0; i < kCount; ++i) {
      const int32_t want = static_cast<int32_t>(2 * (i % 1000) + 7);
      if (out[i] != want) {
        return Status::internal("element " + std::to_string(i) + ": " + std::to_string(out[i]) +
                                ", want " + std::to_string(want));
      }
    }
    return Status::ok();
  });
  EXPECT_EQ(err, "");
  const std::vector<std::string> lost =
      ::tally::test::WarningLog::with({"reducer " + proxy_->address() + " (slot", ") lost: "});
  EXPECT_TRUE(lost.empty()) << lost.size() << " ranks dropped it, first: " << lost.front();
}

INSTANTIATE_TEST_SUITE_P(Progress, SlowLink,
                         ::testing::Values(CollProgress::kThread, CollProgress::kPoll,
                                           CollProgress::kLegacy),
                         progressName);

}  // namespace
}  // namespace tally::reducer::test
