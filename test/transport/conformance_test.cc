// SPDX-License-Identifier: Apache-2.0
// Transport conformance: the behaviour transport.h promises, checked for every backend built.
// Each backend enters through a factory that returns a connected pair; the TCP backend is
// instantiated with 1, 2 and 4 sockets so striping is covered.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "test/transport/pair_test.h"
#include "test/transport/test_util.h"
#if TALLY_HAVE_TRANSPORT_VERBS
#include "test/transport/verbs_test_util.h"
#endif
#if TALLY_HAVE_TRANSPORT_OFI
#include "transport/ofi/ofi.h"
#endif

namespace tally::transport::test {
namespace {

using Clock = std::chrono::steady_clock;

struct Backend {
  std::string name;
  // Makes a connected pair allowing `max_requests` in flight per direction (0: default).
  std::function<Status(int max_requests, std::unique_ptr<Connection>*,
                       std::unique_ptr<Connection>*)>
      pair;
  // Empty, or why the backend cannot run on this host (its tests then skip, saying so).
  std::function<std::string()> unavailable;
  // Optional: the backend's own checks after each test, once both connections are gone.
  std::function<void()> after = nullptr;
  // A send may complete without the peer receiving it: the provider copies it whole into the
  // peer's buffers as it arrives (ofi over rxm, whose chunks are all eager).
  bool eager_sends = false;
};

// Names the parameter in test listings (gtest would print its bytes).
void PrintTo(const Backend& backend, std::ostream* os) { *os << backend.name; }

Backend tcpBackend(int sockets) {
  return {
      "tcp" + std::to_string(sockets) + "sockets",
      [sockets](int max_requests, std::unique_ptr<Connection>* a, std::unique_ptr<Connection>* b) {
        tcp::TcpOptions options;
        options.sockets = sockets;
        if (max_requests > 0) options.max_requests = max_requests;
        ConnectionOptions conn_options;
        conn_options.sockets = sockets;
        conn_options.max_requests = max_requests;
        return tcpPair(options, conn_options, a, b);
      }};
}

#if TALLY_HAVE_TRANSPORT_OFI
// libfabric's tcp provider (tcp;ofi_rxm) on the loopback domain.
ofi::OfiOptions ofiOptions(int max_requests) {
  ofi::OfiOptions options;
  options.provider = "tcp";
  options.domains = "lo";
  if (max_requests > 0) options.max_requests = max_requests;
  return options;
}

Backend ofiBackend() {
  return {"ofi_tcp",
          [](int max_requests, std::unique_ptr<Connection>* a, std::unique_ptr<Connection>* b) {
            std::shared_ptr<Network> network;
            TALLY_RETURN_IF_ERROR(ofi::createNetwork(ofiOptions(max_requests), &network));
            std::unique_ptr<Listener> listener;
            TALLY_RETURN_IF_ERROR(network->devices().front()->listen(&listener));
            ConnectionOptions conn_options;
            conn_options.max_requests = max_requests;
            std::unique_ptr<PendingConnection> pending;
            TALLY_RETURN_IF_ERROR(
                network->devices().front()->connect(listener->handle(), conn_options, &pending));
            return finishConnect(pending.get(), listener.get(), a, b);
          },
          [] {
            static const std::string why = [] {
              std::shared_ptr<Network> network;
              Status status = ofi::createNetwork(ofiOptions(0), &network);
              return status.isOk() ? std::string() : "ofi unavailable: " + status.toString();
            }();
            return why;
          },
          nullptr, /*eager_sends=*/true};
}
#endif

class ConformanceTest : public PairTest<Backend> {
 protected:
  void SetUp() override {
    if (GetParam().unavailable) {
      const std::string why = GetParam().unavailable();
      if (!why.empty()) GTEST_SKIP() << why;
    }
    connect(0);
  }

  void TearDown() override {
    a_.reset();
    b_.reset();
    if (GetParam().after && !IsSkipped()) GetParam().after();
  }

