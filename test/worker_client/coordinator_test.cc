// SPDX-License-Identifier: Apache-2.0
// Rank 0's coordinator (worker_client/coordinator.h): suspicions and join offers, one change
// proposed at a time, every rank's report gathered, and what it decides: Lost, Join, Void, Fail.
#include "worker_client/coordinator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tally::worker_client {
namespace {

using wire::Change;
using wire::ControlKind;

constexpr int kRanks = 3;

// Slot s's reducer: "10.0.0.<s + 1>:2222".
std::vector<std::string> addresses(int slots) {
  std::vector<std::string> out;
  for (int s = 0; s < slots; ++s) out.push_back("10.0.0." + std::to_string(s + 1) + ":2222");
  return out;
}

// A rank's report on proposal `p`: its next call, and the last Commit it got from the reducer.
wire::Control reportOn(const wire::Control& p, uint64_t next_call, wire::AckPoint commit = {}) {
  wire::Control r;
  r.kind = ControlKind::kReport;
  r.change = p.change;
  r.epoch = p.epoch;
  r.slot = p.slot;
  r.commit = commit;
  r.next_call = next_call;
  return r;
}

// A rank's report that it could not join the reducer proposed by `p`.
wire::Control failedJoin(const wire::Control& p, uint64_t next_call, const std::string& why) {
  wire::Control r = reportOn(p, next_call);
  r.ok = false;
  r.reason = why;
  return r;
}

// `p` as decided: what the decision carries besides the proposal is set by the caller.
wire::Control decisionOf(const wire::Control& p) {
  wire::Control d = p;
  d.kind = ControlKind::kDecide;
  return d;
}

// Proposes what waits, then every rank reports in rank order, rank r with next call
// next_call + r; returns the decision, which must come with the last report and not before.
wire::Control decideNext(Coordinator& c, int nranks = kRanks, uint64_t next_call = 100) {
  std::optional<wire::Control> p = c.propose();
  EXPECT_TRUE(p.has_value()) << "nothing to propose";
  if (!p) return {};
  std::optional<wire::Control> d;
  for (int r = 0; r < nranks; ++r) {
    EXPECT_FALSE(d.has_value()) << "decided before rank " << r << " reported";
    bool ignored = true;
    d = c.report(static_cast<uint32_t>(r), reportOn(*p, next_call + r), &ignored);
    EXPECT_FALSE(ignored) << "rank " << r;
  }
  EXPECT_TRUE(d.has_value()) << "no decision after every report";
  return d.value_or(wire::Control{});
}

// Slot `slot` suspected (with `why`) and lost through one epoch.
void lose(Coordinator& c, uint32_t slot, const std::string& why) {
  c.suspect(slot, why);
  const wire::Control d = decideNext(c);
  EXPECT_EQ(d.change, Change::kLost) << "slot " << slot;
  EXPECT_EQ(d.slot, slot);
}

TEST(Coordinator, ALossIsDecidedWithTheReportsCombined) {
  Coordinator c(kRanks, addresses(4), 1);
  EXPECT_TRUE(c.idle());
  EXPECT_FALSE(c.propose().has_value());
  c.suspect(2, "connection reset");
  EXPECT_FALSE(c.idle());
  EXPECT_FALSE(c.roundOpen());

  const std::optional<wire::Control> p = c.propose();
  ASSERT_TRUE(p.has_value());
  wire::Control want;
  want.kind = ControlKind::kPropose;
  want.change = Change::kLost;
  want.epoch = 1;
  want.slot = 2;
  want.address = "10.0.0.3:2222";
  want.reason = "connection reset";
  EXPECT_EQ(*p, want);
  EXPECT_TRUE(c.roundOpen());
  EXPECT_FALSE(c.joinRoundOpen());
  EXPECT_FALSE(c.propose().has_value());  // one change at a time
  EXPECT_EQ(c.missingReports(), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(c.decidedEpoch(), 0u);

  // Out of rank order; P and RC are each the largest reported, K the largest next call and F
  // the smallest.
  bool ignored = true;
  EXPECT_FALSE(c.report(1, reportOn(*p, 7, {5, 0}), &ignored).has_value());
  EXPECT_FALSE(ignored);
  EXPECT_EQ(c.missingReports(), (std::vector<uint32_t>{0, 2}));
  EXPECT_FALSE(c.report(0, reportOn(*p, 9, {4, 1}), &ignored).has_value());
  EXPECT_EQ(c.missingReports(), (std::vector<uint32_t>{2}));
  EXPECT_TRUE(c.live(2));  // nothing changes before the decision
  const std::optional<wire::Control> d = c.report(2, reportOn(*p, 6, {3, 2}), &ignored);
  EXPECT_FALSE(ignored);
  ASSERT_TRUE(d.has_value());
  want = decisionOf(*p);
  want.commit = {5, 2};
  want.next_call = 9;
  want.first_call = 6;
  EXPECT_EQ(*d, want);

  EXPECT_FALSE(c.roundOpen());
  EXPECT_TRUE(c.idle());
  EXPECT_TRUE(c.missingReports().empty());
  EXPECT_EQ(c.decidedEpoch(), 1u);
  EXPECT_FALSE(c.live(2));
  EXPECT_TRUE(c.live(0) && c.live(1) && c.live(3));
  EXPECT_EQ(c.liveCount(), 3u);
  EXPECT_EQ(c.lostText(), "10.0.0.3:2222 (connection reset)");
}

TEST(Coordinator, AJoinIsDecidedWhenEveryRankJoined) {
  Coordinator c(kRanks, addresses(4), 1);
  lose(c, 1, "connection reset");
  c.offerJoin(1, "10.0.0.9:2222");
  EXPECT_FALSE(c.idle());
  const std::optional<wire::Control> p = c.propose();
  ASSERT_TRUE(p.has_value());
  wire::Control want;
  want.kind = ControlKind::kPropose;
  want.change = Change::kJoin;
  want.epoch = 2;
  want.slot = 1;
  want.address = "10.0.0.9:2222";
  EXPECT_EQ(*p, want);
  EXPECT_TRUE(c.joinRoundOpen());

  bool ignored = true;
  EXPECT_FALSE(c.report(2, reportOn(*p, 21), &ignored).has_value());
  EXPECT_FALSE(c.report(0, reportOn(*p, 20), &ignored).has_value());
  const std::optional<wire::Control> d = c.report(1, reportOn(*p, 22), &ignored);
  ASSERT_TRUE(d.has_value());
  want = decisionOf(*p);
  want.next_call = 22;
  want.first_call = 20;
  EXPECT_EQ(*d, want);
  EXPECT_FALSE(c.joinRoundOpen());
  EXPECT_EQ(c.decidedEpoch(), 2u);
  EXPECT_TRUE(c.live(1));
  EXPECT_EQ(c.liveCount(), 4u);
  EXPECT_EQ(c.lostText(), "10.0.0.2:2222 (connection reset)");

  // The slot now holds the reducer that joined: losing it again names that one.
  c.suspect(1, "timed out");
  const std::optional<wire::Control> again = c.propose();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->epoch, 3u);
  EXPECT_EQ(again->address, "10.0.0.9:2222");
}

TEST(Coordinator, AJoinARankCouldNotOpenIsVoidWithThatRanksReason) {
  Coordinator c(kRanks, addresses(4), 1);
  lose(c, 3, "connection reset");
  c.offerJoin(3, "10.0.0.4:2222");
  const std::optional<wire::Control> p = c.propose();
  ASSERT_TRUE(p.has_value());
  // Rank 2 fails first, rank 1 later: the lowest failing rank's reason is the one decided,
  // whatever the order the reports came in.
  bool ignored = true;
  EXPECT_FALSE(c.report(2, failedJoin(*p, 31, "rank 2: connect refused"), &ignored).has_value());
  EXPECT_FALSE(ignored);
  EXPECT_FALSE(c.report(0, reportOn(*p, 30), &ignored).has_value());
  const std::optional<wire::Control> d =
      c.report(1, failedJoin(*p, 33, "rank 1: no Ready within 1000 ms"), &ignored);
  ASSERT_TRUE(d.has_value());
  wire::Control want = decisionOf(*p);
  want.change = Change::kVoid;
  want.reason = "rank 1: no Ready within 1000 ms";
  want.next_call = 33;
  want.first_call = 30;
  EXPECT_EQ(*d, want);
  // The epoch passes with no change.
  EXPECT_EQ(c.decidedEpoch(), 2u);
  EXPECT_FALSE(c.live(3));
  EXPECT_EQ(c.liveCount(), 3u);
  EXPECT_TRUE(c.idle());
  EXPECT_EQ(c.lostText(), "10.0.0.4:2222 (connection reset)");

  // It may be offered again, in the next epoch.
  c.offerJoin(3, "10.0.0.4:2222");
  const wire::Control joined = decideNext(c);
  EXPECT_EQ(joined.change, Change::kJoin);
  EXPECT_EQ(joined.epoch, 3u);
  EXPECT_TRUE(c.live(3));
  EXPECT_EQ(c.liveCount(), 4u);
}

TEST(Coordinator, VoidJoinEndsOnlyAJoinsRound) {
  Coordinator c(kRanks, addresses(3), 1);
  EXPECT_FALSE(c.voidJoin("nothing under way").has_value());

  // A loss's round is not voided.
  c.suspect(0, "connection reset");
  const std::optional<wire::Control> loss = c.propose();
  ASSERT_TRUE(loss.has_value());
  EXPECT_FALSE(c.voidJoin("too late").has_value());
  EXPECT_TRUE(c.roundOpen());
  EXPECT_EQ(c.decidedEpoch(), 0u);
  bool ignored = true;
  for (uint32_t r = 0; r < kRanks; ++r) c.report(r, reportOn(*loss, 10), &ignored);
  EXPECT_FALSE(ignored);
  EXPECT_EQ(c.decidedEpoch(), 1u);

  c.offerJoin(0, "10.0.0.7:2222");
  const std::optional<wire::Control> p = c.propose();
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(c.report(0, reportOn(*p, 40), &ignored).has_value());
  EXPECT_FALSE(c.report(2, reportOn(*p, 44), &ignored).has_value());
  const std::optional<wire::Control> d = c.voidJoin("a rank did not join in time");
  ASSERT_TRUE(d.has_value());
  // K covers the ranks that stopped posting once joined.
  wire::Control want = decisionOf(*p);
  want.change = Change::kVoid;
  want.reason = "a rank did not join in time";
  want.next_call = 44;
  EXPECT_EQ(*d, want);
  EXPECT_EQ(d->epoch, 2u);
  EXPECT_EQ(c.decidedEpoch(), 2u);
  EXPECT_FALSE(c.roundOpen());
  EXPECT_TRUE(c.idle());
  EXPECT_FALSE(c.live(0));
  EXPECT_EQ(c.liveCount(), 2u);
  EXPECT_FALSE(c.voidJoin("twice").has_value());

  // The late rank's report is about a round that is over.
  ignored = false;
  EXPECT_FALSE(c.report(1, reportOn(*p, 41), &ignored).has_value());
  EXPECT_TRUE(ignored);
  EXPECT_EQ(c.decidedEpoch(), 2u);
}

TEST(Coordinator, ASuspicionDuringAJoinsRoundIsProposedOnceTheJoinIsVoided) {
  Coordinator c(kRanks, addresses(4), 1);
  lose(c, 1, "connection reset");
  c.offerJoin(1, "10.0.0.2:2222");
  const std::optional<wire::Control> join = c.propose();
  ASSERT_TRUE(join.has_value());
  ASSERT_EQ(join->epoch, 2u);

  c.suspect(3, "timed out");
  EXPECT_TRUE(c.joinRoundOpen());
  EXPECT_FALSE(c.propose().has_value());  // it waits for the join's round to end
  const std::optional<wire::Control> voided =
      c.voidJoin("reducer 10.0.0.4:2222 was lost meanwhile");
  ASSERT_TRUE(voided.has_value());
  EXPECT_EQ(voided->change, Change::kVoid);
  EXPECT_EQ(voided->epoch, 2u);
  EXPECT_EQ(voided->slot, 1u);

  const wire::Control d = decideNext(c);
  EXPECT_EQ(d.change, Change::kLost);
  EXPECT_EQ(d.epoch, 3u);
  EXPECT_EQ(d.slot, 3u);
  EXPECT_EQ(d.reason, "timed out");
  // The voided join is not proposed again by itself; it is offered again later.
  EXPECT_TRUE(c.idle());
  EXPECT_EQ(c.liveCount(), 2u);
  EXPECT_EQ(c.lostText(), "10.0.0.2:2222 (connection reset), 10.0.0.4:2222 (timed out)");
}

TEST(Coordinator, ASuspicionDuringAJoinsRoundFollowsItWhenTheJoinIsDecided) {
  Coordinator c(kRanks, addresses(4), 1);
  lose(c, 1, "connection reset");
  c.offerJoin(1, "10.0.0.2:2222");
  const std::optional<wire::Control> join = c.propose();
  ASSERT_TRUE(join.has_value());
  c.suspect(0, "connection reset");
  bool ignored = true;
  std::optional<wire::Control> d;
  for (uint32_t r = 0; r < kRanks; ++r) d = c.report(r, reportOn(*join, 50), &ignored);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->change, Change::kJoin);
  EXPECT_EQ(d->epoch, 2u);
  EXPECT_EQ(c.liveCount(), 4u);

