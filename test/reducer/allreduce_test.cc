// SPDX-License-Identifier: Apache-2.0
// End to end: in-process reducers, 2-4 ranks in threads, results against a reference computed
// here (integer-valued inputs, so float sums are exact whatever the order).
#include <cstring>
#include <tuple>

#include "test/support/harness.h"

namespace tally::reducer::test {
namespace {

float floatInput(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + rank * 13) % 101) - 50);
}
int32_t intInput(int rank, size_t i) {
  return static_cast<int32_t>((i * 31 + rank * 17) % 1000) - 500;
}

struct Case {
  DataType type;
  ReduceOp op;
  size_t count;
};

std::vector<uint8_t> makeInput(const Case& c, int rank) {
  std::vector<uint8_t> buf(c.count * 4);
  for (size_t i = 0; i < c.count; ++i) {
    if (c.type == DataType::kFloat32) {
      float v = floatInput(rank, i);
      std::memcpy(&buf[i * 4], &v, 4);
    } else {
      int32_t v = intInput(rank, i);
      std::memcpy(&buf[i * 4], &v, 4);
    }
  }
  return buf;
}

std::vector<uint8_t> reference(const Case& c, int nranks) {
  std::vector<uint8_t> buf(c.count * 4);
  for (size_t i = 0; i < c.count; ++i) {
    if (c.type == DataType::kFloat32) {
      float acc = floatInput(0, i);
      for (int r = 1; r < nranks; ++r) acc += floatInput(r, i);
      std::memcpy(&buf[i * 4], &acc, 4);
    } else {
      int32_t acc = intInput(0, i);
      for (int r = 1; r < nranks; ++r) {
        acc = c.op == ReduceOp::kMax ? std::max(acc, intInput(r, i)) : acc + intInput(r, i);
      }
      std::memcpy(&buf[i * 4], &acc, 4);
    }
  }
  return buf;
}

class AllreduceTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(AllreduceTest, MatchesReferenceAndIsIdenticalAcrossRanks) {
  const auto [nranks, nreducers] = GetParam();
  auto servers = startServers(nreducers);
  ASSERT_EQ(static_cast<int>(servers.size()), nreducers);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll(std::vector<CollOptions>(nranks, optionsFor(servers)), &clients);
  for (int r = 0; r < nranks; ++r) ASSERT_TRUE(st[r].isOk()) << st[r].toString();

  std::vector<Case> cases;
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4097}, size_t{300000}}) {
    cases.push_back({DataType::kFloat32, ReduceOp::kSum, count});
    cases.push_back({DataType::kInt32, ReduceOp::kSum, count});
    cases.push_back({DataType::kInt32, ReduceOp::kMax, count});
  }
  // results[rank][case]
  std::vector<std::vector<std::vector<uint8_t>>> results(nranks);
  std::vector<std::string> errors(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      for (size_t k = 0; k < cases.size(); ++k) {
        const Case& c = cases[k];
        std::vector<uint8_t> send = makeInput(c, r);
        std::vector<uint8_t> recv(send.size() + 1, 0xee);  // +1: a canary past the end
        CollRequest req;
        Status s = post(clients[r].get(), send.data(), recv.data(), c.count, c.type, c.op, &req);
        size_t bytes = 123;
        if (s.isOk()) s = waitRequest(&req, &bytes);
        if (!s.isOk()) {
          errors[r] = s.toString();
          return;
        }
        if (bytes != c.count * 4) errors[r] = "bytes " + std::to_string(bytes);
        if (recv.back() != 0xee) errors[r] = "wrote past the end";
        recv.pop_back();
        results[r].push_back(std::move(recv));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  for (size_t k = 0; k < cases.size(); ++k) {
    const auto want = reference(cases[k], nranks);
    for (int r = 0; r < nranks; ++r) {
      EXPECT_TRUE(results[r][k] == want)
          << "rank " << r << " case " << k << " count " << cases[k].count;
      EXPECT_EQ(std::memcmp(results[r][k].data(), results[0][k].data(), want.size()), 0);
    }
  }
  for (auto& c : clients) c->close();
}

INSTANTIATE_TEST_SUITE_P(RanksByReducers, AllreduceTest,
                         ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Values(1, 3)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& p) {
                           return std::to_string(std::get<0>(p.param)) + "ranks_" +
                                  std::to_string(std::get<1>(p.param)) + "reducers";
                         });

