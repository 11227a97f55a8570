// SPDX-License-Identifier: Apache-2.0
// The failover messages (docs/failover.md): round trips, the Error scope, and refusal of
// anything malformed.
#include <gtest/gtest.h>

#include <string>

#include "protocol/wire.h"

namespace tally::protocol::wire {
namespace {

Control sampleControl() {
  Control c;
  c.kind = ControlKind::kDecide;
  c.change = Change::kLost;
  c.epoch = 3;
  c.slot = 17;
  c.commit = AckPoint{0x0102030405060708ull, 2};
  c.next_call = 0x1111222233334444ull;
  c.first_call = 0x1111222200001111ull;
  c.ok = false;
  c.address = "10.0.0.9:2222";
  c.reason = "connection reset by peer";
  return c;
}

TEST(WireFailover, AckCommitPingPongRoundTrip) {
  const AckPoint a{(1ull << 40) + 3, 9};
  AckPoint d;
  Frame f = encodeAck(a);
  MsgType t;
  ASSERT_TRUE(peekType(f.data(), f.size, &t).isOk());
  EXPECT_EQ(t, MsgType::kAck);
  ASSERT_TRUE(decodeAck(f.data(), f.size, &d).isOk());
  EXPECT_EQ(d, a);
  f = encodeCommit(a);
  ASSERT_TRUE(decodeCommit(f.data(), f.size, &d).isOk());
  EXPECT_EQ(d, a);
  // An Ack is not a Commit.
  EXPECT_FALSE(decodeAck(f.data(), f.size, &d).isOk());
  Ping p;
  f = encodePing(Ping{0xfeedull});
  ASSERT_TRUE(decodePing(f.data(), f.size, &p).isOk());
  EXPECT_EQ(p.token, 0xfeedull);
  f = encodePong(Ping{42});
  ASSERT_TRUE(decodePong(f.data(), f.size, &p).isOk());
  EXPECT_EQ(p.token, 42u);
  EXPECT_FALSE(decodePing(f.data(), f.size, &p).isOk());
}

TEST(WireFailover, AckWithReservedBytesIsRefused) {
  Frame f = encodeAck(AckPoint{1, 1});
  f.bytes[kPreambleBytes + 12] = 1;
  AckPoint d{5, 5};
  EXPECT_FALSE(decodeAck(f.data(), f.size, &d).isOk());
  EXPECT_EQ(d, (AckPoint{5, 5}));  // untouched on failure
}

TEST(WireFailover, RelayRoundTrip) {
  Relay m;
  m.from = 5;
  m.control = sampleControl();
  for (size_t i = 0; i < m.seal.size(); ++i) m.seal[i] = static_cast<uint8_t>(0xa0 + i);
  Frame f = encodeRelay(m);
  EXPECT_LE(f.size, kMaxHeaderBytes);
  Relay d;
  ASSERT_TRUE(decodeRelay(f.data(), f.size, &d).isOk());
  EXPECT_EQ(d.from, 5u);
  EXPECT_EQ(d.control, m.control);
  EXPECT_EQ(d.seal, m.seal);  // carried as it is, the last bytes of the message
  EXPECT_EQ(f.bytes[f.size - 1], 0xa0 + kRelaySealBytes - 1);
  // The reducer stamps the sender where kRelayFromOffset says.
  f.bytes[kRelayFromOffset] = 9;
  ASSERT_TRUE(decodeRelay(f.data(), f.size, &d).isOk());
  EXPECT_EQ(d.from, 9u);
  // Every kind and change survives.
  for (ControlKind k : {ControlKind::kSuspect, ControlKind::kPropose, ControlKind::kReport,
                        ControlKind::kDecide}) {
    for (Change c : {Change::kLost, Change::kJoin, Change::kVoid, Change::kFail}) {
      m.control.kind = k;
      m.control.change = c;
      m.control.ok = c == Change::kJoin;
      f = encodeRelay(m);
      ASSERT_TRUE(decodeRelay(f.data(), f.size, &d).isOk());
      EXPECT_EQ(d.control, m.control) << controlKindName(k) << " " << changeName(c);
    }
  }
}

TEST(WireFailover, RelayTextIsCut) {
  Relay m;
  m.control = sampleControl();
  m.control.address = std::string(200, 'a');
  m.control.reason = std::string(300, 'r');
  Frame f = encodeRelay(m);
  Relay d;
  ASSERT_TRUE(decodeRelay(f.data(), f.size, &d).isOk());
  EXPECT_EQ(d.control.address, std::string(kMaxControlAddressBytes, 'a'));
  EXPECT_EQ(d.control.reason, std::string(kMaxControlReasonBytes, 'r'));
}

TEST(WireFailover, RejectsBadRelays) {
  const Frame good = encodeRelay(Relay{0, sampleControl()});
  // Byte offsets inside the body (after the preamble).
  const size_t body = kPreambleBytes;
  auto refused = [&](size_t at, uint8_t value) {
    Frame f = good;
    f.bytes[body + at] = value;
    Relay d;
    return !decodeRelay(f.data(), f.size, &d).isOk();
  };
  EXPECT_TRUE(refused(4, 1));    // reserved after `from`
  EXPECT_TRUE(refused(8, 0));    // kind 0
  EXPECT_TRUE(refused(8, 5));    // kind past Decide
  EXPECT_TRUE(refused(9, 0));    // change 0
  EXPECT_TRUE(refused(9, 5));    // change past Fail
  EXPECT_TRUE(refused(10, 2));   // an unknown flag
  EXPECT_TRUE(refused(23, 1));   // reserved u32
  EXPECT_TRUE(refused(18, 1));   // slot 65553 >= kMaxReducers
  EXPECT_TRUE(refused(52, kMaxControlAddressBytes + 1));
  EXPECT_TRUE(refused(53, kMaxControlReasonBytes + 1));
  EXPECT_TRUE(refused(54, 1));   // reserved u16
  Relay d;
  EXPECT_FALSE(decodeRelay(good.data(), good.size - 1, &d).isOk());
  Frame f = good;
  ASSERT_TRUE(decodeRelay(f.data(), f.size, &d).isOk());
}

TEST(WireFailover, ErrorCarriesItsScope) {
  ErrorScope scope = ErrorScope::kCommunicator;
  Reason r;
  Frame f = encodeError(Reason{"rank 1 (peer 10.0.0.2:4000) was lost"}, ErrorScope::kReducer);
  ASSERT_TRUE(decodeError(f.data(), f.size, &r, &scope).isOk());
  EXPECT_EQ(scope, ErrorScope::kReducer);
  EXPECT_EQ(r.text, "rank 1 (peer 10.0.0.2:4000) was lost");
  f = encodeError(Reason{"ranks disagree"});
  ASSERT_TRUE(decodeError(f.data(), f.size, &r, &scope).isOk());
  EXPECT_EQ(scope, ErrorScope::kCommunicator);
  // A scope past the known ones, and a scope on a Reject or Dismiss, are refused.
  f.bytes[kPreambleBytes + 2] = 2;
  EXPECT_FALSE(decodeError(f.data(), f.size, &r, &scope).isOk());
  f = encodeDismiss(Reason{"lost: connection reset"});
  ASSERT_TRUE(decodeDismiss(f.data(), f.size, &r).isOk());
  EXPECT_EQ(r.text, "lost: connection reset");
  f.bytes[kPreambleBytes + 2] = 1;
  EXPECT_FALSE(decodeDismiss(f.data(), f.size, &r).isOk());
  f = encodeReject(Reason{"no"});
  f.bytes[kPreambleBytes + 2] = 1;
  EXPECT_FALSE(decodeReject(f.data(), f.size, &r).isOk());
}

TEST(WireFailover, SlicesAndResultsCarryAnAckPoint) {
  SliceHeader h;
  h.seq = 9;
  h.slice = 2;
  h.offset = 0;
  h.count = 10;
  h.total_count = 100;
  h.ack = AckPoint{(1ull << 33) + 5, 3};
  SliceHeader d;
  Frame f = encodeSlice(h);
  ASSERT_TRUE(decodeSlice(f.data(), f.size, &d).isOk());
  EXPECT_EQ(d.ack, h.ack);
  f = encodeResult(h);
  ASSERT_TRUE(decodeResult(f.data(), f.size, &d).isOk());
  EXPECT_EQ(d.ack, h.ack);
  // The reserved bytes after it must be zero.
  f.bytes[f.size - 1] = 1;
  EXPECT_FALSE(decodeResult(f.data(), f.size, &d).isOk());
}

TEST(WireFailover, EveryNewTypeHasItsOneSize) {
  const Frame frames[] = {encodeAck({}), encodeCommit({}), encodePing({}), encodePong({}),
                          encodeRelay({}), encodeDismiss({})};
  for (const Frame& f : frames) {
    MsgType t;
    ASSERT_TRUE(peekType(f.data(), f.size, &t).isOk()) << int(f.bytes[6]);
    EXPECT_FALSE(peekType(f.data(), f.size - 1, &t).isOk()) << msgTypeName(t);
    EXPECT_STRNE(msgTypeName(t), "unknown");
  }
  Frame f = encodeAck({});
  f.bytes[6] = 17;  // the first unknown type
  MsgType t;
  EXPECT_FALSE(peekType(f.data(), f.size, &t).isOk());
}

}  // namespace
}  // namespace tally::protocol::wire
