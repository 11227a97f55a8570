// SPDX-License-Identifier: Apache-2.0
// The Network interface over TCP (tcp::createNetwork), and finishConnect's stepping, timeout and
// error paths.
#include "transport/network.h"

#include <chrono>
#include <thread>

#include "test/transport/test_util.h"

namespace tally::transport::test {
namespace {

using Clock = std::chrono::steady_clock;

std::string portPart(const std::string& address) {
  return address.substr(address.rfind(':') + 1);
}

// Sends `size` pattern bytes a -> b and checks they arrive unchanged.
void exchange(Connection* a, Connection* b, size_t size, uint32_t seed) {
  std::vector<uint8_t> data = pattern(size, seed);
  std::vector<uint8_t> got(size + 16, 0);
  std::unique_ptr<Request> s;
  std::unique_ptr<Request> r;
  void* ptr = got.data();
  size_t capacity = got.size();
  int tag = 3;
  ASSERT_TRUE(b->irecv(1, &ptr, &capacity, &tag, nullptr, &r).isOk());
  ASSERT_TRUE(a->isend(data.data(), data.size(), tag, nullptr, &s).isOk());
  ASSERT_TRUE(s && r);
  ASSERT_TRUE(s->wait(kWaitMs, nullptr).isOk());
  size_t received = 0;
  ASSERT_TRUE(r->wait(kWaitMs, &received).isOk());
  ASSERT_EQ(received, size);
  got.resize(size);
  EXPECT_EQ(got, data);
}

std::shared_ptr<Network> loopbackNetwork() {
  tcp::TcpOptions options;
  options.sockets = 3;
  options.timeouts.connect_ms = kWaitMs;
  std::shared_ptr<Network> network;
  Status st = tcp::createNetwork("=lo", options, &network);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return network;
}

TEST(TcpNetwork, LoopbackSpecGivesOneLoopbackDevice) {
  std::shared_ptr<Network> network = loopbackNetwork();
  ASSERT_TRUE(network);
  EXPECT_STREQ(network->name(), "tcp");
  EXPECT_EQ(network->provider(), "");
  ASSERT_EQ(network->devices().size(), 1u);
  EXPECT_EQ(network->devices()[0]->properties().name, "lo");
  EXPECT_EQ(network->description(), "tcp on lo " + network->devices()[0]->properties().address +
                                        "; 3 sockets per connection");
}

TEST(TcpNetwork, NoMatchingInterfaceIsInvalidUsageAndWritesNothing) {
  std::shared_ptr<Network> network;
  Status st = tcp::createNetwork("=no-such-interface0", {}, &network);
  EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(st.message().find("no-such-interface0"), std::string::npos) << st.toString();
  EXPECT_EQ(network, nullptr);
}

TEST(TcpNetwork, ListenAtAndConnectToCarryBytesBothWays) {
  std::shared_ptr<Network> network = loopbackNetwork();
  ASSERT_TRUE(network);
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(network->listenAt("127.0.0.1:0", &listener).isOk());
  ASSERT_NE(portPart(listener->address()), "0");
  std::unique_ptr<PendingConnection> pending;
  ASSERT_TRUE(network->connectTo(listener->address(), {}, &pending).isOk());
  std::unique_ptr<Connection> client;
  std::unique_ptr<Connection> server;
  std::thread acceptor([&] {
    Status st = listener->acceptWait(kWaitMs, &server);
    EXPECT_TRUE(st.isOk()) << st.toString();
  });
  Status st = transport::finishConnect(pending.get(), kWaitMs, &client);
  acceptor.join();
  ASSERT_TRUE(st.isOk()) << st.toString();
  ASSERT_TRUE(client && server);
  // Past the stripe size, so the message is split over the network's three sockets.
  exchange(client.get(), server.get(), 1 << 20, 11);
  exchange(server.get(), client.get(), 100, 12);
}

TEST(TcpNetwork, DevicesConnectThroughTheirHandles) {
  std::shared_ptr<Network> network = loopbackNetwork();
  ASSERT_TRUE(network);
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(network->devices()[0]->listen(&listener).isOk());
  std::unique_ptr<PendingConnection> pending;
  ASSERT_TRUE(network->devices()[0]->connect(listener->handle(), {}, &pending).isOk());
  std::unique_ptr<Connection> client;
  std::unique_ptr<Connection> server;
  ASSERT_TRUE(finishConnect(pending.get(), listener.get(), &client, &server).isOk());
  exchange(client.get(), server.get(), 4096, 13);
}

TEST(TcpNetwork, MalformedAddressesAreInvalidUsage) {
  std::shared_ptr<Network> network = loopbackNetwork();
  ASSERT_TRUE(network);
  std::unique_ptr<PendingConnection> pending;
  EXPECT_EQ(network->connectTo("127.0.0.1", {}, &pending).code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(network->connectTo("127.0.0.1:70000", {}, &pending).code(),
            StatusCode::kInvalidUsage);
  EXPECT_EQ(pending, nullptr);
  std::unique_ptr<Listener> listener;
  EXPECT_EQ(network->listenAt("nonsense", &listener).code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(listener, nullptr);
}

TEST(TcpNetwork, ConnectFindsAListenerThatStartsLater) {
  std::shared_ptr<Network> network = loopbackNetwork();
  ASSERT_TRUE(network);
  std::string address;
  {
    std::unique_ptr<Listener> probe;
    ASSERT_TRUE(network->listenAt("127.0.0.1:0", &probe).isOk());
    address = probe->address();
  }
  std::unique_ptr<PendingConnection> pending;
  ASSERT_TRUE(network->connectTo(address, {}, &pending).isOk());
  std::unique_ptr<Connection> client;
  // Nobody listens yet: the connect is refused and retried, so it times out here, still pending.
  Status st = transport::finishConnect(pending.get(), 100, &client);
  ASSERT_EQ(st.code(), StatusCode::kTimeout) << st.toString();
  ASSERT_EQ(client, nullptr);
  std::unique_ptr<Listener> listener;
  st = network->listenAt(address, &listener);
  if (!st.isOk()) GTEST_SKIP() << "port was taken meanwhile: " << st.toString();
  std::unique_ptr<Connection> server;
  std::thread acceptor([&] { EXPECT_TRUE(listener->acceptWait(kWaitMs, &server).isOk()); });
  st = transport::finishConnect(pending.get(), kWaitMs, &client);
  acceptor.join();
  ASSERT_TRUE(st.isOk()) << st.toString();
  ASSERT_TRUE(client && server);
  exchange(client.get(), server.get(), 777, 14);
}

// A PendingConnection that finishes (or fails) after a set number of steps.
class ScriptedPending final : public PendingConnection {
 public:
  ScriptedPending(int finish_at, Status failure) : finish_at_(finish_at), failure_(failure) {}
  Status step(std::unique_ptr<Connection>* conn) override {
    ++steps;
    if (finish_at_ < 0 || steps < finish_at_) return Status::ok();
    if (!failure_.isOk()) return failure_;
    *conn = std::move(ready_);
    return Status::ok();
  }
  int steps = 0;
  std::unique_ptr<Connection> ready_;

 private:
  const int finish_at_;
  const Status failure_;
};

TEST(FinishConnect, StepsUntilTheConnectionComesOut) {
  std::shared_ptr<Network> network = loopbackNetwork();
  ASSERT_TRUE(network);
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(network->listenAt("127.0.0.1:0", &listener).isOk());
  std::unique_ptr<PendingConnection> real;
  ASSERT_TRUE(network->connectTo(listener->address(), {}, &real).isOk());
  std::unique_ptr<Connection> made;
  std::unique_ptr<Connection> server;
  ASSERT_TRUE(finishConnect(real.get(), listener.get(), &made, &server).isOk());
  Connection* const expected = made.get();

  ScriptedPending pending(5, Status::ok());
  pending.ready_ = std::move(made);
  std::unique_ptr<Connection> out;
  Status st = transport::finishConnect(&pending, kWaitMs, &out);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_EQ(pending.steps, 5);
  EXPECT_EQ(out.get(), expected);
}

TEST(FinishConnect, AStepErrorIsReturnedAsIs) {
  ScriptedPending pending(3, Status::remote("peer 10.0.0.9:1 reset the connection"));
  std::unique_ptr<Connection> out;
  Status st = transport::finishConnect(&pending, kWaitMs, &out);
  EXPECT_EQ(st.code(), StatusCode::kRemote);
  EXPECT_EQ(st.message(), "peer 10.0.0.9:1 reset the connection");
  EXPECT_EQ(pending.steps, 3);
  EXPECT_EQ(out, nullptr);
}

TEST(FinishConnect, TimesOutAfterTheGivenTimeAndLeavesOutAlone) {
  ScriptedPending pending(-1, Status::ok());
  std::unique_ptr<Connection> out;
  const auto start = Clock::now();
  Status st = transport::finishConnect(&pending, 200, &out);
  const auto elapsed = Clock::now() - start;
  EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.toString();
  EXPECT_NE(st.message().find("200 ms"), std::string::npos) << st.toString();
  EXPECT_EQ(out, nullptr);
  EXPECT_GE(elapsed, std::chrono::milliseconds(200));
  EXPECT_LT(elapsed, std::chrono::seconds(5));
  EXPECT_GT(pending.steps, 5) << "it keeps stepping while it waits";
  // Zero: one step, then the timeout.
  ScriptedPending once(-1, Status::ok());
  EXPECT_EQ(transport::finishConnect(&once, 0, &out).code(), StatusCode::kTimeout);
  EXPECT_EQ(once.steps, 1);
}

TEST(FinishConnect, NullPendingIsInternal) {
  std::unique_ptr<Connection> out;
  EXPECT_EQ(transport::finishConnect(nullptr, 10, &out).code(), StatusCode::kInternal);
}

TEST(OpenNetwork, BuiltInTcpOnLoopback) {
  NetworkConfig config;
  config.kind = TransportKind::kTcp;
  config.ifname_spec = "=lo";
  std::shared_ptr<Network> network;
  std::string why;
  Status st = openNetwork(config, &network, &why);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_STREQ(network->name(), "tcp");
  EXPECT_EQ(why, "tcp as asked; using tcp (" + network->description() + ")");
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(network->listenAt("127.0.0.1:0", &listener).isOk());
}

TEST(OpenNetwork, BuiltInTcpReportsTheInterfaceError) {
  NetworkConfig config;
  config.kind = TransportKind::kTcp;
  config.ifname_spec = "=no-such-interface0";
  std::shared_ptr<Network> network;
  std::string why;
  Status st = openNetwork(config, &network, &why);
  EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(st.message().find("no-such-interface0"), std::string::npos) << st.toString();
  EXPECT_EQ(network, nullptr);
  EXPECT_EQ(why, "");
}

}  // namespace
}  // namespace tally::transport::test