  void connect(int max_requests) {
    a_.reset();
    b_.reset();
    Status status = GetParam().pair(max_requests, &a_, &b_);
    ASSERT_TRUE(status.isOk()) << status.toString();
  }
};

TEST_P(ConformanceTest, MessageSizes) {
  const size_t sizes[] = {0, 1, 7, 4097, (1u << 20) + 3, 64u << 20};
  for (size_t size : sizes) {
    SCOPED_TRACE("size " + std::to_string(size));
    std::vector<uint8_t> data = pattern(size, static_cast<uint32_t>(size));
    std::vector<uint8_t> got(size + 16, kUnwritten);
    auto r = recv(b_.get(), got.data(), got.size(), 3);
    auto s = send(a_.get(), data.data(), size, 3);
    expectDelivered(s.get(), r.get(), data, got);
  }
}

TEST_P(ConformanceTest, ReceivePostedAfterSend) {
  std::vector<uint8_t> data = pattern(300000, 1);
  auto s = send(a_.get(), data.data(), data.size(), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::vector<uint8_t> got(data.size());
  auto r = recv(b_.get(), got.data(), got.size(), 0);
  expectDone(s.get());
  expectDone(r.get());
  EXPECT_EQ(got, data);
}

TEST_P(ConformanceTest, ManyMessagesStayInOrder) {
  constexpr int kMessages = 2000;
  constexpr int kWindow = 64;
  // Sizes cross the striping threshold so striped and unstriped messages interleave.
  auto sizeOf = [](int i) -> size_t { return (i % 7 == 0) ? 200000 + i : (i * 37) % 5000; };
  std::vector<std::vector<uint8_t>> sent(kMessages);
  for (int i = 0; i < kMessages; ++i) sent[i] = pattern(sizeOf(i), static_cast<uint32_t>(i));
  std::vector<std::vector<uint8_t>> got(kMessages);
  for (int i = 0; i < kMessages; ++i) got[i].resize(sent[i].size() + 1);

  std::vector<std::unique_ptr<Request>> sends(kMessages);
  std::vector<std::unique_ptr<Request>> recvs(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    if (i >= kWindow) {
      expectDone(sends[i - kWindow].get());
      size_t size = 0;
      expectDone(recvs[i - kWindow].get(), &size);
      EXPECT_EQ(size, sent[i - kWindow].size());
    }
    recvs[i] = recv(b_.get(), got[i].data(), got[i].size(), 5);
    sends[i] = send(a_.get(), sent[i].data(), sent[i].size(), 5);
  }
  for (int i = kMessages - kWindow; i < kMessages; ++i) {
    expectDone(sends[i].get());
    expectDone(recvs[i].get());
  }
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_EQ(0, std::memcmp(got[i].data(), sent[i].data(), sent[i].size())) << "message " << i;
  }
}

TEST_P(ConformanceTest, GroupedReceiveMatchesTags) {
  for (int n = 1; n <= kMaxRecvs; ++n) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<std::vector<uint8_t>> buffers(n);
    std::vector<void*> ptrs(n);
    std::vector<size_t> caps(n);
    std::vector<int> tags(n);
    for (int i = 0; i < n; ++i) {
      caps[i] = 1000 * (i + 1) + 70000 * (i % 3);
      buffers[i].assign(caps[i], 0);
      ptrs[i] = buffers[i].data();
      tags[i] = 100 + i;
    }
    std::unique_ptr<Request> r;
    ASSERT_TRUE(b_->irecv(n, ptrs.data(), caps.data(), tags.data(), nullptr, &r).isOk());
    ASSERT_NE(r, nullptr);
    // Send in reverse tag order, each message smaller than its buffer (some empty).
    std::vector<std::vector<uint8_t>> messages(n);
    std::vector<std::unique_ptr<Request>> sends;
    for (int i = n - 1; i >= 0; --i) {
      size_t size = (i == 2) ? 0 : caps[i] - 1 - i;
      messages[i] = pattern(size, static_cast<uint32_t>(n * 10 + i));
      sends.push_back(send(a_.get(), messages[i].data(), size, tags[i]));
    }
    size_t sizes[kMaxRecvs] = {};
    expectDone(r.get(), sizes);
    for (auto& s : sends) expectDone(s.get());
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(sizes[i], messages[i].size()) << "buffer " << i;
      EXPECT_TRUE(std::equal(messages[i].begin(), messages[i].end(), buffers[i].begin()))
          << "buffer " << i;
    }
  }
}