  const wire::Control lost = decideNext(c);
  EXPECT_EQ(lost.change, Change::kLost);
  EXPECT_EQ(lost.epoch, 3u);
  EXPECT_EQ(lost.slot, 0u);
  EXPECT_EQ(lost.address, "10.0.0.1:2222");
  EXPECT_EQ(c.liveCount(), 3u);
}

TEST(Coordinator, AJoinOfferedWhileALossWaitsOrIsUnderWayIsDropped) {
  Coordinator c(kRanks, addresses(4), 1);
  lose(c, 2, "connection reset");

  // A loss waits: the offer is dropped.
  c.suspect(0, "timed out");
  c.offerJoin(2, "10.0.0.3:2222");
  std::optional<wire::Control> p = c.propose();
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->change, Change::kLost);
  EXPECT_EQ(p->slot, 0u);
  // The loss is under way: dropped too.
  c.offerJoin(2, "10.0.0.3:2222");
  bool ignored = true;
  for (uint32_t r = 0; r < kRanks; ++r) c.report(r, reportOn(*p, 60), &ignored);
  EXPECT_EQ(c.decidedEpoch(), 2u);
  EXPECT_TRUE(c.idle());
  EXPECT_FALSE(c.propose().has_value());

  // A join that waits is dropped by a suspicion that comes before it is proposed.
  c.offerJoin(2, "10.0.0.3:2222");
  EXPECT_FALSE(c.idle());
  c.suspect(3, "connection reset");
  p = c.propose();
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->change, Change::kLost);
  EXPECT_EQ(p->slot, 3u);
  EXPECT_EQ(p->epoch, 3u);
  for (uint32_t r = 0; r < kRanks; ++r) c.report(r, reportOn(*p, 70), &ignored);
  EXPECT_TRUE(c.idle());
  EXPECT_EQ(c.liveCount(), 1u);
}

