// SPDX-License-Identifier: Apache-2.0
// Small calls, the latency path: a slice is written by the iallreduce caller when its link is
// idle and by the link's progress thread (or sender) otherwise, and a result by the thread that
// completed the slice when the connection has nothing queued and by its loop (or writer)
// otherwise. Windows of 1 on both sides make every call mix
// the two ways, so these tests check that order, credits and results survive the mix, and that
// the client's reused call records never mix two calls.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "test/support/harness.h"

namespace tally::reducer::test {
namespace {

// Runs `rounds` rounds of `calls` single-slice calls per rank, all posted before any is waited
// for; each call's values depend on rank, round and call, so a result landing in the wrong
// call, or a slice sent out of order, shows up as a wrong sum.
void runSmallCalls(int ranks, int reducers, int server_window, int client_window, int calls,
                   int rounds) {
  auto servers = startServers(reducers, 2, server_window);
  ASSERT_EQ(static_cast<int>(servers.size()), reducers);
  auto opts = optionsFor(servers);
  opts.window = client_window;
  opts.max_requests = calls;
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll(std::vector<CollOptions>(ranks, opts), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  std::vector<std::string> errors(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      constexpr size_t kCount = 1024;  // 4 KiB of float32: one slice
      std::vector<std::vector<float>> send(calls, std::vector<float>(kCount));
      std::vector<std::vector<float>> recv(calls, std::vector<float>(kCount));
      for (int round = 0; round < rounds; ++round) {
        std::vector<CollRequest> reqs(calls);
        for (int k = 0; k < calls; ++k) {
          for (size_t i = 0; i < kCount; ++i) {
            send[k][i] = static_cast<float>((r + 1) * 1000 + round * 100 + k + i % 7);
          }
          Status s = post(clients[r].get(), send[k].data(), recv[k].data(), kCount,
                          DataType::kFloat32, ReduceOp::kSum, &reqs[k]);
          if (!s.isOk()) {
            errors[r] = "post: " + s.toString();
            return;
          }
        }
        for (int k = 0; k < calls; ++k) {
          size_t bytes = 0;
          Status s = waitRequest(&reqs[k], &bytes);
          if (!s.isOk()) {
            errors[r] = "wait: " + s.toString();
            return;
          }
          if (bytes != kCount * sizeof(float)) {
            errors[r] = "call " + std::to_string(k) + " reported " + std::to_string(bytes);
            return;
          }
          for (size_t i = 0; i < kCount; ++i) {
            float want = 0;
            for (int q = 0; q < ranks; ++q) {
              want += static_cast<float>((q + 1) * 1000 + round * 100 + k + i % 7);
            }
            if (recv[k][i] != want) {
              errors[r] = "round " + std::to_string(round) + " call " + std::to_string(k) +
                          " element " + std::to_string(i) + ": " + std::to_string(recv[k][i]) +
                          " != " + std::to_string(want);
              return;
            }
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  for (auto& c : clients) c->close();
}

TEST(SmallCalls, WindowOfOneOnBothSidesKeepsOrderAndResults) {
  runSmallCalls(/*ranks=*/4, /*reducers=*/2, /*server_window=*/1, /*client_window=*/1,
                /*calls=*/24, /*rounds=*/3);
}

TEST(SmallCalls, WideWindowsBackToBackRounds) {
  runSmallCalls(/*ranks=*/3, /*reducers=*/1, /*server_window=*/16, /*client_window=*/16,
                /*calls=*/40, /*rounds=*/4);
}

// A request dropped before its call finished must not let the call's record be reused while
// its slices are still out: the next calls must still come back right.
TEST(SmallCalls, DroppedRequestsDoNotCorruptLaterCalls) {
  constexpr int kRanks = 2;
  auto servers = startServers(1);
  ASSERT_EQ(servers.size(), 1u);
  auto opts = optionsFor(servers);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll(std::vector<CollOptions>(kRanks, opts), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      constexpr size_t kCount = 256;
      // The dropped calls' buffers live to the end: their results still land in them.
      std::vector<std::vector<int32_t>> dropped(8, std::vector<int32_t>(kCount, r + 1));
      for (auto& buf : dropped) {
        CollRequest req;
        Status s = post(clients[r].get(), buf.data(), buf.data(), kCount, DataType::kInt32,
                        ReduceOp::kSum, &req);
        if (!s.isOk()) {
          errors[r] = s.toString();
          return;
        }
      }  // each request is dropped here, unfinished or not
      for (int k = 0; k < 20; ++k) {
        std::vector<int32_t> v(kCount, (r + 1) * (k + 2));
        CollRequest req;
        Status s = post(clients[r].get(), v.data(), v.data(), kCount, DataType::kInt32,
                        ReduceOp::kSum, &req);
        if (s.isOk()) s = waitRequest(&req, nullptr);
        if (!s.isOk()) {
          errors[r] = s.toString();
          return;
        }
        const int32_t want = (1 + 2) * (k + 2);
        if (v[0] != want || v[kCount - 1] != want) {
          errors[r] = "call " + std::to_string(k) + ": " + std::to_string(v[0]);
          return;
        }
      }
      clients[r]->close();  // before the dropped calls' buffers go
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

}  // namespace
}  // namespace tally::reducer::test