TEST_P(ConformanceTest, GroupedReceiveWithRepeatedTagFillsInOrder) {
  uint8_t x[8] = {};
  uint8_t y[8] = {};
  void* ptrs[2] = {x, y};
  size_t caps[2] = {8, 8};
  int tags[2] = {9, 9};
  std::unique_ptr<Request> r;
  ASSERT_TRUE(b_->irecv(2, ptrs, caps, tags, nullptr, &r).isOk());
  uint8_t first[3] = {1, 2, 3};
  uint8_t second[5] = {4, 5, 6, 7, 8};
  auto s1 = send(a_.get(), first, sizeof(first), 9);
  auto s2 = send(a_.get(), second, sizeof(second), 9);
  size_t sizes[2] = {};
  expectDone(r.get(), sizes);
  EXPECT_EQ(sizes[0], 3u);
  EXPECT_EQ(sizes[1], 5u);
  EXPECT_EQ(0, std::memcmp(x, first, 3));
  EXPECT_EQ(0, std::memcmp(y, second, 5));
}

TEST_P(ConformanceTest, MessageLargerThanBufferFails) {
  std::vector<uint8_t> small(100);
  std::vector<uint8_t> big = pattern(101, 7);
  auto r = recv(b_.get(), small.data(), small.size(), 1);
  auto s = send(a_.get(), big.data(), big.size(), 1);
  Status status = expectFailure(r.get());
  EXPECT_NE(status.message().find("101"), std::string::npos) << status.toString();
  // Sticky: the connection stays failed.
  std::unique_ptr<Request> again;
  EXPECT_FALSE(b_->isend(small.data(), 1, 1, nullptr, &again).isOk());
  closeBoth();
}

TEST_P(ConformanceTest, UnknownTagFails) {
  uint8_t buffer[16];
  uint8_t data[4] = {};
  auto r = recv(b_.get(), buffer, sizeof(buffer), 1);
  auto s = send(a_.get(), data, sizeof(data), 2);
  (void)expectFailure(r.get());
  closeBoth();
}

TEST_P(ConformanceTest, ManyRequestsInFlightAndLimit) {
  constexpr int kLimit = 256;
  connect(kLimit);
  constexpr size_t kSize = 1000;
  std::vector<std::vector<uint8_t>> data(kLimit);
  std::vector<std::vector<uint8_t>> got(kLimit, std::vector<uint8_t>(kSize));
  std::vector<std::unique_ptr<Request>> recvs(kLimit);
  std::vector<std::unique_ptr<Request>> sends(kLimit);
  for (int i = 0; i < kLimit; ++i) recvs[i] = recv(b_.get(), got[i].data(), kSize, 0);
  // At the limit: success with no request.
  std::unique_ptr<Request> extra;
  uint8_t spare[kSize];
  void* spare_ptr = spare;
  size_t spare_size = kSize;
  int tag = 0;
  ASSERT_TRUE(b_->irecv(1, &spare_ptr, &spare_size, &tag, nullptr, &extra).isOk());
  EXPECT_EQ(extra, nullptr);

  for (int i = 0; i < kLimit; ++i) {
    data[i] = pattern(kSize, static_cast<uint32_t>(i));
    // The peer's receives are all posted, so sends drain; the limit may still be hit while the
    // helper threads catch up, which is the contract: retry.
    auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
    while (!sends[i]) {
      ASSERT_TRUE(a_->isend(data[i].data(), kSize, 0, nullptr, &sends[i]).isOk());
      ASSERT_LT(Clock::now(), deadline);
    }
  }
  for (int i = 0; i < kLimit; ++i) {
    expectDone(sends[i].get());
    expectDone(recvs[i].get());
    ASSERT_EQ(got[i], data[i]) << "message " << i;
  }
  // Room again once they are done.
  ASSERT_TRUE(b_->irecv(1, &spare_ptr, &spare_size, &tag, nullptr, &extra).isOk());
  EXPECT_NE(extra, nullptr);
}

