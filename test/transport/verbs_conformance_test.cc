// SPDX-License-Identifier: Apache-2.0
// The verbs backend end to end, beyond the shared conformance suite (conformance_test.cc runs
// that over verbs too): memory regions, a send just before close, device handles. Each test runs
// on the host's RDMA device where there is one (skipped with the reason elsewhere) and always on
// the software device of verbs_fake.h, which checks what a device would refuse.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "test/transport/pair_test.h"
#include "test/transport/test_util.h"
#include "test/transport/verbs_fake.h"
#include "test/transport/verbs_test_util.h"
#include "transport/verbs/internal.h"

namespace tally::transport::test {
namespace {

using Clock = std::chrono::steady_clock;

// Where a test runs: the host's RDMA device (skipped when there is none) or the software device
// of verbs_fake.h, as InfiniBand or as RoCE.
struct VerbsBackend {
  std::string name;
  bool fake = false;
  uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;
};

void PrintTo(const VerbsBackend& backend, std::ostream* os) { *os << backend.name; }

class VerbsConformanceTest : public PairTest<VerbsBackend> {
 protected:
  void SetUp() override {
    verbs::VerbsOptions options;
    options.max_requests = 256;
    options.min_stripe = 64 * 1024;  // so striping over both data queue pairs is exercised
    options.side_ifname = "lo";
    Status status;
    if (GetParam().fake) {
      FakeVerbsConfig config;
      config.link_layer = GetParam().link_layer;
      resetFakeVerbs(config);
      status = verbs::createNetworkWith(fakeVerbsApi(), options, &network_);
    } else {
      status = verbs::createNetwork(options, &network_);
      if (!status.isOk()) {
        GTEST_SKIP() << "no RDMA device found, verbs data path not tested here: "
                     << status.toString();
      }
    }
    ASSERT_TRUE(status.isOk()) << status.toString();
    connect(0);
  }

  void TearDown() override {
    a_.reset();
    b_.reset();
    network_.reset();
    if (GetParam().fake) expectFakeVerbsClean();
  }

  void connect(int max_requests) {
    a_.reset();
    b_.reset();
    ConnectionOptions conn_options;
    conn_options.max_requests = max_requests;
    Status status = verbsPair(network_.get(), conn_options, &a_, &b_);
    ASSERT_TRUE(status.isOk()) << status.toString();
  }

  std::shared_ptr<Network> network_;
};

TEST_P(VerbsConformanceTest, MessageSizesWithAndWithoutRegions) {
  const size_t sizes[] = {0, 1, 7, 4097, (1u << 20) + 3, 64u << 20};
  for (bool registered : {false, true}) {
    for (size_t size : sizes) {
      SCOPED_TRACE("size " + std::to_string(size) + (registered ? " registered" : ""));
      std::vector<uint8_t> data = pattern(size, static_cast<uint32_t>(size));
      std::vector<uint8_t> got(size + 16, kUnwritten);
      std::unique_ptr<MemoryRegion> send_mr;
      std::unique_ptr<MemoryRegion> recv_mr;
      if (registered) {
        ASSERT_TRUE(a_->registerMemory(data.data(), size, MemoryType::kHost, &send_mr).isOk());
        ASSERT_TRUE(b_->registerMemory(got.data(), got.size(), MemoryType::kHost, &recv_mr).isOk());
      }
      std::unique_ptr<Request> r;
      void* buffer = got.data();
      size_t capacity = got.size();
      int tag = 3;
      MemoryRegion* mrs[1] = {recv_mr.get()};
      ASSERT_TRUE(b_->irecv(1, &buffer, &capacity, &tag, mrs, &r).isOk());
      std::unique_ptr<Request> s;
      ASSERT_TRUE(a_->isend(data.data(), size, 3, send_mr.get(), &s).isOk());
      expectDelivered(s.get(), r.get(), data, got);
    }
  }
}

TEST_P(VerbsConformanceTest, MessageLargerThanBufferFailsBothSides) {
  std::vector<uint8_t> small(100);
  std::vector<uint8_t> big = pattern(101, 7);
  auto r = recv(b_.get(), small.data(), small.size(), 1);
  auto s = send(a_.get(), big.data(), big.size(), 1);
  Status status = expectFailure(r.get());
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find("sent 101 bytes with tag 1 into a receive buffer of 100 bytes"),
            std::string::npos)
      << status.toString();
  EXPECT_FALSE(expectFailure(s.get()).isOk());
  std::unique_ptr<Request> again;
  EXPECT_FALSE(b_->isend(small.data(), 1, 1, nullptr, &again).isOk());
  closeBoth();
}

TEST_P(VerbsConformanceTest, SendJustBeforeCloseStillArrives) {
  std::vector<uint8_t> data = pattern(8u << 20, 5);
  std::vector<uint8_t> got(data.size());
  auto r = recv(b_.get(), got.data(), got.size(), 0);
  auto s = send(a_.get(), data.data(), data.size(), 0);
  expectDone(s.get());
  a_->close();  // the farewell may overtake the last completion on b's side
  expectDone(r.get());
  EXPECT_EQ(got, data);
  b_->close();
}

TEST_P(VerbsConformanceTest, DeviceHandlesConnectToo) {
  std::shared_ptr<Device> device = network_->devices().front();
  EXPECT_FALSE(device->properties().name.empty());
  EXPECT_GT(device->properties().speed_mbps, 0);
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(device->listen(&listener).isOk());
  std::unique_ptr<PendingConnection> pending;
  ASSERT_TRUE(device->connect(listener->handle(), {}, &pending).isOk());
  std::unique_ptr<Connection> client;
  std::unique_ptr<Connection> server;
  ASSERT_TRUE(finishConnect(pending.get(), listener.get(), &client, &server).isOk());
  uint8_t out[5] = {1, 2, 3, 4, 5};
  uint8_t in[5] = {};
  auto r = recv(server.get(), in, sizeof(in), 9);
  auto s = send(client.get(), out, sizeof(out), 9);
  expectDone(s.get());
  expectDone(r.get());
  EXPECT_EQ(0, std::memcmp(in, out, sizeof(in)));
  // A TCP handle is refused by name.
  ConnectHandle foreign{};
  std::unique_ptr<PendingConnection> refused;
  Status status = device->connect(foreign, {}, &refused);
  EXPECT_EQ(status.code(), StatusCode::kInvalidUsage);
}

INSTANTIATE_TEST_SUITE_P(
    Verbs, VerbsConformanceTest,
    ::testing::Values(VerbsBackend{"device"}, VerbsBackend{"fake_ib", true},
                      VerbsBackend{"fake_roce", true, IBV_LINK_LAYER_ETHERNET}),
    [](const ::testing::TestParamInfo<VerbsBackend>& param) { return param.param.name; });

}  // namespace
}  // namespace tally::transport::test
