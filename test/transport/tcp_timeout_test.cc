// SPDX-License-Identifier: Apache-2.0
// The TCP transport's I/O timeout (TcpOptions::io_timeout_ms, TALLY_TIMEOUT_MS): an idle
// connection lives on, but a peer that stops in the middle of a message, or stops reading what
// is sent to it, fails the connection instead of holding a thread forever. Its requests then
// report kRemote naming the timeout: kTimeout from a wait only means "not done yet", and a dead
// connection must never read as that (transport.h, connectionFailure).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "test_util.h"
#include "transport/tcp/wire.h"

namespace tally::transport::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kIoTimeoutMs = 300;

tcp::TcpOptions shortTimeout() {
  tcp::TcpOptions o;
  o.sockets = 1;
  o.timeouts.io_ms = kIoTimeoutMs;
  return o;
}

int64_t msSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// A listener with the short timeout and a raw socket that has said its TCP hello to it; the
// accepted connection in *server.
struct RawPeer {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Connection> server;
  int fd = -1;
  ~RawPeer() {
    if (server) server->close();
    if (fd >= 0) ::close(fd);
  }
};

void connectRaw(RawPeer* p) {
  ASSERT_TRUE(tcp::listenAt("127.0.0.1:0", shortTimeout(), &p->listener).isOk());
  const std::string address = p->listener->address();
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  p->fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(p->fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  tcp::Hello hello;
  hello.count = 1;
  hello.connection_id = 7;
  hello.min_stripe = 65536;
  uint8_t bytes[tcp::kHelloBytes];
  tcp::encodeHello(hello, bytes);
  ASSERT_EQ(::send(p->fd, bytes, sizeof(bytes), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(bytes)));
  ASSERT_TRUE(p->listener->acceptWait(kWaitMs, &p->server).isOk());
  ASSERT_NE(p->server, nullptr);
}

// Posts a receive of `size` bytes on `conn` and returns how its wait ended, and after how long
// (counted from `since`).
Status receiveOutcome(Connection* conn, size_t size, Clock::time_point since, int64_t* ms) {
  std::vector<uint8_t> buffer(size);
  void* ptr = buffer.data();
  int tag = 1;
  std::unique_ptr<Request> r;
  Status s = conn->irecv(1, &ptr, &size, &tag, nullptr, &r);
  if (s.isOk() && r) s = r->wait(kWaitMs, nullptr);
  *ms = msSince(since);
  conn->close();  // the request must not outlive an open connection
  return s;
}

TEST(TcpIoTimeout, IdleConnectionOutlivesIt) {
  std::unique_ptr<Connection> a, b;
  ASSERT_TRUE(tcpPair(shortTimeout(), {}, &a, &b).isOk());
  std::this_thread::sleep_for(std::chrono::milliseconds(3 * kIoTimeoutMs));
  std::vector<uint8_t> data = pattern(200000, 3), got(data.size());
  void* ptr = got.data();
  size_t size = got.size();
  int tag = 4;
  std::unique_ptr<Request> s, r;
  ASSERT_TRUE(b->irecv(1, &ptr, &size, &tag, nullptr, &r).isOk());
  ASSERT_TRUE(a->isend(data.data(), data.size(), tag, nullptr, &s).isOk());
  ASSERT_TRUE(s && r);
  EXPECT_TRUE(s->wait(kWaitMs, nullptr).isOk());
  EXPECT_TRUE(r->wait(kWaitMs, nullptr).isOk());
  EXPECT_EQ(got, data);
}

TEST(TcpIoTimeout, PeerStoppingMidHeaderFailsTheConnection) {
  RawPeer p;
  ASSERT_NO_FATAL_FAILURE(connectRaw(&p));
  uint8_t header[tcp::kHeaderBytes];
  tcp::encodeHeader(tcp::Header{tcp::kHeaderMagic, 1, 1000}, header);
  const auto start = Clock::now();
  ASSERT_EQ(::send(p.fd, header, 5, MSG_NOSIGNAL), 5);  // and then nothing
  int64_t ms = 0;
  Status s = receiveOutcome(p.server.get(), 1000, start, &ms);
  EXPECT_EQ(s.code(), StatusCode::kRemote) << s.toString();
  EXPECT_NE(s.message().find("sent 5 of"), std::string::npos) << s.toString();
  EXPECT_GE(ms, kIoTimeoutMs * 8 / 10);
  EXPECT_LT(ms, 5000);
}

TEST(TcpIoTimeout, PeerStoppingMidPayloadFailsTheConnection) {
  RawPeer p;
  ASSERT_NO_FATAL_FAILURE(connectRaw(&p));
  uint8_t header[tcp::kHeaderBytes];
  tcp::encodeHeader(tcp::Header{tcp::kHeaderMagic, 1, 100000}, header);
  const auto start = Clock::now();
  ASSERT_EQ(::send(p.fd, header, sizeof(header), MSG_NOSIGNAL),
            static_cast<ssize_t>(sizeof(header)));
  std::vector<uint8_t> part = pattern(10, 1);
  ASSERT_EQ(::send(p.fd, part.data(), part.size(), MSG_NOSIGNAL), 10);
  int64_t ms = 0;
  Status s = receiveOutcome(p.server.get(), 100000, start, &ms);
  EXPECT_EQ(s.code(), StatusCode::kRemote) << s.toString();
  EXPECT_NE(s.message().find("sent 10 of 100000"), std::string::npos) << s.toString();
  EXPECT_LT(ms, 5000);
}

TEST(TcpIoTimeout, PeerThatDoesNotReadFailsTheSend) {
  RawPeer p;
  ASSERT_NO_FATAL_FAILURE(connectRaw(&p));
  // Far more than the socket buffers hold; the raw peer never reads.
  std::vector<uint8_t> data(256u << 20, 0x5a);
  std::unique_ptr<Request> s;
  const auto start = Clock::now();
  ASSERT_TRUE(p.server->isend(data.data(), data.size(), 1, nullptr, &s).isOk());
  ASSERT_NE(s, nullptr);
  Status st = s->wait(kWaitMs, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kRemote) << st.toString();
  EXPECT_NE(st.message().find("took no data"), std::string::npos) << st.toString();
  EXPECT_LT(msSince(start), 5000);
  p.server->close();
}

}  // namespace
}  // namespace tally::transport::test