TEST_P(ConformanceTest, SendLimitReturnsNullRequest) {
  constexpr int kLimit = 4;
  connect(kLimit);
  // Large enough that nothing completes before the peer receives, so all four stay in flight.
  std::vector<uint8_t> data = pattern(32u << 20, 3);
  std::vector<std::unique_ptr<Request>> sends;
  for (int i = 0; i < kLimit; ++i) sends.push_back(send(a_.get(), data.data(), data.size(), 0));
  std::unique_ptr<Request> extra;
  ASSERT_TRUE(a_->isend(data.data(), data.size(), 0, nullptr, &extra).isOk());
  EXPECT_EQ(extra, nullptr);
  std::vector<uint8_t> got(data.size());
  for (int i = 0; i < kLimit; ++i) {
    auto r = recv(b_.get(), got.data(), got.size(), 0);
    expectDone(r.get());
    EXPECT_EQ(got, data);
  }
  for (auto& s : sends) expectDone(s.get());
}

TEST_P(ConformanceTest, BidirectionalAtOnce) {
  constexpr size_t kSize = 8u << 20;
  constexpr int kRounds = 4;
  auto run = [&](Connection* conn, uint32_t seed_out, uint32_t seed_in) {
    std::vector<uint8_t> out = pattern(kSize, seed_out);
    std::vector<uint8_t> expected = pattern(kSize, seed_in);
    std::vector<uint8_t> in(kSize);
    for (int round = 0; round < kRounds; ++round) {
      auto r = recv(conn, in.data(), kSize, round);
      auto s = send(conn, out.data(), kSize, round);
      expectDone(s.get());
      expectDone(r.get());
      EXPECT_EQ(in, expected);
    }
  };
  std::thread peer([&] { run(b_.get(), 2, 1); });
  run(a_.get(), 1, 2);
  peer.join();
}

TEST_P(ConformanceTest, PeerCloseFailsPendingReceive) {
  uint8_t buffer[64];
  auto r = recv(a_.get(), buffer, sizeof(buffer), 0);
  auto start = Clock::now();
  b_->close();
  Status status = expectFailure(r.get());
  EXPECT_EQ(status.code(), StatusCode::kRemote) << status.toString();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  // Sticky for later calls too.
  std::unique_ptr<Request> again;
  EXPECT_EQ(a_->isend(buffer, 1, 0, nullptr, &again).code(), StatusCode::kRemote);
  bool done = true;
  EXPECT_EQ(r->test(&done, nullptr).code(), StatusCode::kRemote);
  closeBoth();
}

TEST_P(ConformanceTest, PeerDestroyedFailsPendingSend) {
  // Larger than the socket buffers, so the send cannot finish without the peer. Where the
  // provider takes a send whole into the peer's buffers (eager_sends), it could finish before the
  // peer is gone: the peer goes first there, so that nobody can take the send, and the send
  // either fails at once or fails pending, with kRemote either way.
  std::vector<uint8_t> data = pattern(64u << 20, 9);
  if (GetParam().eager_sends) b_.reset();
  std::unique_ptr<Request> s;
  Status status = a_->isend(data.data(), data.size(), 0, nullptr, &s);
  if (status.isOk()) {
    ASSERT_NE(s, nullptr);
    b_.reset();
    status = expectFailure(s.get());
  }
  EXPECT_EQ(status.code(), StatusCode::kRemote) << status.toString();
  a_->close();
}

TEST_P(ConformanceTest, CloseWithPendingRequestsIsPromptAndIdempotent) {
  std::vector<uint8_t> data = pattern(64u << 20, 4);
  std::vector<uint8_t> buffer(1024);
  auto s = send(a_.get(), data.data(), data.size(), 0);
  auto r = recv(a_.get(), buffer.data(), buffer.size(), 0);
  auto start = Clock::now();
  a_->close();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  a_->close();
  EXPECT_EQ(expectFailure(s.get()).code(), StatusCode::kRemote);
  EXPECT_EQ(expectFailure(r.get()).code(), StatusCode::kRemote);
  std::unique_ptr<Request> again;
  EXPECT_FALSE(a_->isend(data.data(), 1, 0, nullptr, &again).isOk());
}