TEST(Coordinator, AJoinIsOfferedOnlyForAnEmptySlotAndOneAtATime) {
  Coordinator c(kRanks, addresses(3), 1);
  c.offerJoin(0, "10.0.0.8:2222");  // live
  c.offerJoin(3, "10.0.0.8:2222");  // no such slot
  EXPECT_TRUE(c.idle());
  lose(c, 0, "connection reset");
  lose(c, 1, "connection reset");
  c.offerJoin(1, "10.0.0.8:2222");
  c.offerJoin(0, "10.0.0.9:2222");  // one already waits
  const wire::Control d = decideNext(c);
  EXPECT_EQ(d.change, Change::kJoin);
  EXPECT_EQ(d.slot, 1u);
  EXPECT_EQ(d.address, "10.0.0.8:2222");
  EXPECT_EQ(d.epoch, 3u);
  EXPECT_TRUE(c.idle());
  EXPECT_FALSE(c.live(0));
  EXPECT_TRUE(c.live(1));
}

TEST(Coordinator, SuspicionsThatChangeNothingAreIgnored) {
  Coordinator c(kRanks, addresses(4), 1);
  // Duplicates, while the first waits: one change, with the first reason.
  c.suspect(2, "connection reset");
  c.suspect(2, "connection reset");
  c.suspect(2, "timed out");
  c.suspect(4, "no such slot");
  const std::optional<wire::Control> p = c.propose();
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->slot, 2u);
  EXPECT_EQ(p->reason, "connection reset");
  // The slot being proposed.
  c.suspect(2, "timed out");
  bool ignored = true;
  std::optional<wire::Control> d;
  for (uint32_t r = 0; r < kRanks; ++r) d = c.report(r, reportOn(*p, 80), &ignored);
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(c.idle());
  // The slot now empty.
  c.suspect(2, "connection reset");
  EXPECT_TRUE(c.idle());
  EXPECT_FALSE(c.propose().has_value());

  // A slot being joined is empty too.
  c.offerJoin(2, "10.0.0.3:2222");
  const std::optional<wire::Control> join = c.propose();
  ASSERT_TRUE(join.has_value());
  c.suspect(2, "connection reset");
  for (uint32_t r = 0; r < kRanks; ++r) d = c.report(r, reportOn(*join, 90), &ignored);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->change, Change::kJoin);
  EXPECT_TRUE(c.idle());
  EXPECT_EQ(c.decidedEpoch(), 2u);
  EXPECT_EQ(c.lostText(), "10.0.0.3:2222 (connection reset)");
}

