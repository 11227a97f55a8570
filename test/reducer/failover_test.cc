// SPDX-License-Identifier: Apache-2.0
// The reducer's half of failover (docs/failover.md), against a real ReducerServer with raw
// members: Acks become Commits of every rank's minimum, Pings get their Pongs, a Dismiss or a
// lost member fails the communicator on this reducer only (an Error of reducer scope) while
// other causes fail it everywhere, a call that needs a rank that said Bye fails it at once
// (naming the rank) while a Bye after every call fails nothing, and Hello's epoch. Each case runs
// over an event loop and over threads. The books behind the Commits and the relay allowance are
// tested directly too.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "reducer/server_internal.h"
#include "test/reducer/raw_member.h"

namespace tally::reducer::test {
namespace {

using server::AckFloor;
using server::kRelayBurst;
using server::kRelayPerSecond;
using server::RelayAllowance;

// Against a scan of every rank, over random Acks, many of them lowering one field.
TEST(AckFloorTest, KeepsTheLeastOfEachFieldOverRandomAcks) {
  constexpr uint32_t kRanks = 7;
  std::mt19937 rng(12345);
  AckFloor floor(kRanks);
  std::vector<wire::AckPoint> books(kRanks);
  EXPECT_EQ(floor.least(), (wire::AckPoint{0, 0}));
  wire::AckPoint last{0, 0};
  // A step of -2 to +2 from where the rank is, never below 0.
  auto step = [&](uint64_t v) -> uint64_t {
    const int d = static_cast<int>(rng() % 5) - 2;
    return d < 0 && v < static_cast<uint64_t>(-d) ? 0 : v + d;
  };
  for (int i = 0; i < 20000; ++i) {
    const uint32_t r = rng() % kRanks;
    const wire::AckPoint to{step(books[r].calls),
                            static_cast<uint32_t>(step(books[r].recovery_epoch))};
    floor.raise(r, to);
    books[r].calls = std::max(books[r].calls, to.calls);
    books[r].recovery_epoch = std::max(books[r].recovery_epoch, to.recovery_epoch);
    wire::AckPoint want = books[0];
    for (const auto& b : books) {
      want.calls = std::min(want.calls, b.calls);
      want.recovery_epoch = std::min(want.recovery_epoch, b.recovery_epoch);
    }
    ASSERT_EQ(floor.least(), want) << "after Ack " << i;
    ASSERT_GE(want.calls, last.calls);
    ASSERT_GE(want.recovery_epoch, last.recovery_epoch);
    last = want;
  }
}

TEST(RelayAllowanceTest, ABurstThenTheRefillRate) {
  RelayAllowance a;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t i = 0; i < kRelayBurst; ++i) ASSERT_TRUE(a.take(t0)) << i;
  EXPECT_FALSE(a.take(t0));
  // Half a second refills half a second's worth, and no more.
  const auto t1 = t0 + std::chrono::milliseconds(500);
  for (uint32_t i = 0; i < kRelayPerSecond / 2; ++i) ASSERT_TRUE(a.take(t1)) << i;
  EXPECT_FALSE(a.take(t1));
  // A long quiet refills the burst, not more.
  const auto t2 = t1 + std::chrono::hours(1);
  for (uint32_t i = 0; i < kRelayBurst; ++i) ASSERT_TRUE(a.take(t2)) << i;
  EXPECT_FALSE(a.take(t2));
}

class Failover : public MemberTest {};

wire::Frame ack(uint64_t calls, uint32_t epoch) {
  return wire::encodeAck(wire::AckPoint{calls, epoch});
}

// The Commit `m` must get next.
void expectCommit(RawMember& m, wire::AckPoint want, const char* what) {
  Received got;
  Status st = m.expect(wire::MsgType::kCommit, &got);
  ASSERT_TRUE(st.isOk()) << what << ": " << st.toString();
  wire::AckPoint point;
  ASSERT_TRUE(wire::decodeCommit(got.bytes.data(), got.size, &point).isOk());
  EXPECT_EQ(point, want) << what << ": Commit(" << point.calls << ", " << point.recovery_epoch
                         << ")";
}

// Each Ack is followed by a Ping on the same connection: its Pong says the Ack was handled, so a
// member that is quiet afterwards got no Commit for it.
TEST_P(Failover, CommitIsTheLeastOfEveryRanksAckAndOnlyWhenItGrows) {
  startServer();
  auto m = join(1, 3);
  ASSERT_EQ(m.size(), 3u);
  uint64_t token = 100;
  auto quiet = [&](const char* what) {
    for (auto& member : m) EXPECT_TRUE(member->quietFor(100)) << what;
  };
  // Not every rank has acknowledged: no Commit.
  ASSERT_TRUE(m[0]->send(ack(5, 0)).isOk());
  ASSERT_TRUE(m[0]->sync(token++).isOk());
  ASSERT_TRUE(m[1]->send(ack(3, 2)).isOk());
  ASSERT_TRUE(m[1]->sync(token++).isOk());
  quiet("two of three ranks acknowledged");
  // The third: calls (5, 3, 4) and epochs (0, 2, 1), so Commit(3, 0), to every rank, and on the
  // acknowledging rank's connection before its Pong.
  ASSERT_TRUE(m[2]->send(ack(4, 1)).isOk());
  expectCommit(*m[2], {3, 0}, "rank 2");
  ASSERT_TRUE(m[2]->sync(token++).isOk());
  expectCommit(*m[0], {3, 0}, "rank 0");
  expectCommit(*m[1], {3, 0}, "rank 1");
  // A lower Ack is ignored field by field: rank 1's calls stay 3 and nothing moves.
  ASSERT_TRUE(m[1]->send(ack(2, 2)).isOk());
  ASSERT_TRUE(m[1]->sync(token++).isOk());
  // Raising a rank that is not the least moves nothing either, nor does a repeat.
  ASSERT_TRUE(m[0]->send(ack(9, 0)).isOk());
  ASSERT_TRUE(m[0]->sync(token++).isOk());
  ASSERT_TRUE(m[2]->send(ack(4, 1)).isOk());
  ASSERT_TRUE(m[2]->sync(token++).isOk());
  quiet("Acks that raise no minimum");
  // Only the epochs' minimum grows: epochs (3, 2, 1), then (3, 2, 2).
  ASSERT_TRUE(m[0]->send(ack(9, 3)).isOk());
  expectCommit(*m[0], {3, 1}, "rank 0, epochs");
  ASSERT_TRUE(m[0]->sync(token++).isOk());
  expectCommit(*m[1], {3, 1}, "rank 1, epochs");
  expectCommit(*m[2], {3, 1}, "rank 2, epochs");
  ASSERT_TRUE(m[2]->send(ack(4, 2)).isOk());
  expectCommit(*m[2], {3, 2}, "rank 2, epochs");
  ASSERT_TRUE(m[2]->sync(token++).isOk());
  expectCommit(*m[0], {3, 2}, "rank 0, epochs");
  expectCommit(*m[1], {3, 2}, "rank 1, epochs");
  // Calls (9, 6, 4): the least is rank 2's 4 now.
  ASSERT_TRUE(m[1]->send(ack(6, 2)).isOk());
  expectCommit(*m[1], {4, 2}, "rank 1, calls");
  ASSERT_TRUE(m[1]->sync(token++).isOk());
  expectCommit(*m[0], {4, 2}, "rank 0, calls");
  expectCommit(*m[2], {4, 2}, "rank 2, calls");
  quiet("after the last Commit");
  EXPECT_EQ(observer_.totalErrors(), 0u);
  EXPECT_EQ(observer_.communicator_failures.load(), 0u);
}

// Results still flow with Acks in between, and a Commit follows the result it covers.
TEST_P(Failover, CommitFollowsTheResultsItCovers) {
  startServer();
  auto m = join(2, 2);
  ASSERT_EQ(m.size(), 2u);
  for (uint64_t call = 0; call < 3; ++call) {
    expectSum(m, call);
    if (HasFatalFailure()) return;
    for (auto& member : m) ASSERT_TRUE(member->send(ack(call + 1, 0)).isOk());
    for (auto& member : m) expectCommit(*member, {call + 1, 0}, "after the result");
  }
  EXPECT_EQ(observer_.totalErrors(), 0u);
}

// Acks from every rank at once (each on its own thread here, and on the reducer over threads):
// every member still gets its Commits in order, each newer than the last, ending at the
// minimum of the last Acks.
TEST_P(Failover, CommitsStayInOrderWhileRanksAckAtOnce) {
  constexpr uint32_t kRanks = 4;
  constexpr uint64_t kAcks = 300;
  startServer();
  auto m = join(11, kRanks);
  ASSERT_EQ(m.size(), kRanks);
  std::vector<std::thread> senders;
  for (uint32_t r = 0; r < kRanks; ++r) {
    senders.emplace_back([&, r] {
      for (uint64_t i = 1; i <= kAcks; ++i) {
        // Rank r's epochs lag by r, so both fields' minimums move along the way.
        const auto epoch = static_cast<uint32_t>(i > r ? (i - r) / 10 : 0);
        if (!m[r]->send(ack(i, epoch)).isOk()) return;
      }
    });
  }
  for (auto& t : senders) t.join();
  const wire::AckPoint last{kAcks, static_cast<uint32_t>((kAcks - (kRanks - 1)) / 10)};
  for (uint32_t r = 0; r < kRanks; ++r) {
    wire::AckPoint seen{0, 0};
    int commits = 0;
    while (!(seen == last)) {
      Received got;
      Status st = m[r]->expect(wire::MsgType::kCommit, &got);
      ASSERT_TRUE(st.isOk()) << "rank " << r << " after " << commits
                             << " Commits: " << st.toString();
      wire::AckPoint point;
      ASSERT_TRUE(wire::decodeCommit(got.bytes.data(), got.size, &point).isOk());
      ASSERT_GE(point.calls, seen.calls) << "rank " << r;
      ASSERT_GE(point.recovery_epoch, seen.recovery_epoch) << "rank " << r;
      ASSERT_FALSE(point == seen) << "rank " << r << ": the same Commit twice";
      seen = point;
      commits++;
    }
    EXPECT_TRUE(m[r]->quietFor(50)) << "rank " << r;
  }
  EXPECT_EQ(observer_.totalErrors(), 0u);
}

TEST_P(Failover, AckBeforeTheCommunicatorFormedEndsTheConnection) {
  startServer();
  auto alone = open(memberHello(3, 0, 2));  // rank 1 never comes
  ASSERT_TRUE(alone);
  ASSERT_TRUE(alone->sync(7).isOk());  // a member may Ping before Ready
  ASSERT_TRUE(alone->send(ack(1, 0)).isOk());
  const ErrorSeen e = awaitError(*alone);
  EXPECT_NE(e.reason.find("rank 0 sent an Ack before every rank joined (1 of 2"), std::string::npos)
      << e.reason;
  EXPECT_EQ(e.scope, wire::ErrorScope::kCommunicator);
  EXPECT_TRUE(alone->closedByReducer());
  EXPECT_TRUE(waitUntil([&] { return observer_.communicators.load() == 0; }));
  EXPECT_EQ(observer_.errorCount(ServerError::kProtocol), 1u);
  EXPECT_EQ(observer_.totalErrors(), 1u);
}

TEST_P(Failover, PingGetsPongWithItsToken) {
  startServer();
  auto m = join(4, 2);
  ASSERT_EQ(m.size(), 2u);
  for (uint64_t token : {0ull, 1ull, 0xfeedfacecafebeefull, ~0ull}) {
    ASSERT_TRUE(m[1]->send(wire::encodePing(wire::Ping{token})).isOk());
    Received got;
    ASSERT_TRUE(m[1]->expect(wire::MsgType::kPong, &got).isOk());
    wire::Ping pong;
    ASSERT_TRUE(wire::decodePong(got.bytes.data(), got.size, &pong).isOk());
    EXPECT_EQ(pong.token, token);
  }
  EXPECT_TRUE(m[0]->quietFor(100));  // a Pong goes to the one who asked
  EXPECT_EQ(observer_.totalErrors(), 0u);
}

TEST_P(Failover, DismissFailsTheCommunicatorWithReducerScope) {
  startServer();
  auto m = join(5, 3);
  ASSERT_EQ(m.size(), 3u);
  ASSERT_TRUE(m[2]->send(wire::encodeDismiss(wire::Reason{"no Pong within 10000 ms"})).isOk());
  for (int r : {0, 1}) {
    const ErrorSeen e = awaitError(*m[r]);
    EXPECT_EQ(e.scope, wire::ErrorScope::kReducer) << "rank " << r;
    EXPECT_NE(e.reason.find("rank 2 (peer 127.0.0.1:"), std::string::npos) << e.reason;
    EXPECT_NE(e.reason.find("dismissed this reducer: no Pong within 10000 ms"), std::string::npos)
        << e.reason;
  }
  // The dismissing rank's connection ends too (after the Error every member gets); the others
  // are let go once theirs is out.
  EXPECT_EQ(awaitError(*m[2]).scope, wire::ErrorScope::kReducer);
  for (auto& member : m) EXPECT_TRUE(member->closedByReducer());
  EXPECT_TRUE(waitUntil([&] { return observer_.communicators.load() == 0; }));
  EXPECT_EQ(observer_.communicator_failures.load(), 1u);
  // A membership step, not an error of the connection.
  EXPECT_EQ(observer_.totalErrors(), 0u);
}

TEST_P(Failover, LostMemberFailsTheCommunicatorWithReducerScope) {
  startServer();
  auto m = join(6, 3);
  ASSERT_EQ(m.size(), 3u);
  m[1]->close();  // no Bye, no Error: its connection just ends
  for (int r : {0, 2}) {
    const ErrorSeen e = awaitError(*m[r]);
    EXPECT_EQ(e.scope, wire::ErrorScope::kReducer) << "rank " << r;
    EXPECT_NE(e.reason.find("rank 1 (peer 127.0.0.1:"), std::string::npos) << e.reason;
    EXPECT_NE(e.reason.find("was lost"), std::string::npos) << e.reason;
  }
  EXPECT_TRUE(waitUntil([&] { return observer_.errorCount(ServerError::kPeerLost) == 1; }));
}

TEST_P(Failover, DisagreeingRanksFailTheCommunicatorWithCommunicatorScope) {
  startServer();
  auto m = join(7, 2);
  ASSERT_EQ(m.size(), 2u);
  for (uint64_t r = 0; r < 2; ++r) {
    wire::SliceHeader h;
    h.count = kMemberSliceBytes / sizeof(float) / (r + 1);  // 1024, then 512
    h.total_count = h.count;
    std::vector<float> in(h.count, 1.0f);
    ASSERT_TRUE(m[r]->send(wire::encodeSlice(h)).isOk());
    ASSERT_TRUE(transport::sendFrame(m[r]->fd(), wire::kTagPayload, in.data(),
                                     h.count * sizeof(float), kRawWaitMs, "reducer")
                    .isOk());
  }
  for (int r : {0, 1}) {
    const ErrorSeen e = awaitError(*m[r]);
    EXPECT_EQ(e.scope, wire::ErrorScope::kCommunicator) << "rank " << r;
    EXPECT_NE(e.reason.find("disagree"), std::string::npos) << e.reason;
  }
  EXPECT_EQ(observer_.errorCount(ServerError::kMismatch), 1u);
}

TEST_P(Failover, WorkerThatGaveUpFailsTheCommunicatorWithCommunicatorScope) {
  startServer();
  auto m = join(8, 2);
  ASSERT_EQ(m.size(), 2u);
  ASSERT_TRUE(m[0]->send(wire::encodeError(wire::Reason{"lost reducer 7"})).isOk());
  const ErrorSeen e = awaitError(*m[1]);
  EXPECT_EQ(e.scope, wire::ErrorScope::kCommunicator);
  EXPECT_NE(e.reason.find("rank 0 (peer 127.0.0.1:"), std::string::npos) << e.reason;
  EXPECT_NE(e.reason.find("gave up: lost reducer 7"), std::string::npos) << e.reason;
}

// Rank `m`'s input of call `seq`: one slice of 1024 float32, all `value`.
void sendInput(RawMember& m, uint64_t seq, float value) {
  wire::SliceHeader h;
  h.seq = seq;
  h.count = kMemberSliceBytes / sizeof(float);
  h.total_count = h.count;
  std::vector<float> in(h.count, value);
  ASSERT_TRUE(m.send(wire::encodeSlice(h)).isOk());
  ASSERT_TRUE(transport::sendFrame(m.fd(), wire::kTagPayload, in.data(), kMemberSliceBytes,
                                   kRawWaitMs, "reducer")
                  .isOk());
}

// What a rank that said Bye costs the others: a call that needs its input fails the
// communicator at once, naming it, not at the others' timeout.
void expectLeftError(wire::ErrorScope scope, const std::string& reason, int who,
                     const char* slice) {
  EXPECT_EQ(scope, wire::ErrorScope::kCommunicator) << "rank " << who;
  EXPECT_NE(reason.find("rank 1 (peer 127.0.0.1:"), std::string::npos) << reason;
  EXPECT_NE(reason.find("closed its communicator while the others' calls need it"),
            std::string::npos)
      << reason;
  EXPECT_NE(reason.find(slice), std::string::npos) << reason;
}

// Rank 1 says Bye after every call; rank 0 then sends a call rank 1 never will.
TEST_P(Failover, ASliceAfterAByeFailsTheCommunicatorNamingTheRank) {
  startServer();
  auto m = join(11, 3);
  ASSERT_EQ(m.size(), 3u);
  expectSum(m, 0);
  ASSERT_TRUE(m[1]->send(wire::encodeBye()).isOk());
  ASSERT_TRUE(m[1]->closedByReducer());  // the reducer has taken the Bye: no Error for it
  EXPECT_EQ(observer_.communicator_failures.load(), 0u);
  const auto sent = std::chrono::steady_clock::now();
  sendInput(*m[0], 1, 1.0f);
  for (int r : {0, 2}) {
    const ErrorSeen e = awaitError(*m[r]);
    expectLeftError(e.scope, e.reason, r, "call 1 slice 0");
  }
  EXPECT_LT(std::chrono::steady_clock::now() - sent, std::chrono::seconds(1));
  EXPECT_EQ(observer_.communicator_failures.load(), 1u);
}

// Rank 0's slice is already waiting for rank 1's input when rank 1 says Bye.
TEST_P(Failover, AByeWhileASliceWaitsForItFailsTheCommunicator) {
  startServer();
  auto m = join(12, 3);
  ASSERT_EQ(m.size(), 3u);
  sendInput(*m[0], 0, 1.0f);
  sendInput(*m[2], 0, 3.0f);
  ASSERT_TRUE(m[0]->sync(1).isOk());  // both inputs are with the engine
  ASSERT_TRUE(m[2]->sync(2).isOk());
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_TRUE(m[1]->send(wire::encodeBye()).isOk());
  for (int r : {0, 2}) {
    const ErrorSeen e = awaitError(*m[r]);
    expectLeftError(e.scope, e.reason, r, "call 0 slice 0");
  }
  EXPECT_LT(std::chrono::steady_clock::now() - sent, std::chrono::seconds(1));
  EXPECT_TRUE(m[1]->closedByReducer());  // it left: the Error is not its to hear
  EXPECT_EQ(observer_.communicator_failures.load(), 1u);
}

// A slice that has the leaving rank's input can still complete; only the next call fails.
TEST_P(Failover, ASliceWithTheLeavingRanksInputStillCompletes) {
  startServer();
  auto m = join(13, 3);
  ASSERT_EQ(m.size(), 3u);
  sendInput(*m[1], 0, 2.0f);
  ASSERT_TRUE(m[1]->send(wire::encodeBye()).isOk());
  ASSERT_TRUE(m[1]->closedByReducer());
  sendInput(*m[0], 0, 1.0f);
  sendInput(*m[2], 0, 3.0f);
  for (int r : {0, 2}) {
    Received got;
    Status st = m[r]->expect(wire::MsgType::kResult, &got);
    ASSERT_TRUE(st.isOk()) << "rank " << r << ": " << st.toString();
    std::vector<float> out(kMemberSliceBytes / sizeof(float));
    size_t bytes = 0;
    ASSERT_TRUE(transport::recvFrame(m[r]->fd(), wire::kTagPayload, out.data(), kMemberSliceBytes,
                                     &bytes, kRawWaitMs, "reducer")
                    .isOk());
    EXPECT_EQ(out[0], 6.0f) << "rank " << r;
  }
  EXPECT_EQ(observer_.communicator_failures.load(), 0u);
  sendInput(*m[2], 1, 3.0f);
  for (int r : {0, 2}) {
    const ErrorSeen e = awaitError(*m[r]);
    expectLeftError(e.scope, e.reason, r, "call 1 slice 0");
  }
}

// A normal teardown: every rank says Bye once its calls are done. Nobody hears an Error, and
// the communicator closes without failing.
TEST_P(Failover, ByeAfterEveryCallFailsNothing) {
  startServer();
  auto m = join(14, 3);
  ASSERT_EQ(m.size(), 3u);
  expectSum(m, 0);
  expectSum(m, 1);
  ASSERT_TRUE(m[2]->send(wire::encodeBye()).isOk());
  ASSERT_TRUE(m[2]->closedByReducer());
  ASSERT_TRUE(m[0]->sync(1).isOk());  // a Ping after the Bye is answered, nothing before it
  for (int r : {0, 1}) {
    ASSERT_TRUE(m[r]->send(wire::encodeBye()).isOk());
    EXPECT_TRUE(m[r]->closedByReducer()) << "rank " << r;
  }
  EXPECT_TRUE(waitUntil([&] { return observer_.communicators.load() == 0; }));
  EXPECT_EQ(observer_.communicator_failures.load(), 0u);
  EXPECT_EQ(observer_.totalErrors(), 0u);
}

// Hello's epoch: the ranks must agree on it, and a communicator that forms with one above 0 is
// this reducer joining a running communicator.
TEST_P(Failover, HelloEpochMustMatchAndARejoinIsCounted) {
  startServer();
  auto first = open(memberHello(9, 0, 2, 2));
  ASSERT_TRUE(first);
  ASSERT_TRUE(first->sync(1).isOk());  // its Hello is in before the next one
  auto other = open(memberHello(9, 1, 2, 3));
  ASSERT_TRUE(other);
  Received got;
  ASSERT_TRUE(other->expect(wire::MsgType::kReject, &got).isOk());
  wire::Reason reason;
  ASSERT_TRUE(wire::decodeReject(got.bytes.data(), got.size, &reason).isOk());
  EXPECT_NE(reason.text.find("rank 1 of communicator"), std::string::npos) << reason.text;
  EXPECT_NE(reason.text.find("joins at epoch 3, earlier members at epoch 2"), std::string::npos)
      << reason.text;
  EXPECT_EQ(observer_.errorCount(ServerError::kRejectedHello), 1u);
  EXPECT_EQ(observer_.rejoins.load(), 0u);
  // The right epoch completes it: Ready to both, one rejoin.
  auto second = open(memberHello(9, 1, 2, 2));
  ASSERT_TRUE(second);
  ASSERT_TRUE(first->expect(wire::MsgType::kReady, &got).isOk());
  ASSERT_TRUE(second->expect(wire::MsgType::kReady, &got).isOk());
  EXPECT_EQ(observer_.rejoins.load(), 1u);
  std::vector<std::unique_ptr<RawMember>> m;
  m.push_back(std::move(first));
  m.push_back(std::move(second));
  expectSum(m, 0);
  // A communicator formed at epoch 0 is no rejoin.
  auto fresh = join(10, 2);
  ASSERT_EQ(fresh.size(), 2u);
  EXPECT_EQ(observer_.rejoins.load(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Served, Failover, ::testing::Values(1, 2), servedName);

}  // namespace
}  // namespace tally::reducer::test