TEST_P(ConformanceTest, WaitTimesOutWithoutTraffic) {
  uint8_t buffer[8];
  auto r = recv(a_.get(), buffer, sizeof(buffer), 0);
  auto start = Clock::now();
  Status status = r->wait(50, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kTimeout);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(45));
  bool done = true;
  ASSERT_TRUE(r->test(&done, nullptr).isOk());
  EXPECT_FALSE(done);
  // Still usable afterwards.
  uint8_t data[8] = {1};
  auto s = send(b_.get(), data, sizeof(data), 0);
  expectDone(r.get());
  expectDone(s.get());
}

TEST_P(ConformanceTest, RegisterMemory) {
  std::vector<uint8_t> buffer(4096);
  std::unique_ptr<MemoryRegion> mr;
  ASSERT_TRUE(a_->registerMemory(buffer.data(), buffer.size(), MemoryType::kHost, &mr).isOk());
  EXPECT_NE(mr, nullptr);
  EXPECT_FALSE(a_->peerName().empty());
}

TEST_P(ConformanceTest, BadArgumentsAreErrors) {
  uint8_t buffer[8];
  void* ptrs[kMaxRecvs + 1] = {};
  size_t sizes[kMaxRecvs + 1] = {};
  int tags[kMaxRecvs + 1] = {};
  for (auto& p : ptrs) p = buffer;
  std::unique_ptr<Request> r;
  EXPECT_FALSE(a_->irecv(0, ptrs, sizes, tags, nullptr, &r).isOk());
  EXPECT_FALSE(a_->irecv(kMaxRecvs + 1, ptrs, sizes, tags, nullptr, &r).isOk());
}

INSTANTIATE_TEST_SUITE_P(Tcp, ConformanceTest,
                         ::testing::Values(tcpBackend(1), tcpBackend(2), tcpBackend(4)),
                         [](const ::testing::TestParamInfo<Backend>& param) {
                           return param.param.name;
                         });

#if TALLY_HAVE_TRANSPORT_OFI
INSTANTIATE_TEST_SUITE_P(Ofi, ConformanceTest, ::testing::Values(ofiBackend()),
                         [](const ::testing::TestParamInfo<Backend>& param) {
                           return param.param.name;
                         });
#endif

#if TALLY_HAVE_TRANSPORT_VERBS
// The host's RDMA device when it has one (skipped, saying so, elsewhere), and the software device
// of verbs_fake.h as InfiniBand and as RoCE, which runs every line of the backend everywhere.
Backend verbsDeviceBackend() {
  return {"verbs_device",
          [](int max_requests, std::unique_ptr<Connection>* a, std::unique_ptr<Connection>* b) {
            verbs::VerbsOptions options;
            options.side_ifname = "lo";
            if (max_requests > 0) options.max_requests = max_requests;
            std::shared_ptr<Network> network;
            TALLY_RETURN_IF_ERROR(verbs::createNetwork(options, &network));
            ConnectionOptions conn_options;
            conn_options.max_requests = max_requests;
            return verbsPair(network.get(), conn_options, a, b);
          },
          [] {
            static const std::string why = [] {
              std::shared_ptr<Network> network;
              Status status = verbs::createNetwork(verbs::VerbsOptions{}, &network);
              return status.isOk() ? std::string()
                                   : "no usable RDMA device: " + status.toString();
            }();
            return why;
          }};
}

Backend verbsFakeBackend(const std::string& name, uint8_t link_layer) {
  return {name,
          [link_layer](int max_requests, std::unique_ptr<Connection>* a,
                       std::unique_ptr<Connection>* b) {
            return verbsFakePair(link_layer, max_requests, a, b);
          },
          [] { return std::string(); },
          expectFakeVerbsClean};
}

INSTANTIATE_TEST_SUITE_P(Verbs, ConformanceTest,
                         ::testing::Values(verbsDeviceBackend(),
                                           verbsFakeBackend("verbs_fake_ib",
                                                            IBV_LINK_LAYER_INFINIBAND),
                                           verbsFakeBackend("verbs_fake_roce",
                                                            IBV_LINK_LAYER_ETHERNET)),
                         [](const ::testing::TestParamInfo<Backend>& param) {
                           return param.param.name;
                         });
#endif

}  // namespace
}  // namespace tally::transport::test
