// SPDX-License-Identifier: Apache-2.0
// The protocol steps both kinds of link share (worker_client/link_session.h), on their own: what
// a result must match, where its payload lands, the checksum's verdict, and what each message
// from a reducer does to the books and to the client.
#include "worker_client/link_session.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace tally::worker_client {
namespace {

// The client as a link sees it, recording what the steps tell it.
class RecordingOwner final : public LinkOwner {
 public:
  const CollOptions& options() const override { return options_; }
  int rank() const override { return 3; }
  const std::shared_ptr<Shared>& shared() const override { return shared_; }
  bool closing() const override { return closing_; }
  bool hurrying() const override { return false; }
  bool silentTooLong(int64_t, int64_t) const override { return false; }
  void fail(const Status& st) override { failed.push_back(st); }
  void linkLost(uint32_t slot, const Status& why) override {
    lost_slots.push_back(slot);
    lost.push_back(why);
  }
  void relayed(uint32_t slot, const wire::Relay& relay) override {
    relay_slots.push_back(slot);
    relays.push_back(relay);
  }

  CollOptions options_;
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  bool closing_ = false;
  std::vector<Status> failed;
  std::vector<Status> lost;
  std::vector<uint32_t> lost_slots;
  std::vector<wire::Relay> relays;
  std::vector<uint32_t> relay_slots;
};

constexpr char kReducer[] = "10.0.0.7:5000";
constexpr uint32_t kSlot = 2;

class LinkSessionTest : public ::testing::Test {
 protected:
  // A float32 all-reduce of `count` elements, call number `seq`, in `slices` slices of four.
  std::shared_ptr<Call> call(uint64_t seq, uint32_t slices, uint64_t count = 8) {
    auto c = std::make_shared<Call>();
    c->shared = owner_.shared_;
    c->seq = seq;
    c->count = count;
    c->remaining.store(slices);
    recv_.assign(count, -1.0f);
    c->recv = reinterpret_cast<uint8_t*>(recv_.data());
    owner_.shared_->calls_in_flight.fetch_add(1);
    return c;
  }
  // Slice `slice` of `c`: elements [4 x slice, 4 x slice + 4), recorded as sent.
  LedgerEntry* sent(const std::shared_ptr<Call>& c, uint32_t slice) {
    SliceTask t;
    t.call = c;
    t.slice = slice;
    t.send = t.recv = protocol::Span{4ull * slice, 4};
    return &ledger_.record(std::move(t), false);
  }
  // The result the reducer sends for `e`.
  static wire::SliceHeader resultFor(const LedgerEntry& e) {
    wire::SliceHeader h;
    h.seq = e.task.call->seq;
    h.slice = e.task.slice;
    h.offset = e.task.recv.offset;
    h.count = e.task.recv.count;
    h.total_count = e.task.call->count;
    return h;
  }
  Status accept(const wire::SliceHeader& h, LedgerEntry** entry) {
    const wire::Frame f = wire::encodeResult(h);
    wire::SliceHeader got;
    return acceptResult(&ledger_, kReducer, f.data(), f.size, &got, entry);
  }
  Status message(const wire::Frame& f, bool* fatal) {
    wire::MsgType type;
    Status st = wire::peekType(f.data(), f.size, &type);
    if (!st.isOk()) return st;
    return onLinkMessage(&ledger_, &owner_, kSlot, kReducer, type, f.data(), f.size, fatal);
  }

