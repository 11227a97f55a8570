// SPDX-License-Identifier: Apache-2.0
// TCP connection establishment: the state machines, listeners, refused and garbage peers.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "test/transport/test_util.h"
#include "transport/tcp/wire.h"

namespace tally::transport::test {
namespace {

using Clock = std::chrono::steady_clock;

uint16_t portOf(const std::string& address) {
  return static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

// Sends one message a -> b and checks it arrives.
void exchange(Connection* a, Connection* b, int tag, uint32_t seed) {
  std::vector<uint8_t> data = pattern(5000, seed);
  std::vector<uint8_t> got(data.size());
  std::unique_ptr<Request> s;
  std::unique_ptr<Request> r;
  void* ptr = got.data();
  size_t size = got.size();
  ASSERT_TRUE(b->irecv(1, &ptr, &size, &tag, nullptr, &r).isOk());
  ASSERT_TRUE(a->isend(data.data(), data.size(), tag, nullptr, &s).isOk());
  ASSERT_TRUE(s && r);
  ASSERT_TRUE(s->wait(kWaitMs, nullptr).isOk());
  ASSERT_TRUE(r->wait(kWaitMs, nullptr).isOk());
  EXPECT_EQ(got, data);
}

// A raw blocking client socket connected to `port` on loopback.
int rawConnect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST(TcpConnect, StateMachinesRunToCompletion) {
  auto device = loopbackDevice();
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(device->listen(&listener).isOk());
  std::unique_ptr<PendingConnection> pending;
  ConnectionOptions options;
  options.sockets = 3;
  ASSERT_TRUE(device->connect(listener->handle(), options, &pending).isOk());

  std::unique_ptr<Connection> server;
  ASSERT_TRUE(listener->accept(&server).isOk());
  EXPECT_EQ(server, nullptr) << "nobody connected yet";

  std::unique_ptr<Connection> client;
  int steps = 0;
  auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
  while (!client) {
    ASSERT_TRUE(pending->step(&client).isOk());
    ++steps;
    ASSERT_LT(Clock::now(), deadline);
  }
  EXPECT_GE(steps, 3) << "start, connecting, hello are separate steps";
  // A step after the connection came out is misuse.
  std::unique_ptr<Connection> extra;
  EXPECT_EQ(pending->step(&extra).code(), StatusCode::kInternal);

  ASSERT_TRUE(listener->acceptWait(kWaitMs, &server).isOk());
  ASSERT_NE(server, nullptr);
  exchange(client.get(), server.get(), 1, 1);
  exchange(server.get(), client.get(), 2, 2);
}

TEST(TcpConnect, ListenAtAndConnectBlocking) {
  tcp::TcpOptions options;
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(tcp::listenAt("127.0.0.1:0", options, &listener).isOk());
  uint16_t port = portOf(listener->address());
  EXPECT_NE(port, 0);
  std::unique_ptr<Connection> client;
  std::thread connector([&] {
    Status status = tcp::connectBlocking("127.0.0.1:" + std::to_string(port), options, {}, &client);
    EXPECT_TRUE(status.isOk()) << status.toString();
  });
  std::unique_ptr<Connection> server;
  Status status = listener->acceptWait(kWaitMs, &server);
  connector.join();
  ASSERT_TRUE(status.isOk()) << status.toString();
  ASSERT_TRUE(client && server);
  exchange(client.get(), server.get(), 0, 5);
  EXPECT_NE(server->peerName().find("127.0.0.1:"), std::string::npos);
}

TEST(TcpConnect, Ipv6Loopback) {
  tcp::TcpOptions options;
  std::unique_ptr<Listener> listener;
  Status status = tcp::listenAt("[::1]:0", options, &listener);
  if (!status.isOk()) GTEST_SKIP() << "no IPv6 loopback: " << status.toString();
  std::unique_ptr<PendingConnection> pending;
  ASSERT_TRUE(
      tcp::connectTo("[::1]:" + std::to_string(portOf(listener->address())), options, {}, &pending)
          .isOk());
  std::unique_ptr<Connection> client;
  std::unique_ptr<Connection> server;
  status = finishConnect(pending.get(), listener.get(), &client, &server);
  ASSERT_TRUE(status.isOk()) << status.toString();
  exchange(client.get(), server.get(), 0, 6);
}

TEST(TcpConnect, BadAddressesAreInvalidUsage) {
  tcp::TcpOptions options;
  std::unique_ptr<PendingConnection> pending;
  EXPECT_EQ(tcp::connectTo("127.0.0.1", options, {}, &pending).code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(tcp::connectTo("127.0.0.1:99999", options, {}, &pending).code(),
            StatusCode::kInvalidUsage);
  EXPECT_EQ(tcp::connectTo("::1:80", options, {}, &pending).code(), StatusCode::kInvalidUsage);
  ConnectionOptions too_many;
  too_many.sockets = 17;
  EXPECT_EQ(tcp::connectTo("127.0.0.1:1", options, too_many, &pending).code(),
            StatusCode::kInvalidUsage);
  auto device = loopbackDevice();
  ConnectHandle junk{};
  EXPECT_EQ(device->connect(junk, {}, &pending).code(), StatusCode::kInvalidUsage);
}

TEST(TcpConnect, ListenerAcceptsSeveralConnections) {
  tcp::TcpOptions options;
  auto device = loopbackDevice(options);
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(device->listen(&listener).isOk());
  constexpr int kClients = 6;
  std::vector<std::unique_ptr<PendingConnection>> pending(kClients);
  std::vector<std::unique_ptr<Connection>> clients(kClients);
  for (int i = 0; i < kClients; ++i) {
    ConnectionOptions conn_options;
    conn_options.sockets = 1 + i % 4;
    ASSERT_TRUE(device->connect(listener->handle(), conn_options, &pending[i]).isOk());
  }
  std::vector<std::unique_ptr<Connection>> servers;
  auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
  int connected = 0;
  while (connected < kClients || static_cast<int>(servers.size()) < kClients) {
    for (int i = 0; i < kClients; ++i) {
      if (clients[i]) continue;
      ASSERT_TRUE(pending[i]->step(&clients[i]).isOk());
      if (clients[i]) ++connected;
    }
    std::unique_ptr<Connection> server;
    ASSERT_TRUE(listener->accept(&server).isOk());
    if (server) servers.push_back(std::move(server));
    ASSERT_LT(Clock::now(), deadline);
  }
  // Each client announces its index; every server connection hears exactly one of them.
  std::vector<int> seen(kClients, 0);
  std::vector<std::unique_ptr<Request>> sends;
  std::vector<int> indices(kClients);
  for (int i = 0; i < kClients; ++i) {
    indices[i] = i;  // isend is zero-copy: the buffer must outlive the request
    std::unique_ptr<Request> s;
    ASSERT_TRUE(clients[i]->isend(&indices[i], sizeof(int), 0, nullptr, &s).isOk());
    sends.push_back(std::move(s));
  }
  for (auto& server : servers) {
    int index = -1;
    void* ptr = &index;
    size_t size = sizeof(index);
    int tag = 0;
    std::unique_ptr<Request> r;
    ASSERT_TRUE(server->irecv(1, &ptr, &size, &tag, nullptr, &r).isOk());
    ASSERT_TRUE(r->wait(kWaitMs, nullptr).isOk());
    ASSERT_GE(index, 0);
    ASSERT_LT(index, kClients);
    ++seen[index];
  }
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(seen[i], 1) << "client " << i;
  for (auto& s : sends) EXPECT_TRUE(s->wait(kWaitMs, nullptr).isOk());
}

TEST(TcpConnect, NothingListeningTimesOut) {
  uint16_t port = 0;
  {
    std::unique_ptr<Listener> listener;
    ASSERT_TRUE(tcp::listenAt("127.0.0.1:0", {}, &listener).isOk());
    port = portOf(listener->address());
  }
  tcp::TcpOptions options;
  options.timeouts.connect_ms = 300;
  std::unique_ptr<Connection> conn;
  auto start = Clock::now();
  Status status = tcp::connectBlocking("127.0.0.1:" + std::to_string(port), options, {}, &conn);
  auto elapsed = Clock::now() - start;
  EXPECT_EQ(status.code(), StatusCode::kTimeout) << status.toString();
  EXPECT_NE(status.message().find("refused"), std::string::npos) << status.toString();
  EXPECT_EQ(conn, nullptr);
  EXPECT_GE(elapsed, std::chrono::milliseconds(250));
  EXPECT_LT(elapsed, std::chrono::seconds(3));
}

TEST(TcpConnect, LateListenerIsFound) {
  uint16_t port = 0;
  {
    std::unique_ptr<Listener> listener;
    ASSERT_TRUE(tcp::listenAt("127.0.0.1:0", {}, &listener).isOk());
    port = portOf(listener->address());
  }
  tcp::TcpOptions options;
  options.timeouts.connect_ms = kWaitMs;
  std::unique_ptr<PendingConnection> pending;
  ASSERT_TRUE(tcp::connectTo("127.0.0.1:" + std::to_string(port), options, {}, &pending).isOk());
  std::unique_ptr<Connection> client;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(pending->step(&client).isOk());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(client, nullptr);
  std::unique_ptr<Listener> listener;
  Status status = tcp::listenAt("127.0.0.1:" + std::to_string(port), options, &listener);
  if (!status.isOk()) GTEST_SKIP() << "port was taken meanwhile: " << status.toString();
  std::unique_ptr<Connection> server;
  status = finishConnect(pending.get(), listener.get(), &client, &server);
  ASSERT_TRUE(status.isOk()) << status.toString();
  exchange(client.get(), server.get(), 0, 8);
}

TEST(TcpConnect, AcceptWaitReturnsNothingAfterItsTimeout) {
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(tcp::listenAt("127.0.0.1:0", {}, &listener).isOk());
  std::unique_ptr<Connection> conn;
  auto start = Clock::now();
  EXPECT_TRUE(listener->acceptWait(100, &conn).isOk());  // none came: ok, no connection
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(90));  // poll may round down
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(conn, nullptr);
}

TEST(TcpConnect, GarbageToListenerIsRejected) {
  auto device = loopbackDevice();
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(device->listen(&listener).isOk());
  uint16_t port = portOf(listener->address());

  // Bad magic, a bad version, and a peer that hangs up half way through its hello.
  int garbage = rawConnect(port);
  ASSERT_GE(garbage, 0);
  std::vector<uint8_t> junk = pattern(tcp::kHelloBytes * 3, 77);
  ASSERT_EQ(::send(garbage, junk.data(), junk.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(junk.size()));
  int old_version = rawConnect(port);
  ASSERT_GE(old_version, 0);
  tcp::Hello hello;
  hello.version = 999;
  hello.count = 1;
  uint8_t bytes[tcp::kHelloBytes];
  tcp::encodeHello(hello, bytes);
  ASSERT_EQ(::send(old_version, bytes, sizeof(bytes), MSG_NOSIGNAL),
            static_cast<ssize_t>(sizeof(bytes)));
  int quitter = rawConnect(port);
  ASSERT_GE(quitter, 0);
  ASSERT_EQ(::send(quitter, bytes, 5, MSG_NOSIGNAL), 5);
  ::close(quitter);

  std::unique_ptr<Connection> conn;
  EXPECT_TRUE(listener->acceptWait(200, &conn).isOk());
  EXPECT_EQ(conn, nullptr);
  // The listener closed the bad sockets: the raw peers see EOF (or a reset).
  char c;
  EXPECT_LE(::recv(garbage, &c, 1, 0), 0);
  EXPECT_LE(::recv(old_version, &c, 1, 0), 0);
  ::close(garbage);
  ::close(old_version);

  // A real client still gets through.
  std::unique_ptr<PendingConnection> pending;
  ASSERT_TRUE(device->connect(listener->handle(), {}, &pending).isOk());
  std::unique_ptr<Connection> client;
  std::unique_ptr<Connection> server;
  ASSERT_TRUE(finishConnect(pending.get(), listener.get(), &client, &server).isOk());
  exchange(client.get(), server.get(), 0, 9);
}

TEST(TcpConnect, GarbageAfterHelloFailsTheConnection) {
  auto device = loopbackDevice();
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(device->listen(&listener).isOk());
  int raw = rawConnect(portOf(listener->address()));
  ASSERT_GE(raw, 0);
  tcp::Hello hello;
  hello.count = 1;
  hello.connection_id = 42;
  hello.min_stripe = 65536;
  uint8_t bytes[tcp::kHelloBytes];
  tcp::encodeHello(hello, bytes);
  ASSERT_EQ(::send(raw, bytes, sizeof(bytes), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(bytes)));
  std::unique_ptr<Connection> server;
  ASSERT_TRUE(listener->acceptWait(kWaitMs, &server).isOk());
  ASSERT_NE(server, nullptr);

  uint8_t buffer[64];
  void* ptr = buffer;
  size_t size = sizeof(buffer);
  int tag = 0;
  std::unique_ptr<Request> r;
  ASSERT_TRUE(server->irecv(1, &ptr, &size, &tag, nullptr, &r).isOk());
  std::vector<uint8_t> junk = pattern(tcp::kHeaderBytes, 5);
  ASSERT_EQ(::send(raw, junk.data(), junk.size(), MSG_NOSIGNAL), static_cast<ssize_t>(junk.size()));
  Status status = r->wait(kWaitMs, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kRemote) << status.toString();
  EXPECT_NE(status.message().find("header"), std::string::npos) << status.toString();
  server->close();
  ::close(raw);
}

TEST(TcpDevice, LoopbackProperties) {
  auto device = loopbackDevice();
  ASSERT_NE(device, nullptr);
  const DeviceProperties& props = device->properties();
  EXPECT_EQ(props.name, "lo");
  EXPECT_EQ(props.address, "127.0.0.1");
  EXPECT_GT(props.speed_mbps, 0);
  EXPECT_NE(props.guid, 0u);
  std::shared_ptr<Device> other;
  ASSERT_TRUE(tcp::createDevice({"eth-fake", "127.0.0.1", false}, {}, &other).isOk());
  EXPECT_NE(other->properties().guid, props.guid);
  EXPECT_EQ(other->properties().speed_mbps, 10000) << "no sysfs entry: default speed";
  EXPECT_TRUE(other->properties().pci_path.empty());
}

TEST(TcpDevice, FindInterfacesOnThisHost) {
  std::vector<tcp::Interface> all;
  Status status = tcp::findInterfaces("", &all);
  ASSERT_TRUE(status.isOk()) << status.toString();
  ASSERT_FALSE(all.empty());
  for (const auto& iface : all) {
    EXPECT_FALSE(iface.name.empty());
    EXPECT_FALSE(iface.address.empty());
  }
  std::vector<tcp::Interface> none;
  EXPECT_EQ(tcp::findInterfaces("=no-such-interface", &none).code(), StatusCode::kInvalidUsage);
  std::vector<tcp::Interface> lo;
  if (tcp::findInterfaces("=lo", &lo).isOk()) {
    ASSERT_EQ(lo.size(), 1u);
    EXPECT_TRUE(lo[0].loopback);
  }
}

// Counts WARN lines while installed (the sink is process-wide).
std::atomic<int> g_warnings{0};
void countWarnings(log::Level level, unsigned long, const char*, int, const char*) {
  if (level == log::Level::kWarn) g_warnings.fetch_add(1);
}

// A peer that reads the last message and closes at once (a reducer after Bye) ends the
// conversation: the sender's receive fails, but that is no WARN, even when the EOF arrives before
// the send thread has counted the message as sent.
TEST(TcpClose, PeerClosingRightAfterTheLastMessageIsNoWarning) {
  log::setSink(&countWarnings, log::Level::kWarn);
  g_warnings.store(0);
  for (int i = 0; i < 200; ++i) {
    std::unique_ptr<Connection> a, b;
    tcp::TcpOptions options;
    options.sockets = 1;
    ConnectionOptions conn_options;
    conn_options.sockets = 1;
    ASSERT_TRUE(tcpPair(options, conn_options, &a, &b).isOk());
    uint8_t byte = static_cast<uint8_t>(i), got = 0, never = 0;
    void* got_ptr = &got;
    void* never_ptr = &never;
    size_t one = 1;
    int tag = 7;
    std::unique_ptr<Request> waiting, sent, received;
    ASSERT_TRUE(a->irecv(1, &never_ptr, &one, &tag, nullptr, &waiting).isOk());
    ASSERT_TRUE(b->irecv(1, &got_ptr, &one, &tag, nullptr, &received).isOk());
    ASSERT_TRUE(a->isend(&byte, 1, tag, nullptr, &sent).isOk());
    ASSERT_TRUE(received->wait(kWaitMs, nullptr).isOk());
    EXPECT_EQ(got, byte);
    b->close();
    EXPECT_FALSE(waiting->wait(kWaitMs, nullptr).isOk());  // the peer is gone
    a->close();
  }
  log::setSink(&log::stderrSink, log::Level::kWarn);
  EXPECT_EQ(g_warnings.load(), 0);
}

}  // namespace
}  // namespace tally::transport::test
