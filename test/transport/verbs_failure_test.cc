// SPDX-License-Identifier: Apache-2.0
// How the verbs backend fails, on the software device: a fabric that stops acknowledging (the
// I/O timeout) and a device that reports an error (sticky, and told to the peer at once).
#include <gtest/gtest.h>

#include "test/transport/test_util.h"
#include "test/transport/verbs_fake.h"
#include "test/transport/verbs_test_util.h"
#include "transport/verbs/internal.h"

namespace tally::transport::test {
namespace {

using Clock = std::chrono::steady_clock;

class VerbsFailureTest : public ::testing::Test {
 protected:
  void open(const FakeVerbsConfig& config, int64_t io_timeout_ms) {
    resetFakeVerbs(config);
    verbs::VerbsOptions options;
    options.side_ifname = "lo";
    options.timeouts.io_ms = io_timeout_ms;
    Status status = verbs::createNetworkWith(fakeVerbsApi(), options, &network_);
    ASSERT_TRUE(status.isOk()) << status.toString();
    status = verbsPair(network_.get(), {}, &a_, &b_);
    ASSERT_TRUE(status.isOk()) << status.toString();
  }

  void TearDown() override {
    if (a_) a_->close();
    if (b_) b_->close();
    a_.reset();
    b_.reset();
    network_.reset();
    FakeVerbsStats stats = fakeVerbsStats();
    EXPECT_EQ(stats.live_qps, 0);
    EXPECT_EQ(stats.live_mrs, 0);
    EXPECT_EQ(stats.live_contexts, 0);
    resetFakeVerbs({});
  }

  std::shared_ptr<Network> network_;
  std::unique_ptr<Connection> a_;
  std::unique_ptr<Connection> b_;
};

TEST_F(VerbsFailureTest, UnacknowledgedWritesHitTheIoTimeout) {
  FakeVerbsConfig config;
  config.stall_data = true;
  open(config, 200);
  std::vector<uint8_t> data = pattern(4096, 1);
  std::vector<uint8_t> got(4096);
  std::unique_ptr<Request> r;
  void* buffer = got.data();
  size_t size = got.size();
  int tag = 0;
  ASSERT_TRUE(b_->irecv(1, &buffer, &size, &tag, nullptr, &r).isOk());
  std::unique_ptr<Request> s;
  auto start = Clock::now();
  ASSERT_TRUE(a_->isend(data.data(), data.size(), 0, nullptr, &s).isOk());
  Status status = s->wait(kWaitMs, nullptr);
  // A dead connection, not a wait that ran out: kRemote (transport.h, connectionFailure).
  EXPECT_EQ(status.code(), StatusCode::kRemote) << status.toString();
  EXPECT_NE(status.message().find("did not take a message of 4096 bytes within the I/O timeout"),
            std::string::npos)
      << status.toString();
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(190));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  // The peer hears of it through the side channel, and its receive fails instead of hanging.
  Status peer = r->wait(kWaitMs, nullptr);
  EXPECT_EQ(peer.code(), StatusCode::kRemote) << peer.toString();
}

TEST_F(VerbsFailureTest, IdleConnectionsNeverTimeOut) {
  open({}, 100);
  std::vector<uint8_t> got(16);
  std::unique_ptr<Request> r;
  void* buffer = got.data();
  size_t size = got.size();
  int tag = 0;
  ASSERT_TRUE(b_->irecv(1, &buffer, &size, &tag, nullptr, &r).isOk());
  // A send waiting for a receive, and a receive waiting for a send: both idle, not stuck.
  std::vector<uint8_t> data = pattern(16, 2);
  std::unique_ptr<Request> s;
  ASSERT_TRUE(b_->isend(data.data(), data.size(), 0, nullptr, &s).isOk());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  bool done = true;
  ASSERT_TRUE(r->test(&done, nullptr).isOk());
  EXPECT_FALSE(done);
  ASSERT_TRUE(s->test(&done, nullptr).isOk());
  EXPECT_FALSE(done);
  // Still usable: a's receive takes b's send, a's send completes b's receive.
  std::vector<uint8_t> in(16);
  std::unique_ptr<Request> ar;
  void* in_buffer = in.data();
  ASSERT_TRUE(a_->irecv(1, &in_buffer, &size, &tag, nullptr, &ar).isOk());
  std::unique_ptr<Request> as;
  ASSERT_TRUE(a_->isend(data.data(), data.size(), 0, nullptr, &as).isOk());
  for (Request* req : {r.get(), s.get(), ar.get(), as.get()}) {
    Status status = req->wait(kWaitMs, nullptr);
    ASSERT_TRUE(status.isOk()) << status.toString();
  }
  EXPECT_EQ(in, data);
  EXPECT_EQ(got, data);
}

TEST_F(VerbsFailureTest, DeviceErrorIsStickyAndReachesThePeer) {
  FakeVerbsConfig config;
  config.fail_writes = true;
  open(config, 0);
  std::vector<uint8_t> data = pattern(100, 3);
  std::vector<uint8_t> got(100);
  std::unique_ptr<Request> r;
  void* buffer = got.data();
  size_t size = got.size();
  int tag = 4;
  ASSERT_TRUE(b_->irecv(1, &buffer, &size, &tag, nullptr, &r).isOk());
  std::unique_ptr<Request> s;
  ASSERT_TRUE(a_->isend(data.data(), data.size(), 4, nullptr, &s).isOk());
  Status status = s->wait(kWaitMs, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kRemote);
  EXPECT_NE(status.message().find("failed: remote access error"), std::string::npos)
      << status.toString();
  std::unique_ptr<Request> again;
  EXPECT_EQ(a_->isend(data.data(), 1, 4, nullptr, &again).code(), StatusCode::kRemote);
  auto start = Clock::now();
  Status peer = r->wait(kWaitMs, nullptr);
  EXPECT_EQ(peer.code(), StatusCode::kRemote) << peer.toString();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
}  // namespace tally::transport::test
