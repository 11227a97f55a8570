// SPDX-License-Identifier: Apache-2.0
// The reducer's limits: memory a communicator reserves (per connection, per communicator, in
// total), connections at once, and how long a connection may take to join. Each refusal names
// the limit, is counted, and leaves the server serving others.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "protocol/wire.h"
#include "test/support/counting_observer.h"
#include "test/support/harness.h"
#include "transport/network.h"

namespace tally::reducer::test {
namespace {

// One in-process reducer with these limits.
std::unique_ptr<ReducerServer> startWith(ServerOptions o, CountingObserver* observer) {
  o.listen = "127.0.0.1:0";
  o.threads = 1;
  o.window = 4;
  o.observer = observer;
  std::unique_ptr<ReducerServer> s;
  Status st = ReducerServer::start(o, &s);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return s;
}

CollOptions clientOptions(const ReducerServer& s, uint64_t slice_bytes) {
  CollOptions o;
  o.reducers = {s.address()};
  o.slice_bytes = slice_bytes;
  o.window = 4;
  o.timeouts.connect_ms = 5000;
  o.timeouts.io_ms = 5000;
  return o;
}

// Connects `ranks` clients; the first non-ok Status, or ok.
Status connectGroup(const CollOptions& o, int ranks,
                    std::vector<std::unique_ptr<CollClient>>* clients) {
  for (const Status& s : connectAll(std::vector<CollOptions>(ranks, o), clients)) {
    if (!s.isOk()) return s;
  }
  return Status::ok();
}

// A checked all-reduce of 1000 int32 on every client.
void expectSum(std::vector<std::unique_ptr<CollClient>>& clients) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(clients.size());
  for (size_t r = 0; r < clients.size(); ++r) {
    threads.emplace_back([&, r] {
      std::vector<int32_t> v(1000, static_cast<int32_t>(r + 1));
      CollRequest req;
      Status s = post(clients[r].get(), v.data(), v.data(), v.size(), DataType::kInt32,
                      ReduceOp::kSum, &req);
      if (s.isOk()) s = waitRequest(&req, nullptr);
      const int32_t want = static_cast<int32_t>(clients.size() * (clients.size() + 1) / 2);
      if (!s.isOk())
        errors[r] = s.toString();
      else if (v[0] != want || v[999] != want)
        errors[r] = "wrong sum " + std::to_string(v[0]);
    });
  }
  for (auto& t : threads) t.join();
  for (size_t r = 0; r < clients.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(Limits, CommunicatorOverItsLimitIsRefusedWithTheReason) {
  CountingObserver observer;
  ServerOptions o;
  // (2 ranks + 1) x (window 4 + a prompt slice) x 64 KiB: fits.
  o.max_communicator_bytes = 3 * (4 + protocol::wire::kPromptSlices) * (64 << 10);
  auto server = startWith(o, &observer);
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<CollClient>> clients;
  ASSERT_TRUE(connectGroup(clientOptions(*server, 64 << 10), 2, &clients).isOk());
  expectSum(clients);
  for (auto& c : clients) c->close();

  Status st = connectGroup(clientOptions(*server, 64 << 10), 3, &clients);  // 4 x 5 x 64 KiB
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("per communicator"), std::string::npos) << st.toString();
  EXPECT_GE(observer.errorCount(ServerError::kLimit), 1u);
  for (auto& c : clients)
    if (c) c->close();
}

TEST(Limits, SliceTooLargeForAConnectionIsRefused) {
  CountingObserver observer;
  ServerOptions o;
  o.max_connection_bytes = 4 * (64 << 10);
  auto server = startWith(o, &observer);
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<CollClient>> clients;
  Status st = connectGroup(clientOptions(*server, 128 << 10), 2, &clients);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("per connection"), std::string::npos) << st.toString();
  for (auto& c : clients)
    if (c) c->close();
}

TEST(Limits, FullReducerRefusesNewCommunicatorsUntilOneLeaves) {
  CountingObserver observer;
  ServerOptions o;
  // Room for exactly one 2-rank communicator: 3 x (window 4 + a prompt slice) x 64 KiB.
  o.max_memory_bytes = 3 * (4 + protocol::wire::kPromptSlices) * (64 << 10);
  auto server = startWith(o, &observer);
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<CollClient>> first, second;
  ASSERT_TRUE(connectGroup(clientOptions(*server, 64 << 10), 2, &first).isOk());
  Status st = connectGroup(clientOptions(*server, 64 << 10), 2, &second);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("reducer full"), std::string::npos) << st.toString();
  for (auto& c : second)
    if (c) c->close();
  expectSum(first);  // the admitted job is untouched
  for (auto& c : first) c->close();
  // Its reservation comes back once its members have left.
  ASSERT_TRUE(waitUntil([&] { return observer.communicators.load() == 0; },
                        std::chrono::milliseconds(5000)));
  ASSERT_TRUE(connectGroup(clientOptions(*server, 64 << 10), 2, &second).isOk());
  expectSum(second);
  for (auto& c : second) c->close();
}