// 32 calls in flight per rank, in place (send == recv), then back-to-back calls.
TEST(AllreduceManyInFlight, InPlaceAndBackToBack) {
  constexpr int kRanks = 3;
  constexpr int kCalls = 32;
  auto servers = startServers(2);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto opts = optionsFor(servers, 16 * 1024);
  opts.window = 4;  // small window: exercises credit flow control
  auto st = connectAll(std::vector<CollOptions>(kRanks, opts), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::vector<std::vector<float>> bufs(kCalls);
      std::vector<CollRequest> reqs(kCalls);
      for (int k = 0; k < kCalls; ++k) {
        const size_t count = 1000 + 997 * k;
        bufs[k].resize(count);
        for (size_t i = 0; i < count; ++i)
          bufs[k][i] = static_cast<float>((r + 1) * (k + 1) + i % 5);
        Status s = post(clients[r].get(), bufs[k].data(), bufs[k].data(), count, DataType::kFloat32,
                        ReduceOp::kSum, &reqs[k]);
        if (!s.isOk()) {
          errors[r] = s.toString();
          return;
        }
      }
      for (int k = 0; k < kCalls; ++k) {
        Status s = waitRequest(&reqs[k], nullptr);
        if (!s.isOk()) {
          errors[r] = s.toString();
          return;
        }
        for (size_t i = 0; i < bufs[k].size(); ++i) {
          float want = 0;
          for (int q = 0; q < kRanks; ++q) want += static_cast<float>((q + 1) * (k + 1) + i % 5);
          if (bufs[k][i] != want) {
            errors[r] = "call " + std::to_string(k) + " wrong";
            return;
          }
        }
      }
      // Back to back: post, wait, repeat.
      std::vector<int32_t> v(5000);
      for (int k = 0; k < 50; ++k) {
        for (size_t i = 0; i < v.size(); ++i) v[i] = r + k;
        CollRequest req;
        Status s = post(clients[r].get(), v.data(), v.data(), v.size(), DataType::kInt32,
                        ReduceOp::kSum, &req);
        if (s.isOk()) s = waitRequest(&req, nullptr);
        if (!s.isOk()) {
          errors[r] = s.toString();
          return;
        }
        if (v[4999] != 0 + 1 + 2 + 3 * k) {
          errors[r] = "back-to-back wrong";
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  for (auto& c : clients) c->close();
}

// Two communicators (two jobs) on the same reducers at once.
TEST(AllreduceTwoComms, ShareReducers) {
  auto servers = startServers(2);
  auto opts = optionsFor(servers);
  std::vector<std::unique_ptr<CollClient>> a, b;
  std::vector<Status> sa, sb;
  std::thread ta([&] { sa = connectAll(std::vector<CollOptions>(2, opts), &a); });
  std::thread tb([&] { sb = connectAll(std::vector<CollOptions>(3, opts), &b); });
  ta.join();
  tb.join();
  for (auto& s : sa) ASSERT_TRUE(s.isOk()) << s.toString();
  for (auto& s : sb) ASSERT_TRUE(s.isOk()) << s.toString();
  std::vector<std::string> errors(5);
  std::vector<std::thread> threads;
  auto run = [&](CollClient* c, int slot, int value, int32_t want) {
    std::vector<int32_t> v(100000);
    for (int k = 0; k < 10; ++k) {
      std::fill(v.begin(), v.end(), value);
      CollRequest req;
      Status s = post(c, v.data(), v.data(), v.size(), DataType::kInt32, ReduceOp::kSum, &req);
      if (s.isOk()) s = waitRequest(&req, nullptr);
      if (!s.isOk()) {
        errors[slot] = s.toString();
        return;
      }
      if (v[0] != want || v[99999] != want) {
        errors[slot] = "wrong: " + std::to_string(v[0]);
        return;
      }
    }
  };
  for (int r = 0; r < 2; ++r) threads.emplace_back(run, a[r].get(), r, 1, 2);
  for (int r = 0; r < 3; ++r) threads.emplace_back(run, b[r].get(), 2 + r, 10, 30);
  for (auto& t : threads) t.join();
  for (auto& e : errors) EXPECT_EQ(e, "");
  for (auto& c : a) c->close();
  for (auto& c : b) c->close();
}

}  // namespace
}  // namespace tally::reducer::test
