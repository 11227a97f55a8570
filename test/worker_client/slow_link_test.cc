// SPDX-License-Identifier: Apache-2.0
// A reducer behind a slow link, through a proxy that throttles one direction of every rank's
// connection. A result whose body takes longer than TALLY_REDUCER_TIMEOUT_MS to arrive, still
// arriving, is a reducer heard, not a silent one (docs/failover.md, "A silent reducer"); and a
// post never waits for a transport that has no room for its sends (the posting thread holds the
// client's post lock, which the keeper needs to apply any change). In every progress mode.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "test/support/harness.h"
#include "test/support/warnings.h"
#include "test/system/security/flip_proxy.h"
#include "transport/network.h"

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
  // Far slower than its peer, but this test is about silence: the slowness check is off.
  o.slow_reducer_factor = 0;
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

// The reducer stops taking bytes (its side of the proxy forwards 100 B/s) and the transport
// allows 4 sends in flight (two slices): once the socket buffers are full, the third slice of a
// call finds no room. The post must still return at once, leaving the rest to the link's own
// threads. Before, a threaded link's posting thread waited for the oldest send, which here ends
// only with TALLY_TIMEOUT_MS (10 s) and the reducer's loss. Once the proxy forwards again the
// call completes, every slice sent whole and in order.
TEST_P(SlowLink, APostIntoAStuckTransportReturnsAtOnce) {
  servers_ = startServers(1);
  ASSERT_EQ(servers_.size(), 1u);
  proxy_ = FlipProxy::start(servers_[0]->address());
  ASSERT_NE(proxy_, nullptr);
  constexpr uint64_t kSliceBytes = 4 << 20;
  CollOptions o = optionsFor({}, kSliceBytes);
  o.reducers = {proxy_->address()};
  o.slices_per_reducer = 1;
  o.progress = GetParam();
  o.reducer_timeout_ms = 0;  // a silent reducer is not dropped: only the post is timed here
  o.rejoin_interval_ms = 0;
  o.timeouts.io_ms = 10000;
  transport::NetworkConfig net;
  net.max_requests = 4;
  net.tcp.sockets = 1;  // one socket's buffers to fill
  ASSERT_TRUE(transport::openDefaultNetwork(net, &o.network).isOk());
  for (const Status& s : connectAll({o}, &clients_)) ASSERT_TRUE(s.isOk()) << s.toString();
  proxy_->throttle(FlipProxy::Direction::kToServer, 100);

  // Sixteen 4 MiB slices, eight in the window: more than the socket buffers hold.
  constexpr size_t kCount = 16 * kSliceBytes / 4;
  std::vector<int32_t> in(kCount), out(kCount, -1);
  for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<int32_t>(i % 100003);
  CollRequest req;
  const auto start = std::chrono::steady_clock::now();
  Status st = clients_[0]->iallreduce(in.data(), out.data(), kCount, DataType::kInt32,
                                      ReduceOp::kSum, &req);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  ASSERT_TRUE(st.isOk()) << st.toString();
  ASSERT_TRUE(req.posted());
  EXPECT_LT(took.count(), 2000) << "the post waited for the transport";

  proxy_->throttle(FlipProxy::Direction::kToServer, 1ull << 40);
  st = waitRequest(&req, nullptr, 30000);
  ASSERT_TRUE(st.isOk()) << st.toString();
  for (size_t i = 0; i < kCount; ++i) {
    if (out[i] != in[i]) FAIL() << "element " << i << ": " << out[i] << ", want " << in[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Progress, SlowLink,
                         ::testing::Values(CollProgress::kThread, CollProgress::kPoll,
                                           CollProgress::kLegacy),
                         progressName);

}  // namespace
}  // namespace tally::reducer::test
