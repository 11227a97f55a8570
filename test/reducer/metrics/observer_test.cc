// SPDX-License-Identifier: Apache-2.0
// The ServerObserver events of an in-process ReducerServer: exact bytes and slices after known
// all-reduces, connection and communicator counts that return to 0, and one error per incident
// under the right cause.
#include <gtest/gtest.h>

#include <array>
#include <cstring>

#include "protocol/wire.h"
#include "test/support/counting_observer.h"
#include "test/support/harness.h"
#include "transport/network.h"

namespace tally::reducer::test {
namespace {

constexpr uint64_t kSliceBytes = 64 * 1024;

std::unique_ptr<ReducerServer> startObserved(ServerObserver* observer) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.threads = 2;
  o.observer = observer;
  std::unique_ptr<ReducerServer> s;
  Status st = ReducerServer::start(o, &s);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return s;
}

// A worker speaking the wire protocol by hand, to send what CollClient never would.
class RawWorker {
 public:
  Status connect(const std::string& address) {
    transport::NetworkConfig net;
    net.tcp.sockets = 1;
    net.timeouts.connect_ms = 5000;
    return transport::connectDefault(address, net, transport::ConnectionOptions{}, &conn_);
  }
  Status send(const void* data, size_t size) {
    std::unique_ptr<transport::Request> req;
    TALLY_RETURN_IF_ERROR(conn_->isend(data, size, wire::kTagHeader, nullptr, &req));
    if (!req) return Status::internal("test: no room to send");
    return finish(req.get(), nullptr);
  }
  Status send(const wire::Frame& f) { return send(f.data(), f.size); }
  // Receives one header message.
  Status recv(std::array<uint8_t, wire::kMaxHeaderBytes>* buf, size_t* got) {
    void* data = buf->data();
    size_t size = buf->size();
    int tag = wire::kTagHeader;
    transport::MemoryRegion* mr = nullptr;
    std::unique_ptr<transport::Request> req;
    TALLY_RETURN_IF_ERROR(conn_->irecv(1, &data, &size, &tag, &mr, &req));
    if (!req) return Status::internal("test: no room to receive");
    size_t sizes[1] = {0};
    TALLY_RETURN_IF_ERROR(finish(req.get(), sizes));
    *got = sizes[0];
    return Status::ok();
  }
  // Closes without Bye: to the reducer, a lost peer.
  void drop() { conn_->close(); }

