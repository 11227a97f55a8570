// SPDX-License-Identifier: Apache-2.0
// The side channel (transport/side_channel.h): handles, the setup exchange, the peer watch and
// the deadlines, over loopback TCP. Backend-neutral; it lives with the ofi tests because the ofi
// backend is its first user.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "test/transport/test_util.h"
#include "transport/side_channel.h"

namespace tally::transport::side {
namespace {

using Clock = std::chrono::steady_clock;
using transport::test::kWaitMs;

SideOptions shortOptions() {
  SideOptions options;
  options.timeouts.connect_ms = 2000;
  options.setup_timeout_ms = 300;
  return options;
}

// Steps a connecting setup and accepts + steps on the listener until both have a channel or one
// fails; returns the first error.
Status exchange(SideListener* listener, SideSetup* connecting, const std::string& server_backend,
                const std::vector<uint8_t>& server_bytes, std::unique_ptr<SideChannel>* client,
                std::unique_ptr<SideChannel>* server) {
  std::unique_ptr<SideSetup> accepting;
  const auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
  while (!*client || !*server) {
    if (Clock::now() > deadline) return Status::timeout("exchange in test");
    if (!*client) TALLY_RETURN_IF_ERROR(connecting->step(client));
    if (!accepting) {
      std::unique_ptr<Connection> tcp;
      TALLY_RETURN_IF_ERROR(listener->accept(&tcp));
      if (tcp) {
        auto reply = [server_bytes](const std::vector<uint8_t>&, std::vector<uint8_t>* local) {
          *local = server_bytes;
          return Status::ok();
        };
        TALLY_RETURN_IF_ERROR(
            SideSetup::accept(std::move(tcp), server_backend, reply, shortOptions(), &accepting));
      }
    }
    if (accepting && !*server) TALLY_RETURN_IF_ERROR(accepting->step(server));
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return Status::ok();
}

// Steps `setup` every 5 ms until it yields a channel, fails (that Status), or kWaitMs pass.
Status stepUntilDone(SideSetup* setup, std::unique_ptr<SideChannel>* channel) {
  const auto start = Clock::now();
  Status status;
  while ((status = setup->step(channel)).isOk() && !*channel &&
         Clock::now() - start < std::chrono::milliseconds(kWaitMs)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status;
}

struct Pair {
  std::unique_ptr<SideListener> listener;
  std::unique_ptr<SideChannel> client;
  std::unique_ptr<SideChannel> server;
};

void connectPair(Pair* p, const std::vector<uint8_t>& client_bytes,
                 const std::vector<uint8_t>& server_bytes) {
  ASSERT_TRUE(SideListener::listen("127.0.0.1:0", shortOptions(), &p->listener).isOk());
  std::unique_ptr<SideSetup> connecting;
  ASSERT_TRUE(
      SideSetup::connect(p->listener->address(), "test", client_bytes, shortOptions(), &connecting)
          .isOk());
  Status status =
      exchange(p->listener.get(), connecting.get(), "test", server_bytes, &p->client, &p->server);
  ASSERT_TRUE(status.isOk()) << status.toString();
}

// Polls until the channel leaves kOpen or the test's wait runs out.
PeerState waitForPeer(SideChannel* channel, std::vector<uint8_t>* farewell, Status* why) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
  PeerState state = PeerState::kOpen;
  while ((state = channel->poll(farewell, why)) == PeerState::kOpen && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return state;
}

TEST(SideChannel, HandleCarriesTheAddress) {
  ConnectHandle handle{};
  ASSERT_TRUE(encodeHandle(0x11223344u, "[fe80::1%eth0]:40112", &handle).isOk());
  std::string address;
  ASSERT_TRUE(decodeHandle(0x11223344u, handle, &address).isOk());
  EXPECT_EQ(address, "[fe80::1%eth0]:40112");
  // Another backend's magic, or garbage, is refused.
  Status status = decodeHandle(0x55667788u, handle, &address);
  EXPECT_EQ(status.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(status.message().find("0x11223344"), std::string::npos) << status.toString();
  handle.bytes[4] = 200;
  EXPECT_EQ(decodeHandle(0x11223344u, handle, &address).code(), StatusCode::kInvalidUsage);
  // An address that does not fit is refused up front.
  EXPECT_EQ(encodeHandle(1, std::string(kMaxHandleBytes, 'x'), &handle).code(),
            StatusCode::kInvalidUsage);
}

TEST(SideChannel, ExchangesSetupBytesBothWays) {
  Pair p;
  connectPair(&p, {1, 2, 3}, {9, 8, 7, 6, 5});
  EXPECT_EQ(p.client->peerSetup(), (std::vector<uint8_t>{9, 8, 7, 6, 5}));
  EXPECT_EQ(p.server->peerSetup(), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_NE(p.client->peerName().find("127.0.0.1:"), std::string::npos);
  EXPECT_EQ(p.client->poll(nullptr, nullptr), PeerState::kOpen);
  EXPECT_EQ(p.server->poll(nullptr, nullptr), PeerState::kOpen);
}

TEST(SideChannel, EmptySetupIsFine) {
  Pair p;
  connectPair(&p, {}, {});
  EXPECT_TRUE(p.client->peerSetup().empty());
  EXPECT_TRUE(p.server->peerSetup().empty());
}

TEST(SideChannel, FarewellReachesThePeer) {
  Pair p;
  connectPair(&p, {1}, {2});
  p.client->close({0xaa, 0xbb}, kWaitMs);
  std::vector<uint8_t> farewell;
  EXPECT_EQ(waitForPeer(p.server.get(), &farewell, nullptr), PeerState::kFarewell);
  EXPECT_EQ(farewell, (std::vector<uint8_t>{0xaa, 0xbb}));
  // Final, even after the socket's end arrives.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(p.server->poll(nullptr, nullptr), PeerState::kFarewell);
}

TEST(SideChannel, CloseWithoutFarewellIsLost) {
  Pair p;
  connectPair(&p, {1}, {2});
  auto start = Clock::now();
  p.server.reset();
  Status why;
  EXPECT_EQ(waitForPeer(p.client.get(), nullptr, &why), PeerState::kLost);
  EXPECT_EQ(why.code(), StatusCode::kRemote) << why.toString();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  // This end's own close makes it lost too, never open again.
  p.client->close();
  EXPECT_EQ(p.client->poll(nullptr, nullptr), PeerState::kLost);
}

TEST(SideChannel, DifferentBackendIsInvalidUsage) {
  std::unique_ptr<SideListener> listener;
  ASSERT_TRUE(SideListener::listen("127.0.0.1:0", shortOptions(), &listener).isOk());
  std::unique_ptr<SideSetup> connecting;
  ASSERT_TRUE(
      SideSetup::connect(listener->address(), "ofi", {1}, shortOptions(), &connecting).isOk());
  std::unique_ptr<SideChannel> client, server;
  Status status = exchange(listener.get(), connecting.get(), "verbs", {2}, &client, &server);
  EXPECT_EQ(status.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(status.message().find("verbs"), std::string::npos) << status.toString();
  EXPECT_NE(status.message().find("ofi"), std::string::npos) << status.toString();
}

TEST(SideChannel, RefusingReplyFailsBothEnds) {
  std::unique_ptr<SideListener> listener;
  ASSERT_TRUE(SideListener::listen("127.0.0.1:0", shortOptions(), &listener).isOk());
  std::unique_ptr<SideSetup> connecting;
  ASSERT_TRUE(
      SideSetup::connect(listener->address(), "test", {4, 5}, shortOptions(), &connecting).isOk());
  // The connecting end's TCP connect moves only when stepped.
  std::unique_ptr<SideChannel> client, server;
  std::unique_ptr<Connection> tcp;
  const auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
  while (!tcp && Clock::now() < deadline) {
    ASSERT_TRUE(connecting->step(&client).isOk());
    ASSERT_TRUE(listener->acceptWait(1, &tcp).isOk());
  }
  ASSERT_NE(tcp, nullptr);
  std::vector<uint8_t> seen;
  auto reply = [&seen](const std::vector<uint8_t>& peer, std::vector<uint8_t>*) {
    seen = peer;
    return Status::invalidUsage("not my kind of peer");
  };
  std::unique_ptr<SideSetup> accepting;
  ASSERT_TRUE(SideSetup::accept(std::move(tcp), "test", reply, shortOptions(), &accepting).isOk());
  Status server_status, client_status;
  while (server_status.isOk() && Clock::now() < deadline) {
    server_status = accepting->step(&server);
    if (client_status.isOk()) client_status = connecting->step(&client);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(server_status.code(), StatusCode::kInvalidUsage) << server_status.toString();
  EXPECT_EQ(seen, (std::vector<uint8_t>{4, 5}));
  // The connecting end sees its side connection dropped, well before its setup deadline.
  while (client_status.isOk() && Clock::now() < deadline) {
    client_status = connecting->step(&client);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(client_status.code(), StatusCode::kRemote) << client_status.toString();
  EXPECT_EQ(client, nullptr);
}

TEST(SideChannel, SilentPeerTimesOut) {
  // A plain TCP peer that connects and never sends its setup.
  std::unique_ptr<SideListener> listener;
  ASSERT_TRUE(SideListener::listen("127.0.0.1:0", shortOptions(), &listener).isOk());
  std::unique_ptr<Connection> silent;
  tcp::TcpOptions tcp_options;
  tcp_options.sockets = 1;
  ConnectionOptions conn_options;
  conn_options.sockets = 1;
  ASSERT_TRUE(tcp::connectBlocking(listener->address(), tcp_options, conn_options, &silent).isOk());
  std::unique_ptr<Connection> accepted;
  ASSERT_TRUE(listener->acceptWait(kWaitMs, &accepted).isOk());
  ASSERT_NE(accepted, nullptr);
  std::unique_ptr<SideSetup> setup;
  bool replied = false;
  auto reply = [&replied](const std::vector<uint8_t>&, std::vector<uint8_t>* local) {
    replied = true;
    local->assign(1, 1);
    return Status::ok();
  };
  ASSERT_TRUE(SideSetup::accept(std::move(accepted), "test", reply, shortOptions(), &setup).isOk());
  auto start = Clock::now();
  std::unique_ptr<SideChannel> channel;
  Status status = stepUntilDone(setup.get(), &channel);
  EXPECT_EQ(status.code(), StatusCode::kTimeout) << status.toString();
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(290));
  EXPECT_EQ(setup->step(&channel).code(), StatusCode::kTimeout);  // final
  EXPECT_FALSE(replied) << "no reply (no resources) for a peer that never said who it is";
  silent->close();
}

TEST(SideChannel, NobodyListeningFailsAfterTheConnectTimeout) {
  // Bind a port, then free it, so nothing listens there.
  std::string address;
  {
    std::unique_ptr<SideListener> listener;
    ASSERT_TRUE(SideListener::listen("127.0.0.1:0", shortOptions(), &listener).isOk());
    address = listener->address();
  }
  SideOptions options = shortOptions();
  options.timeouts.connect_ms = 200;
  std::unique_ptr<SideSetup> setup;
  ASSERT_TRUE(SideSetup::connect(address, "test", {1}, options, &setup).isOk());
  auto start = Clock::now();
  std::unique_ptr<SideChannel> channel;
  Status status = stepUntilDone(setup.get(), &channel);
  EXPECT_FALSE(status.isOk());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace tally::transport::side
