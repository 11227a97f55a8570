// SPDX-License-Identifier: Apache-2.0
// A link's books (worker_client/ledger.h): what a rank acknowledges, what a Commit completes,
// and the Commits it refuses.
#include "worker_client/ledger.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace tally::worker_client {
namespace {

class LedgerTest : public ::testing::Test {
 protected:
  std::shared_ptr<Call> call(uint64_t seq, uint32_t slices) {
    auto c = std::make_shared<Call>();
    c->shared = shared_;
    c->seq = seq;
    c->remaining.store(slices);
    shared_->calls_in_flight.fetch_add(1);
    return c;
  }
  static SliceTask task(const std::shared_ptr<Call>& c, uint32_t slice, uint32_t epoch = 0) {
    SliceTask t;
    t.call = c;
    t.slice = slice;
    t.epoch = epoch;
    return t;
  }
  // A slice sent over a RawLink, its payload the message numbered last_message.
  LedgerEntry* sent(const std::shared_ptr<Call>& c, uint32_t slice, uint64_t last_message) {
    LedgerEntry* e = &ledger_.record(task(c, slice), false);
    e->last_message = last_message;
    return e;
  }
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  SliceLedger ledger_;
};

TEST_F(LedgerTest, AckFollowsTheFirstCallNotLanded) {
  auto c0 = call(0, 2);
  auto c1 = call(1, 1);
  // Nothing here: everything posted may be acknowledged.
  EXPECT_EQ(ledger_.ackPoint(5, 0), (wire::AckPoint{5, 0}));
  LedgerEntry* a = &ledger_.record(task(c0, 0), false);
  ledger_.enqueue(task(c0, 1));
  ledger_.enqueue(task(c1, 0));
  EXPECT_EQ(ledger_.ackPoint(2, 0).calls, 0u);
  ledger_.land(a);
  EXPECT_EQ(ledger_.ackPoint(2, 0).calls, 0u);  // slice 1 of call 0 is still queued
  LedgerEntry* b = &ledger_.record(ledger_.popQueued(), true);
  ledger_.land(b);
  EXPECT_EQ(ledger_.ackPoint(2, 0).calls, 1u);
  LedgerEntry* d = &ledger_.record(ledger_.popQueued(), true);
  ledger_.land(d);
  EXPECT_EQ(ledger_.ackPoint(2, 0).calls, 2u);
  EXPECT_EQ(ledger_.ackPoint(1, 0).calls, 1u);  // never past what is posted
}

TEST_F(LedgerTest, CommitCompletesCallsAndOnlyLandedOnes) {
  auto c0 = call(0, 2);
  auto c1 = call(1, 1);
  LedgerEntry* a = &ledger_.record(task(c0, 0), false);
  LedgerEntry* b = &ledger_.record(task(c0, 1), false);
  ledger_.record(task(c1, 0), false);
  ledger_.land(a);
  // Call 0's slice 1 has not landed: a Commit covering it is refused, and nothing changes.
  Status st = ledger_.commit({1, 0}, "r:1");
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("before its result"), std::string::npos) << st.message();
  EXPECT_EQ(c0->remaining.load(), 2u);
  EXPECT_EQ(ledger_.recorded(), 3u);
  ledger_.land(b);
  ASSERT_TRUE(ledger_.nextAck(2, 0).has_value());  // a link acknowledges before any Commit
  ASSERT_TRUE(ledger_.commit({1, 0}, "r:1").isOk());
  EXPECT_EQ(c0->remaining.load(), 0u);
  EXPECT_EQ(c1->remaining.load(), 1u);
  EXPECT_EQ(shared_->calls_in_flight.load(), 1);
  EXPECT_EQ(ledger_.recorded(), 1u);
  // A stale Commit (one that raises nothing) changes nothing.
  EXPECT_TRUE(ledger_.commit({0, 0}, "r:1").isOk());
  EXPECT_EQ(ledger_.committed(), (wire::AckPoint{1, 0}));
  EXPECT_EQ(c1->remaining.load(), 1u);
}

TEST_F(LedgerTest, RecoverySlicesHaveTheirOwnAckAndCommit) {
  auto c3 = call(3, 2);
  auto c9 = call(9, 1);
  LedgerEntry* r = &ledger_.record(task(c3, 1, 2), false);  // recovery of epoch 2
  LedgerEntry* n = &ledger_.record(task(c9, 0), false);
  ledger_.land(n);
  // The normal ack passes call 3 (its recovery slice is not normal); recovery stops below 2.
  EXPECT_EQ(ledger_.ackPoint(10, 2), (wire::AckPoint{10, 1}));
  ASSERT_TRUE(ledger_.nextAck(10, 2).has_value());
  ASSERT_TRUE(ledger_.commit({10, 1}, "r:1").isOk());
  EXPECT_EQ(c9->remaining.load(), 0u);
  EXPECT_EQ(c3->remaining.load(), 2u);  // the recovery slice waits for its own commit
  EXPECT_FALSE(ledger_.commit({10, 2}, "r:1").isOk());  // not landed
  ledger_.land(r);
  EXPECT_EQ(ledger_.ackPoint(10, 2), (wire::AckPoint{10, 2}));
  EXPECT_EQ(ledger_.ackPoint(10, 1), (wire::AckPoint{10, 1}));  // at most what was applied
  ASSERT_TRUE(ledger_.nextAck(10, 2).has_value());
  ASSERT_TRUE(ledger_.commit({10, 2}, "r:1").isOk());
  EXPECT_EQ(c3->remaining.load(), 1u);
  EXPECT_TRUE(ledger_.empty());
}