 private:
  Status finish(transport::Request* req, size_t* sizes) {
    Status st = req->wait(5000, sizes);
    if (!st.isOk()) conn_->close();  // a request may only be dropped once its connection closed
    return st;
  }
  std::unique_ptr<transport::Connection> conn_;
};

wire::Hello helloFor(uint32_t rank, uint32_t nranks) {
  wire::Hello h;
  h.comm = {0x1234, 0x5678};
  h.rank = rank;
  h.nranks = nranks;
  h.reducer_index = 0;
  h.nreducers = 1;
  h.slice_bytes = kSliceBytes;
  h.window = 4;
  return h;
}

bool backToIdle(const CountingObserver& obs) {
  return waitUntil([&] { return obs.connections == 0 && obs.communicators == 0; });
}

TEST(ServerObserverTest, CountsBytesSlicesConnectionsAndCommunicators) {
  constexpr int kRanks = 3;
  constexpr int kCalls = 5;
  // float32: 400000 bytes over 2 reducers. protocol/slicing.h wants 8 slices per reducer, 6250
  // elements each, but no slice under 32 KiB: 13 slices of 8192 elements (the last 1696).
  constexpr size_t kCount = 100000;
  const uint64_t slices_per_call = 13;

  CountingObserver obs[2];
  std::vector<std::unique_ptr<ReducerServer>> servers;
  for (auto& o : obs) servers.push_back(startObserved(&o));
  ASSERT_TRUE(servers[0] && servers[1]);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st =
      connectAll(std::vector<CollOptions>(kRanks, optionsFor(servers, kSliceBytes)), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  // Every connection was counted before its Ready went out.
  for (auto& o : obs) {
    EXPECT_EQ(o.connections, kRanks);
    EXPECT_EQ(o.communicators, 1);
  }

  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> v(kCount);
      for (int k = 0; k < kCalls; ++k) {
        for (size_t i = 0; i < kCount; ++i) v[i] = static_cast<float>(r + k + i % 3);
        CollRequest req;
        Status s = post(clients[r].get(), v.data(), v.data(), kCount, DataType::kFloat32,
                        ReduceOp::kSum, &req);
        if (s.isOk()) s = waitRequest(&req, nullptr);
        if (!s.isOk()) {
          errors[r] = s.toString();
          return;
        }
        if (v[kCount - 1] != static_cast<float>(0 + 1 + 2 + kRanks * (k + (kCount - 1) % 3))) {
          errors[r] = "wrong sum in call " + std::to_string(k);
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;

  // Counted before any result went out, so exact as soon as every rank has its results.
  const uint64_t want_bytes = uint64_t{kCalls} * kCount * sizeof(float) * kRanks;
  const uint64_t want_slices = kCalls * slices_per_call;
  EXPECT_EQ(obs[0].bytes + obs[1].bytes, want_bytes);
  EXPECT_EQ(obs[0].slices + obs[1].slices, want_slices);
  for (auto& o : obs) {
    EXPECT_GT(o.slices, 0u) << "the client spreads slices over both reducers";
    EXPECT_GE(o.min_latency_ns, 0);
    EXPECT_LT(o.max_latency_ns, int64_t{10'000'000'000});
  }

  for (auto& c : clients) c->close();
  for (auto& o : obs) {
    EXPECT_TRUE(backToIdle(o)) << o.connections << " connections, " << o.communicators
                               << " communicators left";
    EXPECT_EQ(o.peak_connections, kRanks);
    EXPECT_EQ(o.peak_communicators, 1);
    EXPECT_EQ(o.totalErrors(), 0u);
    EXPECT_EQ(o.communicator_failures, 0u);
  }
}

TEST(ServerObserverTest, RejectedHelloCountsOneError) {
  CountingObserver obs;
  auto server = startObserved(&obs);
  ASSERT_TRUE(server);
  RawWorker first, second;
  ASSERT_TRUE(first.connect(server->address()).isOk());
  ASSERT_TRUE(first.send(wire::encodeHello(helloFor(0, 2))).isOk());
  ASSERT_TRUE(waitUntil([&] { return obs.communicators == 1; }));

  // Same communicator, but 3 ranks where the first member said 2.
  ASSERT_TRUE(second.connect(server->address()).isOk());
  ASSERT_TRUE(second.send(wire::encodeHello(helloFor(1, 3))).isOk());
  std::array<uint8_t, wire::kMaxHeaderBytes> buf;
  size_t got = 0;
  ASSERT_TRUE(second.recv(&buf, &got).isOk());  // the reducer's Challenge (no job token)
  wire::Challenge challenge;
  ASSERT_TRUE(wire::decodeChallenge(buf.data(), got, &challenge).isOk());
  ASSERT_TRUE(second.recv(&buf, &got).isOk());
  wire::Reason reason;
  ASSERT_TRUE(wire::decodeReject(buf.data(), got, &reason).isOk());
  EXPECT_NE(reason.text.find("says 3 ranks"), std::string::npos) << reason.text;

  EXPECT_TRUE(waitUntil([&] { return obs.errorCount(ServerError::kRejectedHello) == 1; }));
  EXPECT_TRUE(waitUntil([&] { return obs.connections == 1; }));  // the rejected one closed
  EXPECT_EQ(obs.communicators, 1);

  ASSERT_TRUE(first.send(wire::encodeBye()).isOk());
  EXPECT_TRUE(backToIdle(obs));
  EXPECT_EQ(obs.errorCount(ServerError::kRejectedHello), 1u);
  EXPECT_EQ(obs.totalErrors(), 1u);
  EXPECT_EQ(obs.communicator_failures, 0u);
}

TEST(ServerObserverTest, GarbageFrameCountsProtocolError) {
  CountingObserver obs;
  auto server = startObserved(&obs);
  ASSERT_TRUE(server);
  RawWorker w;
  ASSERT_TRUE(w.connect(server->address()).isOk());
  std::array<uint8_t, 24> garbage;
  garbage.fill(0xab);
  ASSERT_TRUE(w.send(garbage.data(), garbage.size()).isOk());
  EXPECT_TRUE(waitUntil([&] { return obs.errorCount(ServerError::kProtocol) == 1; }));
  EXPECT_TRUE(backToIdle(obs));  // the reducer dropped the connection
  w.drop();
  EXPECT_EQ(obs.totalErrors(), 1u);
  EXPECT_EQ(obs.peak_communicators, 0);
}

TEST(ServerObserverTest, LostMemberCountsPeerLostAndFailsItsCommunicator) {
  CountingObserver obs;
  auto server = startObserved(&obs);
  ASSERT_TRUE(server);
  RawWorker w;
  ASSERT_TRUE(w.connect(server->address()).isOk());
  ASSERT_TRUE(w.send(wire::encodeHello(helloFor(0, 2))).isOk());
  ASSERT_TRUE(waitUntil([&] { return obs.communicators == 1; }));
  w.drop();
  EXPECT_TRUE(waitUntil([&] { return obs.errorCount(ServerError::kPeerLost) == 1; }));
  EXPECT_TRUE(backToIdle(obs));
  EXPECT_EQ(obs.totalErrors(), 1u);
  EXPECT_EQ(obs.communicator_failures, 1u);
}

TEST(ServerObserverTest, DisagreeingRanksCountOneMismatch) {
  CountingObserver obs;
  auto server = startObserved(&obs);
  ASSERT_TRUE(server);
  std::vector<std::unique_ptr<ReducerServer>> servers;
  servers.push_back(std::move(server));
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll(std::vector<CollOptions>(2, optionsFor(servers, kSliceBytes)), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  std::vector<Status> results(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> v(2000, 1.0f);
      CollRequest req;
      Status s = post(clients[r].get(), v.data(), v.data(), r == 0 ? 1000 : 2000,
                      DataType::kFloat32, ReduceOp::kSum, &req);
      if (s.isOk()) s = waitRequest(&req, nullptr, 10000);
      results[r] = s;
    });
  }
  for (auto& t : threads) t.join();
  for (auto& s : results) EXPECT_EQ(s.code(), StatusCode::kRemote) << s.toString();
  EXPECT_EQ(obs.errorCount(ServerError::kMismatch), 1u);
  EXPECT_EQ(obs.communicator_failures, 1u);
  EXPECT_EQ(obs.slices, 0u);
  for (auto& c : clients) c->close();
  EXPECT_TRUE(backToIdle(obs));
}

TEST(ServerObserverTest, StopClosesWhatIsOpen) {
  CountingObserver obs;
  auto server = startObserved(&obs);
  ASSERT_TRUE(server);
  RawWorker w;
  ASSERT_TRUE(w.connect(server->address()).isOk());
  ASSERT_TRUE(w.send(wire::encodeHello(helloFor(0, 2))).isOk());
  ASSERT_TRUE(waitUntil([&] { return obs.communicators == 1 && obs.connections == 1; }));
  server->stop();
  // Synchronously: stop() returns with every connection and communicator reported closed.
  EXPECT_EQ(obs.connections, 0);
  EXPECT_EQ(obs.communicators, 0);
  EXPECT_EQ(obs.totalErrors(), 0u) << "a stopping server's own closes are not errors";
  w.drop();
}

}  // namespace
}  // namespace tally::reducer::test
