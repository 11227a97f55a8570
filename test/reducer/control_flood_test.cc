// SPDX-License-Identifier: Apache-2.0
// Members that flood the reducer with control messages (Pings, Acks), as anyone can: without a
// job token any host forms a one-rank communicator of its own. The attackers are raw sockets
// speaking the TCP transport's framing.
//
//   - A member that streams Pings and never reads costs the reducer one unsent Pong: a Ping that
//     comes while its Pong has not been written is answered by that Pong.
//   - A member that streams Acks that each bring a Commit, and never reads, is closed once its
//     unsent control messages pass the bound (counted as `limit`, with a WARN saying why).
//   - A member that streams Pings or Acks as fast as it can does not starve the other
//     connections of its event loop: a communicator beside it still sums on time.
//
// In every case the reducer serves a new communicator correctly afterwards.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test/reducer/raw_member.h"
#include "test/support/warnings.h"

namespace tally::reducer::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int64_t kWaitMs = 5000;
// Messages each flood sends: far more replies than the sockets' buffers hold (the reducer's
// send buffer grows to 4 MB by default, about 94000 Pongs), so before the bounds most of them
// were queued in the reducer.
constexpr size_t kFloodMessages = 400000;

// Appends f, framed as the TCP transport frames a message header, to `out`.
void appendFramed(const wire::Frame& f, std::vector<uint8_t>* out) {
  const auto header = ::tally::test::tcp_raw::header(wire::kTagHeader, f.size);
  out->insert(out->end(), header.begin(), header.end());
  out->insert(out->end(), f.data(), f.data() + f.size);
}