TEST(Coordinator, SuspicionsWaitTheirTurnAndEachDecisionIsTheNextEpoch) {
  Coordinator c(kRanks, addresses(4), 1);
  c.suspect(3, "connection reset");
  c.suspect(0, "timed out");
  const std::optional<wire::Control> first = c.propose();
  ASSERT_TRUE(first.has_value());
  c.suspect(1, "dismissed: rank 2 saw it reset");  // arrives during the first round
  bool ignored = true;
  std::optional<wire::Control> d;
  for (uint32_t r = 0; r < kRanks; ++r) d = c.report(r, reportOn(*first, 10), &ignored);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->epoch, 1u);
  EXPECT_EQ(d->slot, 3u);
  EXPECT_EQ(c.liveCount(), 3u);

  const wire::Control second = decideNext(c);
  EXPECT_EQ(second.epoch, 2u);
  EXPECT_EQ(second.slot, 0u);
  EXPECT_EQ(second.address, "10.0.0.1:2222");
  EXPECT_EQ(c.liveCount(), 2u);

  const wire::Control third = decideNext(c);
  EXPECT_EQ(third.epoch, 3u);
  EXPECT_EQ(third.slot, 1u);
  EXPECT_EQ(third.change, Change::kLost);
  EXPECT_EQ(c.liveCount(), 1u);
  EXPECT_TRUE(c.live(2));
  EXPECT_EQ(c.decidedEpoch(), 3u);
  EXPECT_TRUE(c.idle());
  EXPECT_EQ(c.lostText(),
            "10.0.0.4:2222 (connection reset), 10.0.0.1:2222 (timed out), "
            "10.0.0.2:2222 (dismissed: rank 2 saw it reset)");
}

