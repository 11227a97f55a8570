// SPDX-License-Identifier: Apache-2.0
// Failures must be errors, quickly: mismatched handles, mismatched calls, absent reducers.
#include "test/support/harness.h"

namespace tally::reducer::test {
namespace {

using Clock = std::chrono::steady_clock;

TEST(CollFailureTest, MismatchedHandlesRejected) {
  auto servers = startServers(2);
  auto good = optionsFor(servers);
  auto other = good;
  other.reducers.pop_back();  // rank 1 sees one reducer fewer
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll({good, other, good}, &clients);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(st[r].code(), StatusCode::kInvalidUsage) << st[r].toString();
    EXPECT_NE(st[r].message().find("rank 1 has a different TALLY_REDUCERS"), std::string::npos)
        << st[r].message();
  }
  auto sliced = good;
  sliced.slice_bytes *= 2;
  st = connectAll({good, sliced}, &clients);
  for (auto& s : st) EXPECT_EQ(s.code(), StatusCode::kInvalidUsage) << s.toString();
  // The rest of the slice plan too (hosts whose links got different plans).
  auto fewer = good;
  fewer.slices_per_reducer = kFastSlicesPerReducer;
  st = connectAll({good, fewer}, &clients);
  for (auto& s : st) EXPECT_EQ(s.code(), StatusCode::kInvalidUsage) << s.toString();
  auto larger = good;
  larger.min_slice_bytes = kFastMinSliceBytes;
  st = connectAll({larger, good}, &clients);
  for (auto& s : st) EXPECT_EQ(s.code(), StatusCode::kInvalidUsage) << s.toString();
}

TEST(CollFailureTest, MismatchedCountsFailAllRanks) {
  auto servers = startServers(2);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll(std::vector<CollOptions>(2, optionsFor(servers)), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  std::vector<Status> results(2);
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> v(2000, 1.0f);
      CollRequest req;
      Status s = post(clients[r].get(), v.data(), v.data(), r == 0 ? 1000 : 2000,
                      DataType::kFloat32, ReduceOp::kSum, &req);
      if (s.isOk()) s = waitRequest(&req, nullptr, 10000);
      results[r] = s;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(9));
  // Both calls are one slice, so only the first reducer sees the two disagree. The rank that
  // hears it first gives up and tells the second reducer why, which may reach the other rank
  // before the first reducer's Error does: either way every rank fails naming the disagreement
  // (what each rank sent, when the reason was not cut short).
  int disagree = 0;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].code(), StatusCode::kRemote) << results[r].toString();
    EXPECT_NE(results[r].message().find("reducer 127.0.0.1:"), std::string::npos);
    const std::string& m = results[r].message();
    EXPECT_NE(m.find("disagree"), std::string::npos) << m;
    if (m.find("gave up") == std::string::npos) {
      ++disagree;  // heard from the first reducer itself
      EXPECT_NE(m.find("count 1000 of 1000"), std::string::npos) << m;
      EXPECT_NE(m.find("count 2000 of 2000"), std::string::npos) << m;
    }
  }
  EXPECT_GE(disagree, 1);
  // The error sticks: later calls fail at once.
  std::vector<float> v(10, 1.0f);
  CollRequest req;
  EXPECT_FALSE(clients[0]
                   ->iallreduce(v.data(), v.data(), 10, DataType::kFloat32, ReduceOp::kSum, &req)
                   .isOk());
  for (auto& c : clients) c->close();
}

TEST(CollFailureTest, MismatchedTypeFails) {
  auto servers = startServers(1);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll(std::vector<CollOptions>(2, optionsFor(servers)), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  std::vector<Status> results(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<int32_t> v(100, 1);
      CollRequest req;
      Status s = post(clients[r].get(), v.data(), v.data(), 100,
                      r == 0 ? DataType::kInt32 : DataType::kFloat32, ReduceOp::kSum, &req);
      if (s.isOk()) s = waitRequest(&req, nullptr, 10000);
      results[r] = s;
    });
  }
  for (auto& t : threads) t.join();
  for (auto& s : results) {
    EXPECT_EQ(s.code(), StatusCode::kRemote) << s.toString();
    EXPECT_NE(s.message().find("rank 1 sent"), std::string::npos) << s.message();
  }
}

TEST(CollFailureTest, AbsentReducerFailsWithinTimeout) {
  std::string address;
  {
    auto servers = startServers(1);
    ASSERT_EQ(servers.size(), 1u);
    address = servers[0]->address();
  }  // stopped: nothing listens there now
  CollOptions o;
  o.reducers = {address};
  o.timeouts.connect_ms = 500;
  std::vector<std::unique_ptr<CollClient>> clients;
  const auto start = Clock::now();
  auto st = connectAll({o}, &clients);
  EXPECT_FALSE(st[0].isOk());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(st[0].message().find(address), std::string::npos) << st[0].toString();
}

