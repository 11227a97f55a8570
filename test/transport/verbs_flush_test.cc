// SPDX-License-Identifier: Apache-2.0
// Connection::iflush on the verbs backend, on the software device (verbs_fake.h): nothing to do
// for host memory, and every way the flush queue pair can fail ends in a clear error, never a
// hang. The working flush is in verbs_gpu_memory_test.cc.
#include <chrono>
#include <string>
#include <vector>

#include "test/transport/verbs_test_util.h"

namespace tally::transport::test {
namespace {

constexpr int64_t kWaitMs = 5000;

// What an output parameter held before a call that must clear it.
class StaleRequest final : public Request {
 public:
  Status test(bool* done, size_t*) override {
    *done = false;
    return Status::ok();
  }
  Status wait(int64_t, size_t*) override { return Status::internal("stale"); }
};

TEST(VerbsFlush, FlushOfHostMemoryIsNothing) {
  FakePair pair;
  ASSERT_NO_FATAL_FAILURE(makeFakePair({}, {}, &pair));
  std::vector<uint8_t> host(256, 0);
  std::unique_ptr<MemoryRegion> mr;
  ASSERT_TRUE(pair.server->registerMemory(host.data(), host.size(), MemoryType::kHost, &mr).isOk());
  const int qps = fakeVerbsStats().live_qps;
  void* data[2] = {host.data(), host.data() + 128};
  size_t sizes[2] = {128, 128};
  MemoryRegion* mrs[2] = {mr.get(), nullptr};
  std::unique_ptr<Request> flush = std::make_unique<StaleRequest>();
  Status status = pair.server->iflush(2, data, sizes, mrs, &flush);
  ASSERT_TRUE(status.isOk()) << status.toString();
  EXPECT_EQ(flush, nullptr);
  flush = std::make_unique<StaleRequest>();
  ASSERT_TRUE(pair.server->iflush(2, data, sizes, nullptr, &flush).isOk());
  EXPECT_EQ(flush, nullptr);
  EXPECT_EQ(fakeVerbsStats().live_qps, qps) << "no flush queue pair is needed for host memory";
  EXPECT_EQ(fakeVerbsStats().rdma_reads, 0);

  // A kCuda buffer outside the region it names is the caller's mistake.
  std::unique_ptr<MemoryRegion> cuda;
  ASSERT_TRUE(pair.server->registerMemory(host.data(), 64, MemoryType::kCuda, &cuda).isOk());
  MemoryRegion* wrong[1] = {cuda.get()};
  void* outside[1] = {host.data() + 128};
  status = pair.server->iflush(1, outside, sizes, wrong, &flush);
  EXPECT_EQ(status.code(), StatusCode::kInternal) << status.toString();
}

// Flushes of one receive buffer registered as kCuda on the server's connection.
class VerbsFlushFailure : public ::testing::Test {
 protected:
  void start(const FakeVerbsConfig& config, int64_t io_timeout_ms = 300000) {
    verbs::VerbsOptions options;
    options.timeouts.io_ms = io_timeout_ms;
    ASSERT_NO_FATAL_FAILURE(makeFakePair(config, options, &pair_));
    ASSERT_TRUE(
        pair_.server->registerMemory(buffer_.data(), buffer_.size(), MemoryType::kCuda, &mr_)
            .isOk());
  }
  Status flush(std::unique_ptr<Request>* req) {
    void* data[1] = {buffer_.data()};
    size_t sizes[1] = {buffer_.size()};
    MemoryRegion* mrs[1] = {mr_.get()};
    return pair_.server->iflush(1, data, sizes, mrs, req);
  }
  // The status of a whole flush: posting it, then waiting for it (which must not run out).
  Status flushAndWait() {
    std::unique_ptr<Request> req;
    TALLY_RETURN_IF_ERROR(flush(&req));
    if (req == nullptr) return Status::internal("a kCuda flush gave no request");
    return req->wait(kWaitMs, nullptr);
  }

  FakePair pair_;
  std::vector<uint8_t> buffer_ = std::vector<uint8_t>(512, 1);
  std::unique_ptr<MemoryRegion> mr_;
};

TEST_F(VerbsFlushFailure, FlushAfterLoopbackQpBrokeIsAnErrorNotAHang) {
  ASSERT_NO_FATAL_FAILURE(start({}));
  Status status = flushAndWait();
  ASSERT_TRUE(status.isOk()) << status.toString();
  ASSERT_EQ(breakFakeLoopbackQps(), 1);
  for (int i = 0; i < 2; ++i) {
    status = flushAndWait();
    EXPECT_FALSE(status.isOk());
    EXPECT_NE(status.code(), StatusCode::kTimeout) << status.toString();
    EXPECT_NE(status.message().find("flush"), std::string::npos) << status.toString();
  }
  // The data path does not depend on the flush queue pair.
  uint8_t byte = 9;
  uint8_t got = 0;
  void* data[1] = {&got};
  size_t sizes[1] = {1};
  int tags[1] = {0};
  std::unique_ptr<Request> recv;
  ASSERT_TRUE(pair_.server->irecv(1, data, sizes, tags, nullptr, &recv).isOk());
  ASSERT_NO_FATAL_FAILURE(sendAndWait(pair_.client.get(), &byte, 1, 0, nullptr));
  ASSERT_TRUE(recv->wait(kWaitMs, nullptr).isOk());
  EXPECT_EQ(got, 9);
}

TEST_F(VerbsFlushFailure, FailedReadIsAClearError) {
  FakeVerbsConfig config;
  config.fail_reads = true;
  ASSERT_NO_FATAL_FAILURE(start(config));
  Status status = flushAndWait();
  EXPECT_EQ(status.code(), StatusCode::kRemote) << status.toString();
  EXPECT_NE(status.message().find("flush read"), std::string::npos) << status.toString();
  EXPECT_NE(status.message().find("remote access error"), std::string::npos) << status.toString();
  // Later flushes fail the same way at once.
  std::unique_ptr<Request> req;
  EXPECT_EQ(flush(&req).code(), StatusCode::kRemote);
}

TEST_F(VerbsFlushFailure, StalledReadTimesOutWithTheIoTimeout) {
  FakeVerbsConfig config;
  config.stall_reads = true;
  ASSERT_NO_FATAL_FAILURE(start(config, /*io_timeout_ms=*/200));
  std::unique_ptr<Request> req;
  ASSERT_TRUE(flush(&req).isOk());
  ASSERT_NE(req, nullptr);
  bool done = true;
  ASSERT_TRUE(req->test(&done, nullptr).isOk());
  EXPECT_FALSE(done);
  const auto started = std::chrono::steady_clock::now();
  Status status = req->wait(-1, nullptr);  // bounded by the I/O timeout
  EXPECT_EQ(status.code(), StatusCode::kRemote) << status.toString();
  EXPECT_NE(status.message().find("TALLY_TIMEOUT_MS"), std::string::npos) << status.toString();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
}

TEST_F(VerbsFlushFailure, FlushAfterCloseFails) {
  ASSERT_NO_FATAL_FAILURE(start({}));
  pair_.server->close();
  std::unique_ptr<Request> req;
  Status status = flush(&req);
  EXPECT_EQ(status.code(), StatusCode::kRemote) << status.toString();
}

}  // namespace
}  // namespace tally::transport::test