  RecordingOwner owner_;
  SliceLedger ledger_;
  std::vector<float> recv_;
};

TEST_F(LinkSessionTest, AResultFindsItsRecordAndMatchesTheSliceSent) {
  auto c = call(0, 2);
  LedgerEntry* e = sent(c, 1);
  LedgerEntry* found = nullptr;
  ASSERT_TRUE(accept(resultFor(*e), &found).isOk());
  EXPECT_EQ(found, e);
  EXPECT_TRUE(checkResult(resultFor(*e), *e, true).isOk());
}

TEST_F(LinkSessionTest, AResultThatDoesNotMatchItsSliceIsRefused) {
  auto c = call(0, 2);
  LedgerEntry* e = sent(c, 1);
  struct Case {
    const char* what;
    void (*change)(wire::SliceHeader*);
  };
  const Case cases[] = {
      {"offset", [](wire::SliceHeader* h) { h->offset += 1; }},
      {"count", [](wire::SliceHeader* h) { h->count -= 1; }},
      {"total", [](wire::SliceHeader* h) { h->total_count += 4; }},
      {"type", [](wire::SliceHeader* h) { h->type = DataType::kInt32; }},
      {"op", [](wire::SliceHeader* h) { h->op = ReduceOp::kMax; }},
  };
  for (const Case& k : cases) {
    wire::SliceHeader h = resultFor(*e);
    k.change(&h);
    const Status st = checkResult(h, *e, true);
    EXPECT_EQ(st.code(), StatusCode::kRemote) << k.what;
    EXPECT_NE(st.message().find("does not match the slice sent"), std::string::npos)
        << k.what << ": " << st.message();
  }
}

TEST_F(LinkSessionTest, AResultBeforeItsSliceWasSentIsRefused) {
  auto c = call(0, 1);
  LedgerEntry* e = sent(c, 0);
  const Status st = checkResult(resultFor(*e), *e, false);
  EXPECT_EQ(st.code(), StatusCode::kRemote);
  EXPECT_EQ(st.message(),
            "result for " + wire::describeSlice(resultFor(*e)) + " before the slice was sent");
}

TEST_F(LinkSessionTest, AResultForNoSliceWaitingIsUnexpected) {
  auto c = call(0, 2);
  LedgerEntry* e = sent(c, 0);
  // Never sent here: the other slice of the call.
  wire::SliceHeader other = resultFor(*e);
  other.slice = 1;
  LedgerEntry* found = nullptr;
  Status st = accept(other, &found);
  EXPECT_EQ(st.code(), StatusCode::kRemote);
  EXPECT_NE(st.message().find("unexpected result for call 0 slice 1"), std::string::npos)
      << st.message();
  EXPECT_EQ(found, nullptr);
  // Landed already: a second result for it.
  ledger_.land(e);
  st = accept(resultFor(*e), &found);
  EXPECT_NE(st.message().find("unexpected result for call 0 slice 0"), std::string::npos)
      << st.message();
}

TEST_F(LinkSessionTest, APayloadLandsInTheReceiveBufferScratchOrNowhere) {
  auto c = call(0, 2);
  LedgerEntry* e = sent(c, 1);
  std::vector<uint8_t> scratch;
  EXPECT_EQ(resultDestination(resultFor(*e), *e, &scratch),
            reinterpret_cast<uint8_t*>(recv_.data() + 4));
  EXPECT_TRUE(scratch.empty());
  // Sent again after its call was done: read into scratch, never into the caller's buffer.
  e->task.drop_result = true;
  uint8_t* dst = resultDestination(resultFor(*e), *e, &scratch);
  EXPECT_EQ(dst, scratch.data());
  EXPECT_GE(scratch.size(), 4 * sizeof(float));
  // An empty piece: its header alone.
  wire::SliceHeader empty = resultFor(*e);
  empty.count = 0;
  EXPECT_EQ(resultDestination(empty, *e, &scratch), nullptr);
}

TEST_F(LinkSessionTest, APayloadFrameMustBeThePayloadAndAllOfIt) {
  auto c = call(0, 1);
  const wire::SliceHeader h = resultFor(*sent(c, 0));
  EXPECT_TRUE(checkPayloadFrame(h, wire::kTagPayload, 16).isOk());
  const Status st = checkPayloadFrame(h, wire::kTagPayload, 12);
  EXPECT_EQ(st.code(), StatusCode::kRemote);
  EXPECT_NE(st.message().find("result payload of 12 bytes"), std::string::npos) << st.message();
  EXPECT_FALSE(checkPayloadFrame(h, wire::kTagHeader, 16).isOk());
}

TEST_F(LinkSessionTest, AChecksumMismatchFailsTheCommunicatorSayingWhere) {
  Status why;
  const crc32c::Crc32c* crc = crc32c::shared(&why);
  if (crc == nullptr) GTEST_SKIP() << why.toString();
  auto c = call(0, 1);
  wire::SliceHeader h = resultFor(*sent(c, 0));
  const float payload[4] = {1, 2, 3, 4};
  h.crc = crc->compute(payload, sizeof(payload));
  bool fatal = false;
  EXPECT_TRUE(checkPayload(crc, 3, h, payload, &fatal).isOk());
  EXPECT_FALSE(fatal);
  EXPECT_TRUE(checkPayload(nullptr, 3, h, payload, &fatal).isOk());  // no checksums
  const uint32_t good = h.crc;
  h.crc ^= 1;
  const Status st = checkPayload(crc, 3, h, payload, &fatal);
  EXPECT_TRUE(fatal);
  char sums[64];
  std::snprintf(sums, sizeof(sums), "CRC32C %08x, header says %08x", good, h.crc);
  EXPECT_EQ(st.message(), "checksum mismatch: rank 3 got the result of " + wire::describeSlice(h) +
                              " with payload " + sums + "; corrupted in transit");
}

TEST_F(LinkSessionTest, ACommitCompletesLandedSlicesAndRefusesOthers) {
  auto c0 = call(0, 1);
  auto c1 = call(1, 1);
  LedgerEntry* a = sent(c0, 0);
  sent(c1, 0);
  ledger_.land(a);
  owner_.shared_->posted_through.store(2);
  ASSERT_EQ(dueAck(&ledger_, *owner_.shared_, false), (wire::AckPoint{1, 0}));
  bool fatal = false;
  // Call 0 landed and was acknowledged: its Commit completes it.
  EXPECT_TRUE(message(wire::encodeCommit(wire::AckPoint{1, 0}), &fatal).isOk());
  EXPECT_EQ(c0->remaining.load(), 0u);
  EXPECT_EQ(ledger_.committed(), (wire::AckPoint{1, 0}));
  // Call 1 has not landed here: a Commit of it breaks the protocol, and changes nothing.
  const Status st = message(wire::encodeCommit(wire::AckPoint{2, 0}), &fatal);
  EXPECT_EQ(st.code(), StatusCode::kRemote);
  EXPECT_NE(st.message().find("committed call 1 slice 0 before its result reached this rank"),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(fatal);
  EXPECT_EQ(c1->remaining.load(), 1u);
}

TEST_F(LinkSessionTest, AResultCarriesItsCommitIntoTheBooks) {
  auto c0 = call(0, 1);
  auto c1 = call(1, 1);
  LedgerEntry* a = sent(c0, 0);
  LedgerEntry* b = sent(c1, 0);
  ledger_.land(a);
  owner_.shared_->posted_through.store(2);
  ASSERT_TRUE(dueAck(&ledger_, *owner_.shared_, false).has_value());
  wire::SliceHeader h = resultFor(*b);
  h.ack = wire::AckPoint{1, 0};
  LedgerEntry* found = nullptr;
  ASSERT_TRUE(accept(h, &found).isOk());
  EXPECT_EQ(found, b);
  EXPECT_EQ(c0->remaining.load(), 0u);
}

TEST_F(LinkSessionTest, AnErrorOfCommunicatorScopeIsFatalOneOfReducerScopeIsNot) {
  bool fatal = false;
  Status st = message(
      wire::encodeError(wire::Reason{"ranks disagree on call 4"}, wire::ErrorScope::kCommunicator),
      &fatal);
  EXPECT_EQ(st.code(), StatusCode::kRemote);
  EXPECT_EQ(st.message(), "ranks disagree on call 4");
  EXPECT_TRUE(fatal);
  fatal = false;
  st =
      message(wire::encodeError(wire::Reason{"member 1 lost"}, wire::ErrorScope::kReducer), &fatal);
  EXPECT_EQ(st.message(), "member 1 lost");
  EXPECT_FALSE(fatal);
}

TEST_F(LinkSessionTest, ARelayGoesToTheKeeperAndAPongChangesNothing) {
  wire::Relay relay;
  relay.from = 1;
  relay.control.kind = wire::ControlKind::kSuspect;
  relay.control.slot = 0;
  relay.control.epoch = 3;
  bool fatal = false;
  ASSERT_TRUE(message(wire::encodeRelay(relay), &fatal).isOk());
  ASSERT_EQ(owner_.relays.size(), 1u);
  EXPECT_EQ(owner_.relay_slots[0], kSlot);
  EXPECT_EQ(owner_.relays[0].from, 1u);
  EXPECT_EQ(owner_.relays[0].control, relay.control);
  EXPECT_TRUE(message(wire::encodePong(wire::Ping{9}), &fatal).isOk());
  EXPECT_FALSE(fatal);
  EXPECT_TRUE(owner_.failed.empty());
  EXPECT_TRUE(owner_.lost.empty());
}

TEST_F(LinkSessionTest, AMessageAReducerNeverSendsEndsTheLink) {
  bool fatal = false;
  for (const wire::Frame& f : {wire::encodeAck(wire::AckPoint{1, 0}), wire::encodeBye(),
                               wire::encodePing(wire::Ping{1})}) {
    wire::MsgType type;
    ASSERT_TRUE(wire::peekType(f.data(), f.size, &type).isOk());
    const Status st = message(f, &fatal);
    EXPECT_EQ(st.code(), StatusCode::kRemote);
    EXPECT_EQ(st.message(), std::string("unexpected ") + wire::msgTypeName(type) + " message");
  }
  EXPECT_FALSE(fatal);
}

TEST_F(LinkSessionTest, AFailureIsReportedAsALostReducerOrAFailedCommunicator) {
  reportLinkFailure(&owner_, kSlot, kReducer, Status::remote("connection reset"), false);
  ASSERT_EQ(owner_.lost.size(), 1u);
  EXPECT_EQ(owner_.lost_slots[0], kSlot);
  EXPECT_EQ(owner_.lost[0].code(), StatusCode::kRemote);
  EXPECT_EQ(owner_.lost[0].message(), std::string("reducer ") + kReducer + ": connection reset");
  reportLinkFailure(&owner_, kSlot, kReducer, Status::timeout("no result"), true);
  ASSERT_EQ(owner_.failed.size(), 1u);
  EXPECT_EQ(owner_.failed[0].code(), StatusCode::kTimeout);
  // Closing anyway: nothing is worth reporting.
  owner_.closing_ = true;
  reportLinkFailure(&owner_, kSlot, kReducer, Status::remote("gone"), true);
  reportLinkFailure(&owner_, kSlot, kReducer, Status::remote("gone"), false);
  EXPECT_EQ(owner_.failed.size(), 1u);
  EXPECT_EQ(owner_.lost.size(), 1u);
}

TEST_F(LinkSessionTest, ALinkSaysOneLastThingAtMost) {
  LastMessage last;
  EXPECT_FALSE(last.made());
  const wire::Frame* f = last.make(LastMessage::Kind::kAbort, "rank 3 gives up");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(last.made());
  wire::Reason reason;
  wire::ErrorScope scope = wire::ErrorScope::kReducer;
  ASSERT_TRUE(wire::decodeError(f->data(), f->size, &reason, &scope).isOk());
  EXPECT_EQ(reason.text, "rank 3 gives up");
  EXPECT_EQ(scope, wire::ErrorScope::kCommunicator);
  EXPECT_EQ(last.make(LastMessage::Kind::kDismiss, "too late"), nullptr);

  LastMessage dismiss;
  f = dismiss.make(LastMessage::Kind::kDismiss, "silent for 10 s");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(wire::decodeDismiss(f->data(), f->size, &reason).isOk());
  EXPECT_EQ(reason.text, "silent for 10 s");
}

}  // namespace
}  // namespace tally::worker_client