TEST(CollFailureTest, MissingRankTimesOut) {
  auto servers = startServers(1);
  auto o = optionsFor(servers);
  o.timeouts.connect_ms = 500;
  // Only rank 0 of 2 shows up: no Ready, a timeout.
  std::vector<uint8_t> h0(kCollHandleBytes), h1(kCollHandleBytes);
  ASSERT_TRUE(CollClient::makeHandle(o, h0.data()).isOk());
  ASSERT_TRUE(CollClient::makeHandle(o, h1.data()).isOk());
  const void* handles[2] = {h0.data(), h1.data()};
  std::unique_ptr<CollClient> c;
  const auto start = Clock::now();
  Status st = CollClient::connect(o, handles, 2, 0, &c);
  EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.toString();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(CollFailureTest, LostRankFailsTheOthers) {
  auto servers = startServers(1);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto opts = optionsFor(servers);
  opts.timeouts.io_ms = 2000;
  auto st = connectAll(std::vector<CollOptions>(2, opts), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  // Rank 1 closes (Bye) without joining the call; rank 0's call can then never complete. The
  // reducer knows why: the request fails well within the client's timeout, naming rank 1.
  clients[1]->close();
  std::vector<float> v(100, 1.0f);
  CollRequest req;
  const auto start = Clock::now();
  ASSERT_TRUE(
      post(clients[0].get(), v.data(), v.data(), 100, DataType::kFloat32, ReduceOp::kSum, &req)
          .isOk());
  Status s = waitRequest(&req, nullptr, 15000);
  EXPECT_EQ(s.code(), StatusCode::kRemote) << s.toString();
  EXPECT_NE(s.message().find("rank 1 (peer 127.0.0.1:"), std::string::npos) << s.toString();
  EXPECT_NE(s.message().find("closed its communicator"), std::string::npos) << s.toString();
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(opts.timeouts.io_ms / 2));
  clients[0]->close();
}

// A rank that gives up (here: its own, shorter timeout) tells the reducers why, and the other
// ranks hear that cause, not only that the rank went away.
TEST(CollFailureTest, RankThatGivesUpTellsTheOthersWhy) {
  auto servers = startServers(2);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto impatient = optionsFor(servers);
  impatient.timeouts.io_ms = 1000;
  auto patient = optionsFor(servers);
  patient.timeouts.io_ms = 20000;
  auto st = connectAll({impatient, patient}, &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  // Rank 0 calls alone; rank 1 never joins, so rank 0 times out and gives up.
  std::vector<float> v(1000, 1.0f);
  CollRequest req;
  ASSERT_TRUE(
      post(clients[0].get(), v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum, &req)
          .isOk());
  Status mine = waitRequest(&req, nullptr, 10000);
  ASSERT_EQ(mine.code(), StatusCode::kTimeout) << mine.toString();
  // Rank 1 learns it from the reducers: its call fails with rank 0's cause.
  CollRequest other;
  Status theirs = post(clients[1].get(), v.data(), v.data(), v.size(), DataType::kFloat32,
                       ReduceOp::kSum, &other);
  if (theirs.isOk()) theirs = waitRequest(&other, nullptr, 10000);
  EXPECT_EQ(theirs.code(), StatusCode::kRemote) << theirs.toString();
  EXPECT_NE(theirs.message().find("rank 0 (peer 127.0.0.1:"), std::string::npos)
      << theirs.toString();
  EXPECT_NE(theirs.message().find("gave up"), std::string::npos) << theirs.toString();
  // The cause rank 0 saw, word for word (reducer address and all).
  EXPECT_NE(theirs.message().find(mine.message()), std::string::npos)
      << "rank 1: " << theirs.toString() << "\nrank 0: " << mine.toString();
  for (auto& c : clients) c->close();
}

TEST(CollFailureTest, CountZeroCompletesAtOnce) {
  auto servers = startServers(1);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll({optionsFor(servers)}, &clients);
  ASSERT_TRUE(st[0].isOk()) << st[0].toString();
  CollRequest req;
  ASSERT_TRUE(
      clients[0]->iallreduce(nullptr, nullptr, 0, DataType::kFloat32, ReduceOp::kSum, &req).isOk());
  bool done = false;
  size_t bytes = 9;
  ASSERT_TRUE(req.test(&done, &bytes).isOk());
  EXPECT_TRUE(done);
  EXPECT_EQ(bytes, 0u);
}

}  // namespace
}  // namespace tally::reducer::test