TEST_F(LedgerTest, TakeAllEmptiesTheBooks) {
  auto c0 = call(0, 3);
  LedgerEntry* a = &ledger_.record(task(c0, 0), false);
  a->touched = true;
  ledger_.land(a);
  ledger_.record(task(c0, 1), false);
  ledger_.enqueue(task(c0, 2));
  std::vector<LedgerEntry> all = ledger_.takeAll();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].task.slice, 2u);  // the queued one first
  EXPECT_TRUE(all[1].landed);
  EXPECT_TRUE(all[1].touched);
  EXPECT_FALSE(all[2].landed);
  EXPECT_TRUE(ledger_.empty());
  EXPECT_EQ(ledger_.ackPoint(1, 0).calls, 1u);
  EXPECT_EQ(c0->remaining.load(), 3u);  // taking completes nothing
}

// Zero-copy sends (TALLY_ZEROCOPY): a committed slice whose messages the kernel may still read
// is held, its call not done and the record not free, until the link's queue releases them.
TEST_F(LedgerTest, ACommittedSliceWaitsForItsMessagesToBeReleased) {
  auto c0 = call(0, 2);
  auto c1 = call(1, 1);
  LedgerEntry* a = sent(c0, 0, 2);
  LedgerEntry* b = sent(c0, 1, 4);
  LedgerEntry* d = sent(c1, 0, 6);
  ledger_.release(2);  // slice 0's header and payload are released, the rest not yet
  ledger_.land(a);
  ledger_.land(b);
  ledger_.land(d);
  ASSERT_TRUE(ledger_.nextAck(2, 0).has_value());
  ASSERT_TRUE(ledger_.commit({2, 0}, "r:1").isOk());
  EXPECT_EQ(ledger_.recorded(), 0u);  // all committed ...
  EXPECT_EQ(ledger_.held(), 2u);      // ... slice 1 of call 0 and call 1's wait for the kernel
  EXPECT_EQ(c0->remaining.load(), 1u);
  EXPECT_EQ(c1->remaining.load(), 1u);
  EXPECT_EQ(shared_->calls_in_flight.load(), 2);
  const long holders = c1.use_count();
  ledger_.release(5);  // past call 0's last message, short of call 1's
  EXPECT_EQ(c0->remaining.load(), 0u);
  EXPECT_EQ(c1->remaining.load(), 1u);
  EXPECT_EQ(ledger_.held(), 1u);
  ledger_.release(3);  // a count never goes back
  EXPECT_EQ(ledger_.held(), 1u);
  ledger_.release(6);
  EXPECT_EQ(c1->remaining.load(), 0u);
  EXPECT_EQ(shared_->calls_in_flight.load(), 0);
  EXPECT_EQ(ledger_.held(), 0u);
  EXPECT_EQ(c1.use_count(), holders - 1);  // the ledger let go of the record
}

// An early call is done at landing (call.h), but it is sent from the record's own copy: the
// record stays referenced, so it is not reused, until the kernel lets go of it; it is not
// counted done a second time.
TEST_F(LedgerTest, AnEarlyCallsRecordIsHeldUntilReleased) {
  auto c0 = call(0, 1);
  c0->early = true;
  LedgerEntry* a = sent(c0, 0, 2);
  ledger_.land(a);
  EXPECT_EQ(c0->remaining.load(), 0u);
  ASSERT_TRUE(ledger_.nextAck(1, 0).has_value());
  ASSERT_TRUE(ledger_.commit({1, 0}, "r:1").isOk());
  EXPECT_EQ(ledger_.held(), 1u);
  EXPECT_EQ(c0.use_count(), 2);  // the test's and the ledger's
  ledger_.release(2);
  EXPECT_EQ(c0.use_count(), 1);
  EXPECT_EQ(c0->remaining.load(), 0u);
  EXPECT_EQ(shared_->calls_in_flight.load(), 0);
}

// The connection is gone (reset, its pages let go): every held slice completes.
TEST_F(LedgerTest, ReleaseAllLetsEveryHeldSliceGo) {
  auto c0 = call(0, 1);
  auto c1 = call(1, 1);
  LedgerEntry* a = sent(c0, 0, 2);
  LedgerEntry* b = sent(c1, 0, 4);
  ledger_.land(a);
  ledger_.land(b);
  ASSERT_TRUE(ledger_.nextAck(2, 0).has_value());
  ASSERT_TRUE(ledger_.commit({2, 0}, "r:1").isOk());
  EXPECT_EQ(ledger_.held(), 2u);
  ledger_.releaseAll();
  EXPECT_EQ(ledger_.held(), 0u);
  EXPECT_EQ(c0->remaining.load(), 0u);
  EXPECT_EQ(c1->remaining.load(), 0u);
  EXPECT_EQ(shared_->calls_in_flight.load(), 0);
}

}  // namespace
}  // namespace tally::worker_client