TEST(Coordinator, ReportsOnAnythingButTheRoundUnderWayAreIgnored) {
  Coordinator c(kRanks, addresses(4), 1);
  bool ignored = false;
  wire::Control stray;
  stray.kind = ControlKind::kReport;
  stray.epoch = 1;
  EXPECT_FALSE(c.report(0, stray, &ignored).has_value());  // no round
  EXPECT_TRUE(ignored);

  c.suspect(1, "connection reset");
  const std::optional<wire::Control> p = c.propose();
  ASSERT_TRUE(p.has_value());
  auto expectIgnored = [&](uint32_t from, const wire::Control& r, const char* what) {
    bool ign = false;
    EXPECT_FALSE(c.report(from, r, &ign).has_value()) << what;
    EXPECT_TRUE(ign) << what;
    EXPECT_EQ(c.missingReports(), (std::vector<uint32_t>{0, 2})) << what;
  };
  EXPECT_FALSE(c.report(1, reportOn(*p, 5, {4, 0}), &ignored).has_value());
  EXPECT_FALSE(ignored);

  expectIgnored(1, reportOn(*p, 900, {800, 0}), "a second report from rank 1");
  wire::Control r = reportOn(*p, 5);
  r.epoch = 0;
  expectIgnored(0, r, "an earlier epoch");
  r.epoch = 2;
  expectIgnored(0, r, "a later epoch");
  r = reportOn(*p, 5);
  r.slot = 2;
  expectIgnored(0, r, "another slot");
  r = reportOn(*p, 5);
  r.change = Change::kJoin;
  expectIgnored(0, r, "another change");
  r = reportOn(*p, 5);
  r.kind = ControlKind::kPropose;
  expectIgnored(0, r, "not a report");
  expectIgnored(kRanks, reportOn(*p, 5), "a rank the communicator does not have");

  EXPECT_FALSE(c.report(2, reportOn(*p, 6, {3, 0}), &ignored).has_value());
  const std::optional<wire::Control> d = c.report(0, reportOn(*p, 7, {2, 0}), &ignored);
  ASSERT_TRUE(d.has_value());
  // Rank 1's second report counted for nothing.
  EXPECT_EQ(d->commit, (wire::AckPoint{4, 0}));
  EXPECT_EQ(d->next_call, 7u);
  EXPECT_EQ(d->first_call, 5u);
  EXPECT_EQ(d->epoch, 1u);

  // Copies after the decision are about a round that is over.
  EXPECT_FALSE(c.report(0, reportOn(*p, 7), &ignored).has_value());
  EXPECT_TRUE(ignored);
}