// Writes all of `bytes` (a blocking socket); false once the reducer closed the connection.
bool sendAll(int fd, const std::vector<uint8_t>& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Joins a one-rank communicator of its own on `fd` and reads its Ready.
void joinAlone(int fd, uint64_t comm) {
  Received m;
  size_t got = 0;
  ASSERT_TRUE(recvMsg(fd, &m.bytes, &got).isOk());  // the Challenge
  ASSERT_TRUE(sendMsg(fd, wire::encodeHello(memberHello(comm, 0, 1))).isOk());
  ASSERT_TRUE(recvMsg(fd, &m.bytes, &got).isOk());
  ASSERT_TRUE(wire::peekType(m.bytes.data(), got, &m.type).isOk());
  ASSERT_EQ(m.type, wire::MsgType::kReady);
}

// Reads messages until none comes for `quiet_ms` (or the connection ends); how many of each type
// (a result's payload is read with it).
std::vector<size_t> drain(int fd, int64_t quiet_ms) {
  std::vector<size_t> counts(256, 0);
  Received m;
  std::vector<uint8_t> payload(kMemberSliceBytes);
  for (;;) {
    size_t got = 0;
    if (!transport::recvFrame(fd, wire::kTagHeader, m.bytes.data(), m.bytes.size(), &got, quiet_ms,
                              "reducer")
             .isOk() ||
        !wire::peekType(m.bytes.data(), got, &m.type).isOk()) {
      return counts;
    }
    counts[static_cast<uint8_t>(m.type)]++;
    if (m.type == wire::MsgType::kResult &&
        !transport::recvFrame(fd, wire::kTagPayload, payload.data(), payload.size(), &got, quiet_ms,
                              "reducer")
             .isOk()) {
      return counts;
    }
  }
}

// The slice of a one-slice all-reduce of call `seq` (zeros), framed for appending to a flood.
void appendSlice(uint64_t seq, std::vector<uint8_t>* out) {
  wire::SliceHeader h;
  h.seq = seq;
  h.count = kMemberSliceBytes / sizeof(float);
  h.total_count = h.count;
  appendFramed(wire::encodeSlice(h), out);
  const auto header = ::tally::test::tcp_raw::header(wire::kTagPayload, kMemberSliceBytes);
  out->insert(out->end(), header.begin(), header.end());
  out->insert(out->end(), kMemberSliceBytes, 0);
}

class ControlFlood : public ::testing::TestWithParam<int> {
 protected:
  int streams() const { return GetParam(); }

  void SetUp() override { ::tally::test::WarningLog::start(); }
  void TearDown() override {
    if (server_) server_->stop();
    ::tally::test::WarningLog::stop();
  }

  // One event loop: a member that floods it shares it with every other connection.
  void startServer() {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.threads = 1;
    o.observer = &observer_;
    Status st = ReducerServer::start(o, &server_);
    ASSERT_TRUE(st.isOk()) << st.toString();
  }

  // `nranks` honest members of communicator `comm` over `streams` sockets each, with their Ready.
  std::vector<std::unique_ptr<RawMember>> joinHonest(uint64_t comm, uint32_t nranks, int streams) {
    std::vector<std::unique_ptr<RawMember>> members;
    for (uint32_t r = 0; r < nranks; ++r) {
      auto m = std::make_unique<RawMember>(server_->address(), streams, next_id_++);
      EXPECT_TRUE(m->valid());
      if (!m->valid()) return {};
      Received challenge;
      EXPECT_TRUE(m->expect(wire::MsgType::kChallenge, &challenge).isOk());
      EXPECT_TRUE(m->send(wire::encodeHello(memberHello(comm, r, nranks))).isOk());
      members.push_back(std::move(m));
    }
    if (!awaitReady(members)) return {};
    return members;
  }

  // A communicator formed now sums correctly.
  void expectServiceIntact(uint64_t comm) {
    auto members = joinHonest(comm, 2, streams());
    ASSERT_EQ(members.size(), 2u);
    for (uint64_t seq = 0; seq < 3; ++seq) {
      expectSum(members, seq);
      if (HasFatalFailure()) return;
    }
    for (auto& m : members) EXPECT_TRUE(m->send(wire::encodeBye()).isOk());
  }

  CountingObserver observer_;  // outlives the server
  std::unique_ptr<ReducerServer> server_;
  uint64_t next_id_ = 0xf100d;
};

// A member streams Pings and reads nothing. Each Ping that comes while its connection's Pong is
// still unsent is answered by that Pong, so what the reducer holds for it stays one Pong, and
// once it reads it gets about what the sockets held, not a Pong per Ping. Before the bound every
// Ping queued a Pong of its own (some hundred bytes of reducer memory each, for as long as the
// member did not read).
TEST_P(ControlFlood, PingsFromAMemberThatDoesNotReadAreAnsweredByOnePong) {
  startServer();
  std::vector<Fd> fds = connectStreams(server_->address(), streams(), next_id_++);
  ASSERT_EQ(fds.size(), static_cast<size_t>(streams()));
  const int fd = fds[0].get();  // control messages travel on stream 0 alone
  joinAlone(fd, 0x9196);
  if (HasFatalFailure()) return;

  std::vector<uint8_t> flood;
  for (size_t i = 0; i < kFloodMessages; ++i) {
    appendFramed(wire::encodePing(wire::Ping{i + 1}), &flood);
  }
  appendSlice(0, &flood);  // reduced once the reducer has handled every Ping before it
  ASSERT_TRUE(sendAll(fd, flood));
  // A reader thread takes some tens of microseconds a message: tens of seconds under load.
  ASSERT_TRUE(waitUntil([&] { return observer_.slices.load() == 1; }, milliseconds(60000)));
  // Now read what the reducer wrote and queued for the flood, until it has nothing more.
  const std::vector<size_t> got = drain(fd, 1000);
  const size_t pongs = got[static_cast<uint8_t>(wire::MsgType::kPong)];
  EXPECT_GE(pongs, 1u);
  EXPECT_EQ(got[static_cast<uint8_t>(wire::MsgType::kResult)], 1u);
  // Most came through the sockets' buffers; the reducer itself held at most one.
  EXPECT_LT(pongs, kFloodMessages / 2) << "a Pong queued per Ping";
  EXPECT_EQ(got[static_cast<uint8_t>(wire::MsgType::kError)], 0u);

  // The member is served as before: its next Ping gets its own Pong.
  Received m;
  ASSERT_TRUE(sendMsg(fd, wire::encodePing(wire::Ping{7})).isOk());
  ASSERT_TRUE(transport::recvFrame(fd, wire::kTagHeader, m.bytes.data(), m.bytes.size(), &m.size,
                                   kWaitMs, "reducer")
                  .isOk());
  wire::Ping pong;
  ASSERT_TRUE(wire::decodePong(m.bytes.data(), m.size, &pong).isOk());
  EXPECT_EQ(pong.token, 7u);
  EXPECT_EQ(observer_.totalErrors(), 0u);
  expectServiceIntact(0x1e9a1);
}

// A member streams Acks, each raising its one-rank communicator's floor, so each brings a
// Commit, and reads nothing. The reducer closes it once its unsent control messages pass the
// bound, says why once, counts it as `limit`, and serves the next communicator. Before the bound
// the Commits piled up until the I/O timeout (minutes).
TEST_P(ControlFlood, AcksFromAMemberThatDoesNotReadItsCommitsCloseIt) {
  startServer();
  std::vector<Fd> fds = connectStreams(server_->address(), streams(), next_id_++);
  ASSERT_EQ(fds.size(), static_cast<size_t>(streams()));
  const int fd = fds[0].get();
  joinAlone(fd, 0xacc);
  if (HasFatalFailure()) return;

  std::vector<uint8_t> flood;
  for (size_t i = 0; i < kFloodMessages; ++i) {
    appendFramed(wire::encodeAck(wire::AckPoint{i + 1, 0}), &flood);
  }
  (void)sendAll(fd, flood);  // the reducer may close the connection before it took them all
  EXPECT_TRUE(waitUntil([&] { return observer_.errorCount(ServerError::kLimit) == 1; },
                        milliseconds(kWaitMs)))
      << observer_.errorCount(ServerError::kLimit) << " closed for a limit";
  EXPECT_TRUE(waitUntil(
      [&] { return observer_.connections.load() == 0 && observer_.communicators.load() == 0; },
      milliseconds(kWaitMs)))
      << observer_.connections.load() << " connections, " << observer_.communicators.load()
      << " communicators still open";
  // Said where it ends (and in the Error its communicator fails with), not once per message.
  const size_t said = ::tally::test::WarningLog::with({"control messages", "unread"}).size();
  EXPECT_GE(said, 1u);
  EXPECT_LE(said, 2u);
  fds.clear();
  expectServiceIntact(0x1e9a2);
}

INSTANTIATE_TEST_SUITE_P(Served, ControlFlood, ::testing::Values(1, 2), servedName);

// What a flooding member streams.
enum class Flood { kPings, kAcks };

class FloodedLoop : public ControlFlood {};

// On a reducer of one event loop, a member streams Pings (reading its Pongs) or Acks (the same
// one again, so no Commit comes back) as fast as it can. A two-rank communicator on the same loop
// still completes every call with the exact sum, each in well under a second: the loop handles a
// bounded number of one connection's messages per turn. Before, it read the flooding connection
// for as long as it had bytes, and nothing else on the loop moved.
void floodBeside(ControlFlood* test, const std::string& address, Flood kind,
                 std::vector<std::unique_ptr<RawMember>>* honest) {
  std::vector<Fd> fds = connectStreams(address, 1, 0xbad);
  ASSERT_EQ(fds.size(), 1u);
  const int fd = fds[0].get();
  joinAlone(fd, kind == Flood::kPings ? 0xf1 : 0xf2);
  if (test->HasFatalFailure()) return;

  std::vector<uint8_t> flood;
  for (size_t i = 0; i < 65536; ++i) {
    appendFramed(kind == Flood::kPings ? wire::encodePing(wire::Ping{i + 1})
                                       : wire::encodeAck(wire::AckPoint{1, 0}),
                 &flood);
  }
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    while (!stop.load() && sendAll(fd, flood)) {
    }
  });
  std::thread reader([&] {
    std::vector<uint8_t> sink(1 << 16);
    while (!stop.load()) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 10) > 0 && ::recv(fd, sink.data(), sink.size(), MSG_DONTWAIT) == 0) break;
    }
  });
  std::this_thread::sleep_for(milliseconds(200));  // the flood is on

  const auto begin = Clock::now();
  for (uint64_t seq = 0; seq < 20 && !test->HasFatalFailure(); ++seq) {
    const auto call = Clock::now();
    expectSum(*honest, seq);
    EXPECT_LT(Clock::now() - call, std::chrono::seconds(1)) << "call " << seq;
  }
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - begin);
  stop.store(true);
  ::shutdown(fd, SHUT_RDWR);  // unblocks the sender
  sender.join();
  reader.join();
  EXPECT_LT(took.count(), 5000) << "20 calls beside the flood";
}

TEST_P(FloodedLoop, AMemberStreamingPingsDoesNotStarveItsLoop) {
  startServer();
  auto honest = joinHonest(0x40a1, 2, 1);
  ASSERT_EQ(honest.size(), 2u);
  floodBeside(this, server_->address(), Flood::kPings, &honest);
}

TEST_P(FloodedLoop, AMemberStreamingAcksDoesNotStarveItsLoop) {
  startServer();
  auto honest = joinHonest(0x40a2, 2, 1);
  ASSERT_EQ(honest.size(), 2u);
  floodBeside(this, server_->address(), Flood::kAcks, &honest);
}

// Only the event loop shares a thread between connections.
INSTANTIATE_TEST_SUITE_P(Served, FloodedLoop, ::testing::Values(1), servedName);

}  // namespace
}  // namespace tally::reducer::test
