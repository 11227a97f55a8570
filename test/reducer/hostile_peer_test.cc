// SPDX-License-Identifier: Apache-2.0
// What a peer that has proven nothing can hold, and how its misbehaviour is counted (silent
// connections in the opening budget, and junk on the wire). The attackers are raw sockets
// speaking the TCP transport's framing, so they can stop or lie anywhere. Each case runs against
// both ways a connection is served: an event loop (one socket) and a reader and a writer thread
// (two sockets).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/fd.h"
#include "protocol/wire.h"
#include "test/support/counting_observer.h"
#include "test/support/harness.h"
#include "test/support/raw_streams.h"
#include "test/transport/tcp_raw.h"
#include "transport/raw_stream.h"

namespace tally::reducer::test {
namespace {

using std::chrono::milliseconds;

constexpr int64_t kWaitMs = 5000;
constexpr uint64_t kSliceBytes = 4096;
constexpr const char* kToken = "hostile-peer-test-token-0123456789abcdef";

Fd dial(const std::string& address) {
  Fd fd = rawConnect(portOf(address));
  EXPECT_TRUE(fd.valid());
  return fd;
}

std::unique_ptr<ReducerServer> start(ServerOptions o, CountingObserver* observer) {
  o.listen = "127.0.0.1:0";
  o.threads = 2;
  o.observer = observer;
  std::unique_ptr<ReducerServer> s;
  Status st = ReducerServer::start(o, &s);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return s;
}

wire::Hello helloFor(uint64_t id, uint32_t rank, uint32_t nranks) {
  wire::Hello hello;
  hello.comm = wire::CommId{0x4057113, id};
  hello.rank = rank;
  hello.nranks = nranks;
  hello.nreducers = 1;
  hello.slice_bytes = kSliceBytes;
  hello.min_slice_bytes = kSliceBytes;
  hello.window = 2;
  return hello;
}

// Joins as `rank` of a communicator: reads the Challenge, sends the Hello.
void join(int fd, const wire::Hello& hello) {
  std::array<uint8_t, wire::kMaxHeaderBytes> buf;
  size_t got = 0;
  ASSERT_TRUE(recvMsg(fd, &buf, &got).isOk());  // the Challenge
  ASSERT_TRUE(sendMsg(fd, wire::encodeHello(hello)).isOk());
}

// Reads messages until an Error comes; its reason ("" when none came).
std::string awaitError(int fd) {
  std::array<uint8_t, wire::kMaxHeaderBytes> buf;
  for (;;) {
    size_t got = 0;
    if (!recvMsg(fd, &buf, &got).isOk()) return "";
    wire::MsgType type;
    if (!wire::peekType(buf.data(), got, &type).isOk()) return "";
    if (type != wire::MsgType::kError) continue;  // Ready
    wire::Reason reason;
    if (!wire::decodeError(buf.data(), got, &reason).isOk()) return "";
    return reason.text;
  }
}

class HostilePeer : public ::testing::TestWithParam<int> {
 protected:
  int streams() const { return GetParam(); }
};

// Sockets that connect and never answer the Challenge fill the opening budget; each newer one
// evicts the oldest, so a job that holds the token connects at once (the auth timeout here is a
// minute) and sums correctly. Before the budget, they held --max-connections until the auth
// timeout.
TEST_P(HostilePeer, SquattersCannotKeepATokenHolderOut) {
  CountingObserver obs;
  ServerOptions o;
  o.job_token = auth::JobToken(kToken);
  o.max_connections = 4;
  o.max_opening_connections = 4;
  o.auth_timeout_ms = 60000;
  auto server = start(o, &obs);
  ASSERT_TRUE(server);
  std::vector<std::vector<Fd>> squatters;
  for (int i = 0; i < 8; ++i) squatters.push_back(connectStreams(server->address(), streams(), i));
  // Four were evicted by the four after them; the budget holds four.
  ASSERT_TRUE(
      waitUntil([&] { return obs.errorCount(ServerError::kLimit) == 4; }, milliseconds(kWaitMs)))
      << obs.errorCount(ServerError::kLimit) << " evicted";
  ASSERT_TRUE(waitUntil([&] { return obs.connections.load() == 4; }, milliseconds(kWaitMs)));

  const auto begin = std::chrono::steady_clock::now();
  CollOptions c = optionsFor({});
  c.reducers = {server->address()};
  c.slice_bytes = kSliceBytes;
  c.job_token = kToken;
  std::vector<std::unique_ptr<CollClient>> clients;
  for (const Status& s : connectAll(std::vector<CollOptions>(2, c), &clients)) {
    ASSERT_TRUE(s.isOk()) << s.toString();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(5));
  std::vector<std::thread> threads;
  std::vector<std::vector<float>> out(2, std::vector<float>(10000));
  std::vector<Status> st(2);
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> in(10000);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((r + 1) * (i % 31));
      CollRequest req;
      st[r] = post(clients[r].get(), in.data(), out[r].data(), in.size(), DataType::kFloat32,
                   ReduceOp::kSum, &req);
      size_t bytes = 0;
      if (st[r].isOk()) st[r] = waitRequest(&req, &bytes);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(st[r].isOk()) << st[r].toString();
    for (size_t i = 0; i < out[r].size(); ++i) {
      ASSERT_EQ(out[r][i], 3.0f * static_cast<float>(i % 31)) << "rank " << r << " at " << i;
    }
  }
  // The job's connections evicted one or two more squatters on their way in (two when the
  // second came before the first had joined); none timed out.
  EXPECT_TRUE(
      waitUntil([&] { return obs.errorCount(ServerError::kLimit) >= 5; }, milliseconds(kWaitMs)));
  EXPECT_LE(obs.errorCount(ServerError::kLimit), 6u);
  EXPECT_EQ(obs.errorCount(ServerError::kTimeout), 0u);
  EXPECT_EQ(obs.errorCount(ServerError::kAuth), 0u);
  for (auto& cl : clients) cl->close();
}

// A transport hello with the wrong magic counts as `accept`; a socket that sends no hello within
// the connect timeout counts as `timeout`. Neither is a connection of the reducer.
TEST_P(HostilePeer, BadAndMissingTransportHellosAreCounted) {
  CountingObserver obs;
  ServerOptions o;
  o.timeouts.connect_ms = 300;
  auto server = start(o, &obs);
  ASSERT_TRUE(server);
  Fd bad = dial(server->address());
  std::array<uint8_t, ::tally::test::tcp_raw::kHelloBytes> junk;
  junk.fill(0x5a);
  ASSERT_EQ(::send(bad.get(), junk.data(), junk.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(junk.size()));
  EXPECT_TRUE(
      waitUntil([&] { return obs.errorCount(ServerError::kAccept) == 1; }, milliseconds(kWaitMs)));
  Fd silent = dial(server->address());
  EXPECT_TRUE(
      waitUntil([&] { return obs.errorCount(ServerError::kTimeout) == 1; }, milliseconds(kWaitMs)));
  EXPECT_EQ(obs.totalErrors(), 2u);
  EXPECT_EQ(obs.peak_connections.load(), 0);
}

// A frame with a bad magic, where a message header is due, is a protocol error, not a lost peer.
TEST_P(HostilePeer, BadFrameMagicCountsAsProtocol) {
  CountingObserver obs;
  auto server = start(ServerOptions{}, &obs);
  ASSERT_TRUE(server);
  std::vector<Fd> fds = connectStreams(server->address(), streams(), 0xbad);
  std::array<uint8_t, wire::kMaxHeaderBytes> buf;
  size_t got = 0;
  ASSERT_TRUE(recvMsg(fds[0].get(), &buf, &got).isOk());  // the Challenge
  std::array<uint8_t, ::tally::test::tcp_raw::kHeaderBytes + 8> junk;
  junk.fill(0xee);
  ASSERT_EQ(::send(fds[0].get(), junk.data(), junk.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(junk.size()));
  EXPECT_TRUE(waitUntil([&] { return obs.errorCount(ServerError::kProtocol) == 1; },
                        milliseconds(kWaitMs)));
  EXPECT_TRUE(waitUntil([&] { return obs.connections.load() == 0; }, milliseconds(kWaitMs)));
  EXPECT_EQ(obs.errorCount(ServerError::kPeerLost), 0u);
  EXPECT_EQ(obs.totalErrors(), 1u);
}

// A message far larger than any message header, where one is due: a protocol error.
TEST_P(HostilePeer, OversizedFrameCountsAsProtocol) {
  CountingObserver obs;
  auto server = start(ServerOptions{}, &obs);
  ASSERT_TRUE(server);
  std::vector<Fd> fds = connectStreams(server->address(), streams(), 0xb16);
  std::array<uint8_t, wire::kMaxHeaderBytes> buf;
  size_t got = 0;
  ASSERT_TRUE(recvMsg(fds[0].get(), &buf, &got).isOk());  // the Challenge
  std::vector<uint8_t> big(32 * 1024, 0x11);              // small enough for stream 0 alone
  EXPECT_TRUE(transport::sendFrame(fds[0].get(), wire::kTagHeader, big.data(), big.size(), kWaitMs,
                                   "reducer")
                  .isOk());
  EXPECT_TRUE(waitUntil([&] { return obs.errorCount(ServerError::kProtocol) == 1; },
                        milliseconds(kWaitMs)));
  EXPECT_TRUE(waitUntil([&] { return obs.connections.load() == 0; }, milliseconds(kWaitMs)));
  EXPECT_EQ(obs.errorCount(ServerError::kPeerLost), 0u);
  EXPECT_EQ(obs.errorCount(ServerError::kInternal), 0u);
  EXPECT_EQ(obs.totalErrors(), 1u);
}

// A member whose slice header does not decode gets an Error that says why before the close:
// one too short for a slice, and one of the right size with a data type that does not exist.
TEST_P(HostilePeer, UndecodableSliceHeaderGetsAnErrorWithTheReason) {
  CountingObserver obs;
  auto server = start(ServerOptions{}, &obs);
  ASSERT_TRUE(server);
  for (uint64_t id : {1, 2}) {
    std::vector<Fd> fds = connectStreams(server->address(), streams(), 0x51ce + id);
    const int fd = fds[0].get();
    join(fd, helloFor(id, 0, 1));
    wire::SliceHeader h;
    h.count = kSliceBytes / sizeof(float);
    h.total_count = h.count;
    wire::Frame slice = wire::encodeSlice(h);
    std::string want;
    if (id == 1) {
      slice.size = wire::kPreambleBytes + 4;  // a slice's preamble, then too little
      want = "rank 0 (peer 127.0.0.1:";
    } else {
      // The data type byte sits after seq, slice, kind, padding, offset, count and total_count.
      slice.bytes[wire::kPreambleBytes + 8 + 4 + 4 + 8 + 8 + 8] = 0xee;
      want = "rank 0 sent a slice header that does not decode";
    }
    ASSERT_TRUE(sendMsg(fd, slice).isOk());
    const std::string reason = awaitError(fd);
    EXPECT_NE(reason.find(want), std::string::npos) << "reason: " << reason;
    EXPECT_NE(reason.find(id == 1 ? "12 bytes" : "unknown data type"), std::string::npos)
        << "reason: " << reason;
    EXPECT_TRUE(waitUntil([&] { return obs.communicators.load() == 0; }, milliseconds(kWaitMs)));
    EXPECT_EQ(obs.communicator_failures.load(), id);
    EXPECT_EQ(obs.errorCount(ServerError::kProtocol), id);
  }
}

// Rank 0 fills its window (rank 1 sends nothing), then gives up and says why. The reducer reads
// that Error although the window is full, and rank 1 hears the cause at once.
TEST_P(HostilePeer, GaveUpIsReadWithTheWindowFull) {
  CountingObserver obs;
  ServerOptions o;
  o.window = 2;
  auto server = start(o, &obs);
  ASSERT_TRUE(server);
  std::vector<Fd> r0 = connectStreams(server->address(), streams(), 0xa0);
  std::vector<Fd> r1 = connectStreams(server->address(), streams(), 0xa1);
  join(r0[0].get(), helloFor(2, 0, 2));
  join(r1[0].get(), helloFor(2, 1, 2));
  std::vector<float> payload(kSliceBytes / sizeof(float), 1.0f);
  for (uint64_t call = 0; call < 2; ++call) {
    wire::SliceHeader h;
    h.seq = call;
    h.count = payload.size();
    h.total_count = payload.size();
    ASSERT_TRUE(sendMsg(r0[0].get(), wire::encodeSlice(h)).isOk());
    ASSERT_TRUE(transport::sendFrame(r0[0].get(), wire::kTagPayload, payload.data(), kSliceBytes,
                                     kWaitMs, "reducer")
                    .isOk());
  }
  std::this_thread::sleep_for(milliseconds(200));  // both buffered: the window is full
  ASSERT_TRUE(sendMsg(r0[0].get(), wire::encodeError(wire::Reason{"lost reducer 7"})).isOk());
  const std::string reason = awaitError(r1[0].get());
  EXPECT_NE(reason.find("gave up: lost reducer 7"), std::string::npos) << "reason: " << reason;
  EXPECT_TRUE(waitUntil([&] { return obs.errorCount(ServerError::kPeerLost) == 1; },
                        milliseconds(kWaitMs)));
}

INSTANTIATE_TEST_SUITE_P(Served, HostilePeer, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return std::string(param.param == 1 ? "EventLoop" : "Threads");
                         });

}  // namespace
}  // namespace tally::reducer::test
