// SPDX-License-Identifier: Apache-2.0
// Wire-level attacks on the worker's failover (docs/failover.md), through a reducer the test plays
// (test/support/fake_reducer.h) next to real in-process ones. Each misbehaviour must cost the
// communicator nothing but the fake: every call still completes with the exact sum (small
// integers, summed again here), and no call fails.
//
//   - A reducer that breaks the protocol (a result for a slice it was not sent, a Commit ahead of
//     its results, bytes that are no header) is dropped, by every rank, with a WARN naming it.
//   - Forged failover messages (a decision or a proposal for an epoch that is not the next one,
//     or stamped with a rank other than 0) and replayed ones (a copy of an epoch already decided)
//     are ignored: the fake stays in use, keeps summing, and later real failovers count their
//     epochs from where they were.
//   - A connection that has not proven the job token gets no failover message in (Relay, Ack,
//     Dismiss, Ping are refused and the connection closed) while a communicator of real ranks
//     on that reducer goes on.
//
// Over raw TCP links with their progress thread and over the threaded links.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "test/support/fake_reducer.h"
#include "test/support/harness.h"
#include "test/support/raw_streams.h"
#include "test/support/warnings.h"

namespace tally::reducer::test {
namespace {

using Clock = std::chrono::steady_clock;

// The WARN lines so far that contain every one of `parts`.
std::vector<std::string> warningsWith(const std::vector<std::string>& parts) {
  return ::tally::test::WarningLog::with(parts);
}

bool waitUntil(const std::function<bool()>& done, int64_t ms = 5000) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// One round's calls: odd sizes, one of many slices among single-slice ones; every third an
// int32 sum, the others float32.
const std::vector<size_t> kCounts = {1, 7, 8191, 100003, 3, 65537, 33333, 5, 20011};

DataType typeOf(size_t k) { return k % 3 == 2 ? DataType::kInt32 : DataType::kFloat32; }

// Rank r's element i of call k of round `round`: small integers, whose float sums are exact in
// any order.
int32_t inputOf(int r, int round, size_t k, size_t i) {
  if (typeOf(k) == DataType::kInt32) {
    return static_cast<int32_t>((i * 31 + k * 7 + round * 11 + r * 1009) % 100003) - 50000;
  }
  return static_cast<int32_t>((i * 7 + k * 3 + round * 5 + r * 13) % 97);
}

// Every call of a round, posted before any is waited for, then each checked element by element
// against the sum of every rank's inputs, computed here. Out of place, as NCCL's host-memory
// calls are: an in-place call cannot be summed again once a lost reducer's result overwrote
// its input (docs/failover.md, "In-place calls").
// `before` (when set) runs before the first post, `posted` once every call is posted, before
// the first wait.
Status runRound(CollClient* c, int nranks, int round, const std::function<void()>& before = nullptr,
                const std::function<void()>& posted = nullptr) {
  if (before) before();
  const int r = c->rank();
  std::vector<std::vector<uint8_t>> ins(kCounts.size()), bufs(kCounts.size());
  std::vector<CollRequest> reqs(kCounts.size());
  for (size_t k = 0; k < kCounts.size(); ++k) {
    ins[k].resize(kCounts[k] * 4);
    bufs[k].assign(kCounts[k] * 4, 0xee);
    for (size_t i = 0; i < kCounts[k]; ++i) {
      const int32_t v = inputOf(r, round, k, i);
      if (typeOf(k) == DataType::kInt32) {
        std::memcpy(ins[k].data() + i * 4, &v, 4);
      } else {
        const float f = static_cast<float>(v);
        std::memcpy(ins[k].data() + i * 4, &f, 4);
      }
    }
    TALLY_RETURN_IF_ERROR(
        post(c, ins[k].data(), bufs[k].data(), kCounts[k], typeOf(k), ReduceOp::kSum, &reqs[k]));
  }
  if (posted) posted();
  for (size_t k = 0; k < kCounts.size(); ++k) {
    size_t bytes = 0;
    TALLY_RETURN_IF_ERROR(waitRequest(&reqs[k], &bytes, 15000));
    if (bytes != kCounts[k] * 4) return Status::internal("test: wrong byte count");
    for (size_t i = 0; i < kCounts[k]; ++i) {
      int64_t want = 0;
      for (int q = 0; q < nranks; ++q) want += inputOf(q, round, k, i);
      bool ok;
      std::string got;
      if (typeOf(k) == DataType::kInt32) {
        int32_t v;
        std::memcpy(&v, bufs[k].data() + i * 4, 4);
        ok = v == want;
        got = std::to_string(v);
      } else {
        float v;
        std::memcpy(&v, bufs[k].data() + i * 4, 4);
        ok = v == static_cast<float>(want);
        got = std::to_string(v);
      }
      if (!ok) {
        return Status::internal("test: round " + std::to_string(round) + " call " +
                                std::to_string(k) + " element " + std::to_string(i) + ": " + got +
                                " != " + std::to_string(want));
      }
    }
  }
  return Status::ok();
}

// A stranger at a reducer with a job token: it takes the Challenge (which must ask for the
// token) and sends `message` instead of its proof. Ok when the reducer answers with a Reject at
// most and then closes the connection.
Status refusedBeforeTheToken(const std::string& address, const wire::Frame& message, uint64_t id) {
  std::vector<Fd> fds = connectStreams(address, 1, id);
  if (fds.empty()) return Status::internal("test: no connection");
  const int fd = fds[0].get();
  std::array<uint8_t, wire::kMaxHeaderBytes> buf{};
  size_t got = 0;
  wire::Challenge challenge;
  TALLY_RETURN_IF_ERROR(recvMsg(fd, &buf, &got));
  TALLY_RETURN_IF_ERROR(wire::decodeChallenge(buf.data(), got, &challenge));
  if (!challenge.auth_required) return Status::internal("test: the Challenge asks for no token");
  TALLY_RETURN_IF_ERROR(sendMsg(fd, message));
  // A wait that runs out is no close.
  auto closed = [](const Status& st) { return !st.isOk() && st.code() != StatusCode::kTimeout; };
  Status next = recvMsg(fd, &buf, &got);
  if (closed(next)) return Status::ok();  // closed at once
  TALLY_RETURN_IF_ERROR(next);
  wire::MsgType type;
  TALLY_RETURN_IF_ERROR(wire::peekType(buf.data(), got, &type));
  if (type != wire::MsgType::kReject) {
    return Status::internal(std::string("test: answered with ") + wire::msgTypeName(type));
  }
  // Then nothing but the end of the connection (within the reducer's linger and the wait).
  next = recvMsg(fd, &buf, &got);
  if (next.isOk()) return Status::internal("test: a message after the Reject");
  if (!closed(next)) return Status::internal("test: not closed: " + next.toString());
  return Status::ok();
}

class WireAttack : public ::testing::TestWithParam<CollProgress> {
 protected:
  void SetUp() override { ::tally::test::WarningLog::start(); }
  void TearDown() override {
    for (auto& c : clients_) {
      if (c) c->abort(Status::internal("test over"));
    }
    clients_.clear();
    if (fake_) fake_->stop();
    servers_.clear();
    ::tally::test::WarningLog::stop();
  }