TEST(Limits, ConnectionsOverTheLimitAreClosed) {
  CountingObserver observer;
  ServerOptions o;
  o.max_connections = 2;
  auto server = startWith(o, &observer);
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<CollClient>> clients;
  ASSERT_TRUE(connectGroup(clientOptions(*server, 64 << 10), 2, &clients).isOk());
  std::vector<std::unique_ptr<CollClient>> more;
  CollOptions late = clientOptions(*server, 64 << 10);
  late.timeouts.connect_ms = 2000;
  EXPECT_FALSE(connectGroup(late, 1, &more).isOk());
  EXPECT_TRUE(waitUntil([&] { return observer.errorCount(ServerError::kLimit) >= 1; },
                        std::chrono::milliseconds(5000)));
  expectSum(clients);  // the two admitted connections are untouched
  for (auto& c : clients) c->close();
}

// A peer that joins as rank 0 of an `nranks` communicator that will never form, and stays.
std::unique_ptr<transport::Connection> squat(const ReducerServer& s, int nranks, uint64_t id) {
  std::unique_ptr<transport::Connection> conn;
  transport::NetworkConfig net;
  net.tcp.sockets = 1;
  EXPECT_TRUE(transport::connectDefault(s.address(), net, {}, &conn).isOk());
  if (!conn) return nullptr;
  std::array<uint8_t, wire::kMaxHeaderBytes> challenge;
  void* data = challenge.data();
  size_t size = challenge.size();
  int tag = wire::kTagHeader;
  transport::MemoryRegion* mr = nullptr;
  std::unique_ptr<transport::Request> r;
  EXPECT_TRUE(conn->irecv(1, &data, &size, &tag, &mr, &r).isOk());
  EXPECT_TRUE(r && r->wait(5000, nullptr).isOk());
  wire::Hello hello;
  hello.comm = wire::CommId{0x5a77, id};
  hello.nranks = static_cast<uint32_t>(nranks);
  hello.nreducers = 1;
  hello.slice_bytes = 64 << 10;
  hello.window = 4;
  const wire::Frame frame = wire::encodeHello(hello);
  EXPECT_TRUE(conn->isend(frame.data(), frame.size, wire::kTagHeader, nullptr, &r).isOk());
  EXPECT_TRUE(r && r->wait(5000, nullptr).isOk());
  return conn;
}

TEST(Limits, CommunicatorIsFreedWhenItDoesNotFormInTime) {
  CountingObserver observer;
  ServerOptions o;
  o.join_timeout_ms = 300;
  auto server = startWith(o, &observer);
  ASSERT_NE(server, nullptr);
  auto squatter = squat(*server, 15, 1);
  ASSERT_NE(squatter, nullptr);
  ASSERT_TRUE(waitUntil([&] { return observer.communicators.load() == 1; }));
  // Its rank 0 stays connected, but the communicator does not form: it and its connection go.
  EXPECT_TRUE(waitUntil(
      [&] { return observer.communicators.load() == 0 && observer.connections.load() == 0; },
      std::chrono::milliseconds(5000)));
  EXPECT_GE(observer.errorCount(ServerError::kTimeout), 1u);
  std::vector<std::unique_ptr<CollClient>> clients;
  ASSERT_TRUE(connectGroup(clientOptions(*server, 64 << 10), 2, &clients).isOk());
  expectSum(clients);
  for (auto& c : clients) c->close();
  squatter->close();
}

TEST(Limits, MembersReserveMemoryAsTheyJoin) {
  CountingObserver observer;
  ServerOptions o;
  // (window + a prompt slice) x slice: one connection's inputs.
  const uint64_t unit = (4 + protocol::wire::kPromptSlices) * (64 << 10);
  // Two 15-rank communicators would reserve 16 units each once complete; a 2-rank job needs 3.
  o.max_memory_bytes = 33 * unit;
  auto server = startWith(o, &observer);
  ASSERT_NE(server, nullptr);
  auto a = squat(*server, 15, 2);
  auto b = squat(*server, 15, 3);
  ASSERT_TRUE(waitUntil([&] { return observer.communicators.load() == 2; }));
  // Each holds its results and its one member (2 units), so the job fits beside them.
  std::vector<std::unique_ptr<CollClient>> clients;
  Status st = connectGroup(clientOptions(*server, 64 << 10), 2, &clients);
  ASSERT_TRUE(st.isOk()) << st.toString();
  expectSum(clients);
  for (auto& c : clients) c->close();
  a->close();
  b->close();
}

TEST(Limits, ConnectionThatNeverJoinsIsClosed) {
  CountingObserver observer;
  ServerOptions o;
  o.join_timeout_ms = 300;
  auto server = startWith(o, &observer);
  ASSERT_NE(server, nullptr);
  // A peer that completes the transport handshake and then says nothing.
  std::unique_ptr<transport::Connection> idle;
  ASSERT_TRUE(transport::connectDefault(server->address(), {}, {}, &idle).isOk());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(waitUntil([&] { return observer.errorCount(ServerError::kTimeout) == 1; },
                        std::chrono::milliseconds(5000)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
  EXPECT_TRUE(
      waitUntil([&] { return observer.connections.load() == 0; }, std::chrono::milliseconds(5000)));
  idle->close();
}

}  // namespace
}  // namespace tally::reducer::test