TEST(Coordinator, LosingBelowMinReducersFailsTheCommunicator) {
  Coordinator c(kRanks, addresses(3), 2);
  lose(c, 0, "connection reset");
  EXPECT_EQ(c.liveCount(), 2u);

  c.suspect(2, "timed out");
  const wire::Control d = decideNext(c, kRanks, 100);
  wire::Control want;
  want.kind = ControlKind::kDecide;
  want.change = Change::kFail;
  want.epoch = 2;
  want.slot = 2;
  want.address = "10.0.0.3:2222";
  want.reason = "1 of 3 reducers left, fewer than TALLY_MIN_REDUCERS=2";
  want.next_call = 102;
  want.first_call = 100;
  EXPECT_EQ(d, want);
  EXPECT_EQ(c.decidedEpoch(), 2u);
  EXPECT_FALSE(c.live(2));
  EXPECT_EQ(c.liveCount(), 1u);
  EXPECT_EQ(c.lostText(), "10.0.0.1:2222 (connection reset), 10.0.0.3:2222 (timed out)");
}

TEST(Coordinator, LosingTheLastReducerFailsEvenWithMinReducersZero) {
  for (int min_reducers : {1, 0}) {
    SCOPED_TRACE("min_reducers " + std::to_string(min_reducers));
    Coordinator c(kRanks, addresses(2), min_reducers);
    lose(c, 1, "connection reset");
    EXPECT_EQ(c.liveCount(), 1u);
    c.suspect(0, "connection reset");
    const wire::Control d = decideNext(c);
    EXPECT_EQ(d.change, Change::kFail);
    EXPECT_EQ(d.epoch, 2u);
    EXPECT_EQ(d.slot, 0u);
    EXPECT_EQ(d.reason, "0 of 2 reducers left, fewer than TALLY_MIN_REDUCERS=" +
                            std::to_string(min_reducers));
    EXPECT_EQ(c.liveCount(), 0u);
  }
}

TEST(Coordinator, EachKindOfDecisionIsOneEpoch) {
  Coordinator c(kRanks, addresses(3), 1);
  // Lost, Void (a rank could not join), Join, Void (called off), Lost.
  lose(c, 1, "connection reset");
  EXPECT_EQ(c.decidedEpoch(), 1u);
  EXPECT_EQ(c.liveCount(), 2u);

  c.offerJoin(1, "10.0.0.2:2222");
  std::optional<wire::Control> p = c.propose();
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->epoch, 2u);
  bool ignored = true;
  std::optional<wire::Control> d;
  for (uint32_t r = 0; r < kRanks; ++r) {
    d = c.report(r, r == 0 ? failedJoin(*p, 10, "refused") : reportOn(*p, 10), &ignored);
  }
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->change, Change::kVoid);
  EXPECT_EQ(c.decidedEpoch(), 2u);
  EXPECT_EQ(c.liveCount(), 2u);

  c.offerJoin(1, "10.0.0.2:2222");
  EXPECT_EQ(decideNext(c).change, Change::kJoin);
  EXPECT_EQ(c.decidedEpoch(), 3u);
  EXPECT_EQ(c.liveCount(), 3u);

  lose(c, 2, "timed out");
  EXPECT_EQ(c.decidedEpoch(), 4u);
  c.offerJoin(2, "10.0.0.3:2222");
  p = c.propose();
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->epoch, 5u);
  d = c.voidJoin("a rank did not join in time");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->epoch, 5u);
  EXPECT_EQ(c.decidedEpoch(), 5u);
  EXPECT_EQ(c.liveCount(), 2u);

  lose(c, 0, "connection reset");
  EXPECT_EQ(c.decidedEpoch(), 6u);
  EXPECT_EQ(c.liveCount(), 1u);
  EXPECT_TRUE(c.live(1));
  EXPECT_EQ(c.lostText(),
            "10.0.0.2:2222 (connection reset), 10.0.0.3:2222 (timed out), "
            "10.0.0.1:2222 (connection reset)");
}

}  // namespace
}  // namespace tally::worker_client