  // `real` in-process reducers and the fake after them (the last slot), `nranks` ranks joined.
  void form(int real, int nranks, const FakeScript& script) {
    nranks_ = nranks;
    servers_ = startServers(real);
    ASSERT_EQ(servers_.size(), static_cast<size_t>(real));
    Status st = FakeReducer::start(nranks, script, &fake_);
    ASSERT_TRUE(st.isOk()) << st.toString();
    CollOptions o = optionsFor(servers_, 32 * 1024);
    o.reducers.push_back(fake_->address());
    o.progress = GetParam();
    o.reducer_timeout_ms = 2000;
    o.rejoin_interval_ms = 0;  // a lost reducer stays lost: each test counts its own epochs
    const auto statuses = connectAll(std::vector<CollOptions>(nranks, o), &clients_);
    for (const Status& s : statuses) ASSERT_TRUE(s.isOk()) << s.toString();
  }

  // Rounds [from, to) on every rank, each exact.
  void rounds(int from, int to) {
    for (int round = from; round < to; ++round) {
      const std::string err =
          onEveryRank(nranks_, [&](int r) { return runRound(clients_[r].get(), nranks_, round); });
      ASSERT_EQ(err, "") << "round " << round;
    }
  }

  // Rounds [from, to), with real reducer `index` stopped in the first once rank 0 posted all of
  // its calls and before any other rank posts: rank 0's slices there wait for the others'
  // inputs when it goes, and are summed again on the survivors.
  void roundsLosing(size_t index, int from, int to) {
    std::atomic<bool> stopped{false};
    const std::string err = onEveryRank(nranks_, [&](int r) {
      auto waitForTheStop = [&] {
        while (r != 0 && !stopped.load()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      };
      auto stopIt = [&] {
        if (r != 0) return;
        servers_[index]->stop();
        stopped.store(true);
      };
      Status st = runRound(clients_[r].get(), nranks_, from, waitForTheStop, stopIt);
      if (r == 0) stopped.store(true);  // also when rank 0 failed before it stopped the reducer
      return st;
    });
    ASSERT_EQ(err, "") << "round " << from;
    rounds(from + 1, to);
  }

  // Every rank dropped the reducer at `address` in epoch `epoch` (the one WARN line each rank
  // writes), for a reason that contains one of `why` (none: any reason).
  void expectLostOnce(const std::string& address, uint32_t epoch,
                      const std::vector<std::string>& why = {}) {
    const std::string reducer = "reducer " + address + " (slot";
    EXPECT_TRUE(waitUntil([&] {
      return warningsWith({reducer, ") lost: "}).size() >= static_cast<size_t>(nranks_);
    }));
    const std::vector<std::string> lines = warningsWith({reducer, ") lost: "});
    EXPECT_EQ(lines.size(), static_cast<size_t>(nranks_));
    for (const std::string& l : lines) {
      EXPECT_NE(l.find("(epoch " + std::to_string(epoch) + ";"), std::string::npos) << l;
      bool named = why.empty();
      for (const std::string& w : why) named = named || l.find(w) != std::string::npos;
      EXPECT_TRUE(named) << l;
    }
  }

  // `count` in-process reducers that require the job token `secret`.
  void startTokenServers(int count, const std::string& secret) {
    for (int i = 0; i < count; ++i) {
      ServerOptions so;
      so.listen = "127.0.0.1:0";
      so.threads = 2;
      so.job_token = auth::JobToken(secret);
      std::unique_ptr<ReducerServer> s;
      Status st = ReducerServer::start(so, &s);
      ASSERT_TRUE(st.isOk()) << st.toString();
      servers_.push_back(std::move(s));
    }
  }

  // Two in-process reducers that require the job token `secret` and the fake after them, an
  // insider that proves it too (it can do everything a reducer can, but make a rank's seal);
  // three ranks joined with the token.
  void formWithInsider(const std::string& secret) {
    ASSERT_NO_FATAL_FAILURE(startTokenServers(2, secret));
    nranks_ = 3;
    FakeScript script;
    script.job_token = secret;
    Status st = FakeReducer::start(nranks_, script, &fake_);
    ASSERT_TRUE(st.isOk()) << st.toString();
    CollOptions o = optionsFor(servers_, 32 * 1024);
    o.reducers.push_back(fake_->address());
    o.progress = GetParam();
    o.job_token = secret;
    o.reducer_timeout_ms = 2000;
    o.rejoin_interval_ms = 0;
    const auto statuses = connectAll(std::vector<CollOptions>(nranks_, o), &clients_);
    for (const Status& c : statuses) ASSERT_TRUE(c.isOk()) << c.toString();
  }

  void expectNeverLost(const std::string& address) {
    EXPECT_TRUE(warningsWith({"reducer " + address + " (slot", ") lost: "}).empty());
  }

  void expectNoFailure() {
    // A rank's own WARN lines are its refusals of failover messages, or it gave up.
    for (const std::string& w : warningsWith({"CollNet rank"})) {
      EXPECT_NE(w.find(": ignoring a"), std::string::npos) << w;
    }
    EXPECT_TRUE(warningsWith({"communicator", "failed"}).empty());
    EXPECT_EQ(fake_->trouble(), "");
  }

  // Partial delivery to one rank under a pipeline like NCCL's, calls of `count(call)` elements
  // (defined with the tests that use it).
  void partialDeliveryUnderAPipeline(const std::function<size_t(uint64_t)>& count);

  int nranks_ = 0;
  std::vector<std::unique_ptr<ReducerServer>> servers_;
  std::unique_ptr<FakeReducer> fake_;
  std::vector<std::unique_ptr<CollClient>> clients_;
};

// A reducer that claims another reducer's slice (to rank 1 only): rank 1 drops it, rank 0
// proposes its loss, and every rank goes on over the real reducer with the fake's slices summed
// again.
TEST_P(WireAttack, ResultForASliceNotSentDropsThatReducer) {
  FakeScript script;
  script.act = Misbehaviour::kStrayResult;
  script.target = 1;
  form(1, 3, script);
  rounds(0, 4);
  EXPECT_TRUE(fake_->acted());
  expectLostOnce(fake_->address(), 1, {"unexpected result for call"});
  EXPECT_TRUE(waitUntil([&] { return fake_->ranksGone() == nranks_; }));
  expectNeverLost(servers_[0]->address());
  expectNoFailure();
}

// A Commit covering a call whose result it has not sent yet, to every rank.
TEST_P(WireAttack, CommitAheadOfItsResultsDropsThatReducer) {
  FakeScript script;
  script.act = Misbehaviour::kEarlyCommit;
  form(1, 2, script);
  rounds(0, 4);
  EXPECT_TRUE(fake_->acted());
  // The slice not landed here, or (what a reducer's Commit can never pass) this rank's own Ack.
  expectLostOnce(fake_->address(), 1, {"committed call", "Commit("});
  expectNeverLost(servers_[0]->address());
  expectNoFailure();
}

// Bytes that are no header, to rank 2 in place of its result.
TEST_P(WireAttack, GarbageInPlaceOfAHeaderDropsThatReducer) {
  FakeScript script;
  script.act = Misbehaviour::kGarbage;
  script.target = 2;
  form(1, 3, script);
  rounds(0, 4);
  EXPECT_TRUE(fake_->acted());
  expectLostOnce(fake_->address(), 1, {"bad magic"});
  expectNeverLost(servers_[0]->address());
  expectNoFailure();
}

// Forged decisions and proposals, to every rank: each is refused (a WARN on every rank), the
// fake stays in use, and a real loss afterwards is epoch 1, summed exactly.
TEST_P(WireAttack, ForgedFailoverMessagesAreIgnored) {
  FakeScript script;
  script.act = Misbehaviour::kForgeControl;
  form(2, 3, script);
  rounds(0, 2);
  ASSERT_TRUE(fake_->acted());
  EXPECT_EQ(fake_->sentAsAct().size(), FakeReducer::forgedRelays(0).size());
  rounds(2, 4);
  for (int r = 0; r < nranks_; ++r) {
    EXPECT_FALSE(warningsWith({"CollNet rank " + std::to_string(r) + ": ignoring a"}).empty())
        << "rank " << r << " said nothing of the forged messages";
  }
  expectNeverLost(fake_->address());
  expectNeverLost(servers_[0]->address());
  expectNeverLost(servers_[1]->address());
  // Still in use: it received and summed slices after the forgery.
  const uint64_t summed = fake_->slicesSummedAfterAct();
  EXPECT_GT(summed, 0u);
  EXPECT_GT(fake_->copiesAfterAct(), 0u);
  EXPECT_EQ(fake_->ranksGone(), 0);
  // A real loss: the first epoch, whatever the forgeries said.
  const std::string lost = servers_[1]->address();
  roundsLosing(1, 4, 7);
  expectLostOnce(lost, 1);
  expectNeverLost(fake_->address());
  EXPECT_GT(fake_->slicesSummedAfterAct(), summed);
  EXPECT_EQ(fake_->ranksGone(), 0);
  expectNoFailure();
}

// Once epoch 1 (a real loss) was decided through the fake too, the fake sends every rank a copy
// of each failover message it relayed: all are ignored, the fake stays in use, and the next real
// loss is epoch 2, after which the fake alone sums everything exactly.
TEST_P(WireAttack, ReplayedFailoverMessagesAreIgnored) {
  FakeScript script;
  script.act = Misbehaviour::kReplayControl;
  script.after_slices = 3;
  form(2, 3, script);
  const std::string first = servers_[1]->address();
  roundsLosing(1, 0, 2);
  for (int round = 2; round < 8 && !fake_->acted(); ++round) rounds(round, round + 1);
  ASSERT_TRUE(fake_->acted());
  expectLostOnce(first, 1);
  // What it replayed: rank 0's proposal and decision of epoch 1 among them.
  bool propose = false, decide = false;
  for (const wire::Relay& r : fake_->sentAsAct()) {
    if (r.from != 0 || r.control.epoch != 1) continue;
    propose = propose || r.control.kind == wire::ControlKind::kPropose;
    decide = decide || r.control.kind == wire::ControlKind::kDecide;
  }
  EXPECT_TRUE(propose && decide) << fake_->sentAsAct().size() << " relays replayed";
  rounds(8, 10);
  expectNeverLost(fake_->address());
  const uint64_t summed = fake_->slicesSummedAfterAct();
  EXPECT_GT(summed, 0u);
  EXPECT_EQ(fake_->ranksGone(), 0);
  // The second real loss is epoch 2; the fake is the last reducer.
  const std::string second = servers_[0]->address();
  roundsLosing(0, 10, 12);
  expectLostOnce(second, 2);
  expectNeverLost(fake_->address());
  EXPECT_GT(fake_->slicesSummedAfterAct(), summed);
  expectNoFailure();
}

// Two worker bugs these attacks found, each as its smallest test (both fixed).
//
// A Commit past every call this rank acknowledged (to rank 1, between calls, when all it sent
// the fake is committed): a reducer's Commit is the least of every rank's Ack, so it can never
// pass this rank's own, and it covers slices not even posted yet. It must be refused like any
// Commit ahead of its results (the fake dropped, the communicator going on). Taken instead, it
// is this rank's Report at the next loss, so every rank counts the fake's unlanded slices
// committed and the communicator fails ("call N slice M was committed by the lost reducer but
// never reached this rank").
TEST_P(WireAttack, CommitPastThisRanksOwnAckDropsThatReducer) {
  FakeScript script;  // correct, but for the Commit injected below
  form(1, 2, script);
  rounds(0, 1);
  ASSERT_TRUE(fake_->inject(1, wire::encodeCommit(wire::AckPoint{1000000, 0})));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // read before the next post
  rounds(1, 2);
  expectLostOnce(fake_->address(), 1);
  expectNeverLost(servers_[0]->address());
  expectNoFailure();
}

// A Propose stamped as rank 0's, relayed to rank 0 alone. Rank 0 makes its own proposals and
// takes them itself, and a reducer relays rank 0's messages to the other ranks only, so one
// that reaches rank 0 is forged; rank 0 must ignore it. Taken instead, rank 0 freezes and drops
// the real reducer it names; the other ranks then see that reducer go and suspect it, rank 0
// proposes the same epoch, takes its own proposal for a copy of the forged one and never
// reports on it, and the communicator fails ("no report on epoch 1 from rank 0").
TEST_P(WireAttack, ProposeRelayedToRankZeroAsItsOwnIsIgnored) {
  FakeScript script;
  form(1, 2, script);
  rounds(0, 1);
  wire::Relay forged = FakeReducer::forgedRelays(0)[2];  // rank 0's Propose, Lost slot 0
  forged.control.epoch = 1;                              // the next epoch
  ASSERT_TRUE(fake_->inject(0, wire::encodeRelay(forged)));
  rounds(1, 3);
  expectNeverLost(servers_[0]->address());
  expectNeverLost(fake_->address());
  expectNoFailure();
}

// Partial delivery, the hard case: a reducer sends a slice's results to every rank and dies
// before its Commit. Each test posts one call per rank with one slice on the fake (2 slots: the
// real reducer, then the fake; call k's only slice goes to slot k % 2), in place.
//
// A small call (kEarlyDoneBytes) is done when its result lands, before any Commit; the caller may
// reuse its buffer at once (here: a sentinel). The fake's loss then has the slice summed again
// on the real reducer from the rank's copy of its input, for the others' sake, and the result
// that comes back is dropped: the buffer keeps the sentinel. Later calls are exact.
TEST_P(WireAttack, SmallCallDoneAtLandingSurvivesItsReducersLossUntouched) {
  FakeScript script;
  script.act = Misbehaviour::kCrashBeforeCommit;
  script.after_slices = 0;  // the first slice the fake sums
  form(1, 2, script);
  constexpr size_t kCount = 1000;  // 4 KB: one slice, early
  const std::string err = onEveryRank(2, [&](int r) -> Status {
    std::vector<float> buf(kCount);
    for (uint64_t call = 0; call < 4; ++call) {
      for (size_t i = 0; i < kCount; ++i) buf[i] = static_cast<float>((i + call * 3 + r * 7) % 50);
      CollRequest req;
      TALLY_RETURN_IF_ERROR(post(clients_[r].get(), buf.data(), buf.data(), kCount,
                                 DataType::kFloat32, ReduceOp::kSum, &req));
      TALLY_RETURN_IF_ERROR(waitRequest(&req, nullptr, 15000));
      for (size_t i = 0; i < kCount; ++i) {
        const float want = static_cast<float>((i + call * 3) % 50 + (i + call * 3 + 7) % 50);
        if (buf[i] != want) {
          return Status::internal("test: call " + std::to_string(call) + " element " +
                                  std::to_string(i) + ": " + std::to_string(buf[i]));
        }
      }
      if (call != 1) continue;
      // Call 1 went to the fake, which is now gone: its slice is summed again elsewhere once
      // every rank hears of it. The buffer is the caller's again meanwhile.
      std::fill(buf.begin(), buf.end(), -1.0f);
      if (!waitUntil([&] { return warningsWith({fake_->address(), ") lost: "}).size() >= 2; })) {
        return Status::internal("test: the fake's loss was never decided");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      for (size_t i = 0; i < kCount; ++i) {
        if (buf[i] != -1.0f) {
          return Status::internal("test: a result came back into a buffer given back, element " +
                                  std::to_string(i));
        }
      }
    }
    return Status::ok();
  });
  EXPECT_EQ(err, "");
  EXPECT_TRUE(fake_->acted());
  expectLostOnce(fake_->address(), 1);
  expectNoFailure();
}

// Partial delivery to one rank only, under a pipeline like NCCL's (at most 8 calls in flight,
// completed oldest first, the next posted only when one completes): the fake sums call 1's only
// slice, sends the result to rank 0 alone and dies. Rank 0 is done with call 1 (a small call is
// done at landing) and its caller moves on, posting further; rank 1 never gets it and its caller
// waits for call 1 before it posts more. Rank 1 must still get call 1 summed again, and every
// rank must reach the boundary of the change: every call of both ranks completes, exact.
// `count(call)` is each call's size; calls 0 and 1 are small, with one slice each.
void WireAttack::partialDeliveryUnderAPipeline(const std::function<size_t(uint64_t)>& count) {
  FakeScript script;
  script.act = Misbehaviour::kCrashBeforeCommit;
  script.after_slices = 0;  // call 1's slice, the first the fake sums
  script.target = 0;
  form(1, 2, script);
  constexpr uint64_t kCalls = 40;
  constexpr size_t kDepth = 8;
  auto input = [](uint64_t call, int r, size_t i) {
    return static_cast<float>((i + call * 3 + static_cast<size_t>(r) * 7) % 50);
  };
  const std::string err = onEveryRank(2, [&](int r) -> Status {
    std::vector<std::vector<float>> in(kCalls), out(kCalls);
    std::deque<std::pair<uint64_t, CollRequest>> inflight;
    uint64_t next = 0;
    while (next < kCalls || !inflight.empty()) {
      while (next < kCalls && inflight.size() < kDepth) {
        in[next].resize(count(next));
        out[next].assign(count(next), -1.0f);
        for (size_t i = 0; i < in[next].size(); ++i) in[next][i] = input(next, r, i);
        CollRequest req;
        TALLY_RETURN_IF_ERROR(post(clients_[r].get(), in[next].data(), out[next].data(),
                                   in[next].size(), DataType::kFloat32, ReduceOp::kSum, &req));
        inflight.emplace_back(next++, std::move(req));
      }
      const uint64_t call = inflight.front().first;
      Status st = waitRequest(&inflight.front().second, nullptr, 10000);
      if (!st.isOk()) {
        return Status(st.code(), "call " + std::to_string(call) + ": " + st.message());
      }
      inflight.pop_front();
      for (size_t i = 0; i < out[call].size(); ++i) {
        const float want = input(call, 0, i) + input(call, 1, i);
        if (out[call][i] != want) {
          return Status::internal("test: call " + std::to_string(call) + " element " +
                                  std::to_string(i) + ": " + std::to_string(out[call][i]) +
                                  " != " + std::to_string(want));
        }
      }
    }
    return Status::ok();
  });
  EXPECT_EQ(err, "");
  EXPECT_TRUE(fake_->acted());
  expectLostOnce(fake_->address(), 1);
  expectNoFailure();
}

TEST_P(WireAttack, SmallCallDeliveredToOneRankOnlyHoldsNoPipelineUp) {
  // 4 KB calls: one slice each, on slot call % 2.
  partialDeliveryUnderAPipeline([](uint64_t) { return size_t{1000}; });
}

// The same with large calls after the small ones: rank 0's calls past rank 1's reach fill its
// window on the real reducer with slices that wait for rank 1, and call 1's slice, sent again at
// once on the decision, must still pass them (the credit past the window, wire::kPromptSlices).
TEST_P(WireAttack, SmallCallDeliveredToOneRankOnlyPassesAFullWindow) {
  // From call 2 on, 800 KB: 25 slices of 32 KB, more than the window of 8 on each slot.
  partialDeliveryUnderAPipeline(
      [](uint64_t call) { return call < 2 ? size_t{1000} : size_t{200000}; });
}

// A large call is done only once committed: the fake's results landed, but its loss has the
// slice summed again on the real reducer, and the call completes then, exact.
TEST_P(WireAttack, LargeCallWaitsForItsCommitAndIsSummedAgain) {
  FakeScript script;
  script.act = Misbehaviour::kCrashBeforeCommit;
  script.after_slices = 0;
  form(1, 2, script);
  constexpr size_t kCount = 300000;  // 1.2 MB: several slices on each slot, not early
  const std::string err = onEveryRank(2, [&](int r) -> Status {
    std::vector<float> in(kCount), out(kCount);
    for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<float>((i + r * 5) % 61);
    CollRequest req;
    TALLY_RETURN_IF_ERROR(post(clients_[r].get(), in.data(), out.data(), kCount,
                               DataType::kFloat32, ReduceOp::kSum, &req));
    TALLY_RETURN_IF_ERROR(waitRequest(&req, nullptr, 15000));
    for (size_t i = 0; i < kCount; ++i) {
      const float want = static_cast<float>(i % 61 + (i + 5) % 61);
      if (out[i] != want) {
        return Status::internal("test: element " + std::to_string(i) + ": " +
                                std::to_string(out[i]));
      }
    }
    return Status::ok();
  });
  EXPECT_EQ(err, "");
  EXPECT_TRUE(fake_->acted());
  expectLostOnce(fake_->address(), 1);
  expectNoFailure();
}

// The same in place: the result that landed overwrote the input, which cannot be sent again;
// the communicator fails with an error that says so (never a wrong sum).
TEST_P(WireAttack, LargeInPlaceCallOverwrittenByALostResultFailsSayingWhy) {
  FakeScript script;
  script.act = Misbehaviour::kCrashBeforeCommit;
  script.after_slices = 0;
  form(1, 2, script);
  constexpr size_t kCount = 300000;
  std::vector<Status> got(2);
  const std::string err = onEveryRank(2, [&](int r) -> Status {
    std::vector<float> buf(kCount);
    for (size_t i = 0; i < kCount; ++i) buf[i] = static_cast<float>((i + r * 5) % 61);
    CollRequest req;
    TALLY_RETURN_IF_ERROR(post(clients_[r].get(), buf.data(), buf.data(), kCount,
                               DataType::kFloat32, ReduceOp::kSum, &req));
    got[r] = waitRequest(&req, nullptr, 15000);
    return Status::ok();
  });
  EXPECT_EQ(err, "");
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(got[r].isOk()) << "rank " << r;
    // One rank's own reason, or the other's as the reducers passed it on.
    EXPECT_NE(got[r].message().find("in-place call"), std::string::npos) << got[r].toString();
    EXPECT_NE(got[r].message().find("overwritten this rank's input"), std::string::npos)
        << got[r].toString();
  }
}

// Strangers on a reducer with a job token: each opens a connection, takes the Challenge and
// sends a failover message (Relay, Ack, Dismiss, Ping) instead of proving the token. Each is
// refused and its connection closed, while two real ranks with the token go on summing over
// that reducer and another, neither of which is lost.
TEST_P(WireAttack, FailoverMessagesBeforeTheTokensAnswerAreRefused) {
  const std::string secret(64, 'k');
  ASSERT_NO_FATAL_FAILURE(startTokenServers(2, secret));
  nranks_ = 2;
  CollOptions o = optionsFor(servers_, 32 * 1024);
  o.progress = GetParam();
  o.job_token = secret;
  o.reducer_timeout_ms = 2000;
  o.rejoin_interval_ms = 0;
  const auto statuses = connectAll(std::vector<CollOptions>(nranks_, o), &clients_);
  for (const Status& s : statuses) ASSERT_TRUE(s.isOk()) << s.toString();
  rounds(0, 1);

  wire::Relay forged;
  forged.control.kind = wire::ControlKind::kDecide;
  forged.control.change = wire::Change::kLost;
  forged.control.epoch = 1;
  forged.control.slot = 1;
  forged.control.next_call = 0;
  const std::vector<wire::Frame> messages = {
      wire::encodeRelay(forged), wire::encodeAck(wire::AckPoint{1000, 5}),
      wire::encodeDismiss(wire::Reason{"a stranger says go"}), wire::encodePing(wire::Ping{9})};
  // All at once: a refused connection lingers (up to 2 s) for its Reject to be read.
  std::vector<Status> refusals(messages.size() * servers_.size());
  std::vector<std::thread> strangers;
  for (size_t k = 0; k < refusals.size(); ++k) {
    strangers.emplace_back([&, k] {
      refusals[k] = refusedBeforeTheToken(servers_[k % servers_.size()]->address(),
                                          messages[k / servers_.size()], 0x7000 + k);
    });
  }
  rounds(1, 4);
  for (auto& t : strangers) t.join();
  for (size_t k = 0; k < refusals.size(); ++k) {
    EXPECT_TRUE(refusals[k].isOk()) << "message " << k / servers_.size() << " to reducer "
                                    << k % servers_.size() << ": " << refusals[k].toString();
  }
  rounds(4, 5);
  expectNeverLost(servers_[0]->address());
  expectNeverLost(servers_[1]->address());
  EXPECT_TRUE(warningsWith({"CollNet rank"}).empty());
  EXPECT_TRUE(warningsWith({"communicator", "failed"}).empty());
}

// An insider: a reducer of the job, holding its token, forges rank 0's proposal and decision of
// the next epoch (the loss of a real reducer) and sends them to every rank. The epoch and sender
// are right, so only the seal can tell (worker_client/relay_seal.h): no rank takes them, every
// rank drops the forger as epoch 1, and the calls go on exact over the real reducers, neither of
// which is lost. Taken, the forged Decide would drop real reducer 0 on every rank.
TEST_P(WireAttack, InsiderCannotForgeRankZerosMessages) {
  ASSERT_NO_FATAL_FAILURE(formWithInsider(std::string(64, 'q')));
  rounds(0, 1);
  std::vector<wire::Relay> forged(2, FakeReducer::forgedRelays(0)[2]);  // rank 0's, Lost slot 0
  forged[0].control.epoch = 1;
  forged[0].control.reason = "forged";
  forged[1].control.kind = wire::ControlKind::kDecide;
  forged[1].control.epoch = 1;
  forged[1].control.next_call = 0;
  // The first reaches rank 0; after it a rank may have dropped the forger already (itself, or
  // through the agreement), which closes its connection, so the rest go where they still can.
  ASSERT_TRUE(fake_->inject(0, wire::encodeRelay(forged[0])));
  for (int r = 0; r < nranks_; ++r) {
    for (const wire::Relay& f : forged) (void)fake_->inject(r, wire::encodeRelay(f));
  }
  rounds(1, 4);
  expectLostOnce(fake_->address(), 1, {"does not carry that rank's seal"});
  expectNeverLost(servers_[0]->address());
  expectNeverLost(servers_[1]->address());
  EXPECT_TRUE(warningsWith({"communicator", "failed"}).empty());
}

// An insider (the job token, no rank's key) replays a genuine sealed relay by the thousand:
// each copy opens, so only the count can tell. Every rank drops it once it has relayed more than
// the ranks can have sent since the last decision, queued nothing beyond that, and the calls go
// on exact over the real reducers. Before, every copy cost an HMAC and a queue entry and the
// insider was never dropped.
TEST_P(WireAttack, InsiderFloodOfReplayedRelaysDropsIt) {
  ASSERT_NO_FATAL_FAILURE(formWithInsider(std::string(64, 'r')));
  // Real reducer 1 lost: epoch 1's messages pass through the fake, sealed by their ranks.
  roundsLosing(1, 0, 2);
  expectLostOnce(servers_[1]->address(), 1);
  std::vector<wire::Relay> genuine;
  for (const wire::Relay& r : fake_->relayed()) {
    if (r.from == 0 && r.control.kind == wire::ControlKind::kDecide) genuine.push_back(r);
  }
  ASSERT_FALSE(genuine.empty()) << "no decision of rank 0's went through the fake";
  const wire::Frame copy = wire::encodeRelay(genuine.front());
  for (int r = 0; r < nranks_; ++r) (void)fake_->inject(r, copy, 20000);
  rounds(2, 5);
  expectLostOnce(fake_->address(), 2, {"failover messages since epoch 1 was decided"});
  expectNeverLost(servers_[0]->address());
  EXPECT_TRUE(warningsWith({"communicator", "failed"}).empty());
}

// A Suspect that never reaches rank 0 (the only reducer left to carry it swallows every relay):
// the rank that sent it fails its communicator three decision bounds later, saying so, rather
// than waiting for ever on the slices in the dropped reducer's books. Before, nothing bounded
// that wait.
TEST_P(WireAttack, ASuspectRankZeroNeverHearsFailsWithinABound) {
  nranks_ = 2;
  FakeScript swallow;
  swallow.relays = false;
  std::unique_ptr<FakeReducer> mute;
  ASSERT_TRUE(FakeReducer::start(nranks_, swallow, &mute).isOk());
  FakeScript garbage;
  garbage.act = Misbehaviour::kGarbage;
  garbage.target = 1;
  garbage.after_slices = 2;
  ASSERT_TRUE(FakeReducer::start(nranks_, garbage, &fake_).isOk());
  CollOptions o = optionsFor({}, 32 * 1024);
  o.reducers = {mute->address(), fake_->address()};
  o.progress = GetParam();
  o.reducer_timeout_ms = 1000;  // the decision bound: 1 s; the Suspect's: 3 s
  o.rejoin_interval_ms = 0;
  o.timeouts.io_ms = 60000;  // no stuck-rank timeout within the test
  const auto statuses = connectAll(std::vector<CollOptions>(nranks_, o), &clients_);
  for (const Status& s : statuses) ASSERT_TRUE(s.isOk()) << s.toString();
  // Both ranks call until rank 1's calls fail: the fake's garbage makes it drop that reducer,
  // and its Suspect goes nowhere. Rank 0 knows nothing of it; it stops with rank 1.
  const auto start = Clock::now();
  std::atomic<bool> over{false};
  Status failed;
  (void)onEveryRank(nranks_, [&](int r) {
    for (int call = 0; call < 64 && !over.load(); ++call) {
      std::vector<int32_t> in(20000, r + 1), out(20000, 0);
      CollRequest req;
      Status st = post(clients_[r].get(), in.data(), out.data(), in.size(), DataType::kInt32,
                       ReduceOp::kSum, &req);
      const auto deadline = Clock::now() + std::chrono::seconds(15);
      for (bool done = false; st.isOk() && !done && !over.load();) {
        st = req.test(&done, nullptr);
        if (Clock::now() > deadline) st = Status::timeout("test: request hung");
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      if (r == 1 && !st.isOk()) {
        failed = st;
        over.store(true);
      }
    }
    if (r == 1) over.store(true);
    return Status::ok();
  });
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  EXPECT_TRUE(fake_->acted());
  ASSERT_FALSE(failed.isOk()) << "rank 1's calls went on";
  EXPECT_NE(failed.message().find("no proposal from rank 0 within 3000 ms"), std::string::npos)
      << failed.toString();
  EXPECT_LT(took.count(), 10000) << failed.toString();
  mute->stop();
}

INSTANTIATE_TEST_SUITE_P(Links, WireAttack,
                         ::testing::Values(CollProgress::kThread, CollProgress::kLegacy),
                         [](const ::testing::TestParamInfo<CollProgress>& p) {
                           return std::string(p.param == CollProgress::kThread ? "raw"
                                                                               : "threaded");
                         });

}  // namespace
}  // namespace tally::reducer::test
