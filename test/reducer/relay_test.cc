// SPDX-License-Identifier: Apache-2.0
// Relays between a communicator's ranks through a real ReducerServer (docs/failover.md): rank
// 0's go to every other rank, the others' to rank 0 alone, each stamped with its sender; a flood
// fails its communicator only; rank 0's decisions are counted once per epoch; and no failover
// message is taken from a connection that has not joined. Over an event loop and over threads.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reducer/server_internal.h"
#include "test/reducer/raw_member.h"

namespace tally::reducer::test {
namespace {

class Relays : public MemberTest {};

wire::Relay relayOf(wire::ControlKind kind, wire::Change change, uint32_t epoch,
                    uint32_t from = 0) {
  wire::Relay r;
  r.from = from;
  r.control.kind = kind;
  r.control.change = change;
  r.control.epoch = epoch;
  r.control.slot = 1;
  r.control.commit = {41, 2};
  r.control.next_call = 43;
  r.control.address = "10.0.0.9:2222";
  r.control.reason = "connection reset";
  return r;
}

// The Relay `m` must get next, as it was sent but stamped with `from`.
void expectRelay(RawMember& m, const wire::Relay& sent, uint32_t from, const char* what) {
  Received got;
  Status st = m.expect(wire::MsgType::kRelay, &got);
  ASSERT_TRUE(st.isOk()) << what << ": " << st.toString();
  wire::Relay relay;
  ASSERT_TRUE(wire::decodeRelay(got.bytes.data(), got.size, &relay).isOk());
  EXPECT_EQ(relay.from, from) << what;
  EXPECT_EQ(relay.control, sent.control) << what;
}

TEST_P(Relays, FromRankZeroToEveryOtherRank) {
  startServer();
  auto m = join(1, 3);
  ASSERT_EQ(m.size(), 3u);
  // What rank 0 writes in `from` does not matter: the reducer writes its rank.
  const wire::Relay propose = relayOf(wire::ControlKind::kPropose, wire::Change::kLost, 1, 7);
  ASSERT_TRUE(m[0]->send(wire::encodeRelay(propose)).isOk());
  ASSERT_TRUE(m[0]->sync(1).isOk());  // handled, and nothing came back before the Pong
  expectRelay(*m[1], propose, 0, "rank 1");
  expectRelay(*m[2], propose, 0, "rank 2");
  for (auto& member : m) EXPECT_TRUE(member->quietFor(100));
  EXPECT_EQ(observer_.totalErrors(), 0u);
}

TEST_P(Relays, FromAnotherRankToRankZeroOnly) {
  startServer();
  auto m = join(2, 3);
  ASSERT_EQ(m.size(), 3u);
  // Rank 2 claims to be rank 0; rank 0 learns who it is.
  const wire::Relay suspect = relayOf(wire::ControlKind::kSuspect, wire::Change::kLost, 0, 0);
  ASSERT_TRUE(m[2]->send(wire::encodeRelay(suspect)).isOk());
  ASSERT_TRUE(m[2]->sync(1).isOk());
  expectRelay(*m[0], suspect, 2, "rank 0");
  EXPECT_TRUE(m[1]->quietFor(100));
  EXPECT_TRUE(m[2]->quietFor(10));
  EXPECT_TRUE(m[0]->quietFor(10));
  // A report from rank 1 likewise.
  const wire::Relay report = relayOf(wire::ControlKind::kReport, wire::Change::kLost, 1);
  ASSERT_TRUE(m[1]->send(wire::encodeRelay(report)).isOk());
  ASSERT_TRUE(m[1]->sync(2).isOk());
  expectRelay(*m[0], report, 1, "rank 0");
  EXPECT_TRUE(m[2]->quietFor(100));
  EXPECT_EQ(observer_.totalErrors(), 0u);
}

// Rank 0 sends each Decide through every reducer, and again when a copy may have been lost:
// each epoch counts once, by its change; older epochs and other ranks' Decides not at all.
TEST_P(Relays, DecideIsCountedOncePerEpoch) {
  startServer();
  auto m = join(3, 2);
  ASSERT_EQ(m.size(), 2u);
  const std::vector<wire::Relay> sent = {
      relayOf(wire::ControlKind::kDecide, wire::Change::kLost, 1),
      relayOf(wire::ControlKind::kDecide, wire::Change::kLost, 1),
      relayOf(wire::ControlKind::kDecide, wire::Change::kJoin, 2),
      relayOf(wire::ControlKind::kDecide, wire::Change::kLost, 1),
      relayOf(wire::ControlKind::kPropose, wire::Change::kJoin, 3),
      relayOf(wire::ControlKind::kDecide, wire::Change::kVoid, 3),
      relayOf(wire::ControlKind::kDecide, wire::Change::kFail, 4),
      relayOf(wire::ControlKind::kDecide, wire::Change::kFail, 4),
  };
  for (const auto& r : sent) {
    ASSERT_TRUE(m[0]->send(wire::encodeRelay(r)).isOk());
    expectRelay(*m[1], r, 0, "rank 1");
  }
  // Rank 1 relaying a Decide (rank 0 gets it) decides nothing.
  const wire::Relay bogus = relayOf(wire::ControlKind::kDecide, wire::Change::kLost, 9);
  ASSERT_TRUE(m[1]->send(wire::encodeRelay(bogus)).isOk());
  expectRelay(*m[0], bogus, 1, "rank 0");
  EXPECT_EQ(observer_.epochCount(EpochChange::kLost), 1u);
  EXPECT_EQ(observer_.epochCount(EpochChange::kJoin), 1u);
  EXPECT_EQ(observer_.epochCount(EpochChange::kVoid), 1u);
  EXPECT_EQ(observer_.epochCount(EpochChange::kFail), 1u);
  EXPECT_EQ(observer_.totalErrors(), 0u);
}

// A communicator joined at epoch 5 has seen the decisions up to 5: only later ones count.
TEST_P(Relays, DecidesUpToTheJoinEpochAreNotCounted) {
  startServer();
  auto m = join(4, 2, 5);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(observer_.rejoins.load(), 1u);
  for (uint32_t epoch : {5u, 6u}) {
    const wire::Relay r = relayOf(wire::ControlKind::kDecide, wire::Change::kLost, epoch);
    ASSERT_TRUE(m[0]->send(wire::encodeRelay(r)).isOk());
    expectRelay(*m[1], r, 0, "rank 1");
  }
  EXPECT_EQ(observer_.epochCount(EpochChange::kLost), 1u);
}

TEST_P(Relays, FloodFailsItsCommunicatorNamingTheRankAndNoOther) {
  startServer();
  auto flooded = join(5, 3);
  ASSERT_EQ(flooded.size(), 3u);
  auto bystander = join(6, 2);
  ASSERT_EQ(bystander.size(), 2u);
  const wire::Relay suspect = relayOf(wire::ControlKind::kSuspect, wire::Change::kLost, 0);
  const wire::Frame frame = wire::encodeRelay(suspect);
  // Well past the burst; the reducer may close the connection before the last ones are written.
  for (uint32_t i = 0; i < 2 * server::kRelayBurst; ++i) {
    if (!flooded[1]->send(frame).isOk()) break;
  }
  // Rank 0 got the burst's worth (and the few the refill let through while the reducer read
  // them), then the Error; rank 2, whom rank 1 cannot reach, the Error alone.
  uint32_t relayed = 0;
  Received got;
  while (flooded[0]->next(&got).isOk() && got.type == wire::MsgType::kRelay) relayed++;
  EXPECT_EQ(got.type, wire::MsgType::kError);
  EXPECT_GE(relayed, server::kRelayBurst);
  EXPECT_LT(relayed, 2 * server::kRelayBurst);
  for (int r : {0, 2}) {
    ErrorSeen e;
    if (r == 0) {
      wire::Reason reason;
      ASSERT_TRUE(wire::decodeError(got.bytes.data(), got.size, &reason, &e.scope).isOk());
      e.reason = reason.text;
    } else {
      e = awaitError(*flooded[r]);
    }
    EXPECT_EQ(e.scope, wire::ErrorScope::kCommunicator) << "rank " << r;
    EXPECT_NE(e.reason.find("rank 1 sent more than 64 failover messages in a burst"),
              std::string::npos)
        << e.reason;
  }
  EXPECT_TRUE(waitUntil([&] { return observer_.errorCount(ServerError::kProtocol) == 1; }));
  // The other communicator on this reducer goes on.
  expectSum(bystander, 0);
  expectSum(bystander, 1);
  EXPECT_EQ(observer_.communicator_failures.load(), 1u);
  EXPECT_EQ(observer_.errorCount(ServerError::kProtocol), 1u);
}

TEST_P(Relays, RelayBeforeTheCommunicatorFormedEndsTheConnection) {
  startServer();
  auto alone = open(memberHello(7, 0, 2));
  ASSERT_TRUE(alone);
  ASSERT_TRUE(
      alone->send(wire::encodeRelay(relayOf(wire::ControlKind::kSuspect, wire::Change::kLost, 0)))
          .isOk());
  const ErrorSeen e = awaitError(*alone);
  EXPECT_NE(e.reason.find("rank 0 sent a Relay before every rank joined"), std::string::npos)
      << e.reason;
  EXPECT_TRUE(alone->closedByReducer());
  EXPECT_TRUE(waitUntil([&] { return observer_.errorCount(ServerError::kProtocol) == 1; }));
}

// Every failover message a worker may send, before its Hello.
std::vector<wire::Frame> failoverMessages() {
  return {wire::encodeRelay(relayOf(wire::ControlKind::kDecide, wire::Change::kLost, 1)),
          wire::encodeAck(wire::AckPoint{1, 0}), wire::encodePing(wire::Ping{1}),
          wire::encodeDismiss(wire::Reason{"go away"})};
}

TEST_P(Relays, NothingBeforeHello) {
  startServer();
  auto job = join(8, 2);
  ASSERT_EQ(job.size(), 2u);
  uint64_t n = 0;
  for (const wire::Frame& f : failoverMessages()) {
    RawMember stranger(server_->address(), streams(), 0x5000 + n);
    ASSERT_TRUE(stranger.valid());
    Received challenge;
    ASSERT_TRUE(stranger.expect(wire::MsgType::kChallenge, &challenge).isOk());
    ASSERT_TRUE(stranger.send(f).isOk());
    // Closed with no answer: no Pong, no Relay, no Commit.
    EXPECT_TRUE(stranger.closedByReducer()) << "message " << n;
    ++n;
    EXPECT_TRUE(waitUntil([&] { return observer_.errorCount(ServerError::kProtocol) == n; }))
        << "message " << n;
  }
  EXPECT_TRUE(job[0]->quietFor(50));
  EXPECT_TRUE(job[1]->quietFor(50));
  expectSum(job, 0);
  EXPECT_EQ(observer_.totalErrors(), n);
  EXPECT_EQ(observer_.communicator_failures.load(), 0u);
}

// With a job token, a failover message in place of the Answer is refused like a Hello without
// one (counted as `auth`: the connection never proved the token).
TEST_P(Relays, NothingBeforeTheJobTokensAnswer) {
  ServerOptions o;
  o.job_token = auth::JobToken("relay-test-token-0123456789abcdef");
  startServer(o);
  uint64_t n = 0;
  for (const wire::Frame& f : failoverMessages()) {
    RawMember stranger(server_->address(), streams(), 0x6000 + n);
    ASSERT_TRUE(stranger.valid());
    Received got;
    ASSERT_TRUE(stranger.expect(wire::MsgType::kChallenge, &got).isOk());
    ASSERT_TRUE(stranger.send(f).isOk());
    ASSERT_TRUE(stranger.expect(wire::MsgType::kReject, &got).isOk()) << "message " << n;
    wire::Reason reason;
    ASSERT_TRUE(wire::decodeReject(got.bytes.data(), got.size, &reason).isOk());
    EXPECT_NE(reason.text.find("authentication failed"), std::string::npos) << reason.text;
    EXPECT_NE(reason.text.find("instead of its proof of the job token"), std::string::npos)
        << reason.text;
    stranger.close();
    ++n;
    EXPECT_TRUE(waitUntil([&] { return observer_.errorCount(ServerError::kAuth) == n; }))
        << "message " << n;
  }
  EXPECT_EQ(observer_.totalErrors(), n);
  EXPECT_EQ(observer_.communicators.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Served, Relays, ::testing::Values(1, 2), servedName);

}  // namespace
}  // namespace tally::reducer::test
