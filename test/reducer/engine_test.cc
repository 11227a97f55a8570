// SPDX-License-Identifier: Apache-2.0
// The engine on its own (reducer/engine.cc): inputs filed straight into it, in chosen arrival
// orders and from many threads at once, with members that record what they are sent. What it
// must hold whatever the order: every rank gets the exact reduction (tools/driver/reference.h,
// independent of the kernels), every input's credit is released exactly once, and a slice
// dropped while it is being folded (reduce as the inputs arrive) frees everything it held.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "reducer/observer.h"
#include "reducer/server_internal.h"
#include "tools/driver/reference.h"

namespace tally::reducer::server {
// The protocol and the worker-side client, as the tests drive both ends.
namespace wire = protocol::wire;
using namespace ::tally::protocol;
namespace {

// A member that keeps its results and counts released credits (a result releases its credit
// once sent, as the real connections do).
class Recorder final : public Member {
 public:
  void send(OutMsg m) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (m.releases_credit) ++released_;
    if (m.payload) {
      const uint8_t* p = m.payload->data() + m.payload_offset;
      results_.emplace_back(p, p + m.payload_bytes);
    } else {
      results_.emplace_back();
    }
  }
  void releaseCredit() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++released_;
  }
  const std::string& name() const override { return name_; }

  int released() {
    std::lock_guard<std::mutex> lock(mu_);
    return released_;
  }
  size_t resultCount() {
    std::lock_guard<std::mutex> lock(mu_);
    return results_.size();
  }
  // Result k (in the order they were sent); empty when there is none.
  std::vector<uint8_t> result(size_t k) {
    std::lock_guard<std::mutex> lock(mu_);
    return k < results_.size() ? results_[k] : std::vector<uint8_t>();
  }

 private:
  std::mutex mu_;
  int released_ = 0;
  std::vector<std::vector<uint8_t>> results_;
  const std::string name_ = "recorder";
};

class EngineTest : public ::testing::Test {
 protected:
  void makeComm(int nranks) {
    wire::Hello hello;
    hello.comm = wire::CommId{0x1234, static_cast<uint64_t>(nranks)};
    hello.nranks = static_cast<uint32_t>(nranks);
    hello.nreducers = 1;
    hello.slice_bytes = 64 << 20;  // one slice per call, however large
    hello.slices_per_reducer = 1;
    hello.min_slice_bytes = 1 << 20;
    hello.window = 16;
    comm_ = std::make_shared<Communicator>(hello, &engine_, nullServerObserver());
    members_.clear();
    for (int r = 0; r < nranks; ++r) members_.push_back(std::make_shared<Recorder>());
  }

  // Rank `rank`'s input of call `seq`: count elements from the reference's fillInput.
  SliceInput input(int rank, uint64_t seq, DataType type, ReduceOp op, size_t count) {
    SliceInput in;
    in.comm = comm_;
    in.peer = members_[rank];
    in.rank = rank;
    wire::SliceHeader& h = in.header;
    h.seq = seq;
    h.slice = 0;
    h.kind = wire::CollKind::kAllReduce;
    h.offset = 0;
    h.count = count;
    h.total_count = count;
    h.type = type;
    h.op = op;
    const size_t bytes = count * dataTypeSize(type);
    in.data = engine_.pool(shard()).get(bytes);
    driver::fillInput(type, op, rank, static_cast<int>(members_.size()), seq, count,
                      in.data->data());
    in.arrived = std::chrono::steady_clock::now();
    return in;
  }
  int shard() const { return engine_.shardOf(comm_->id, 0); }

  // Every rank's result k against the reference for call `seq`.
  void expectResult(size_t k, uint64_t seq, DataType type, ReduceOp op, size_t count) {
    const int n = static_cast<int>(members_.size());
    std::vector<uint8_t> want(count * dataTypeSize(type));
    driver::fillExpected(type, op, n, seq, count, want.data());
    for (int r = 0; r < n; ++r) {
      ASSERT_GT(members_[r]->resultCount(), k) << "rank " << r << " has no result " << k;
      const std::vector<uint8_t> got = members_[r]->result(k);
      ASSERT_EQ(got.size(), want.size()) << "rank " << r;
      size_t bad = 0;
      EXPECT_EQ(driver::countMismatches(type, got.data(), want.data(), count, &bad), 0u)
          << dataTypeName(type) << " " << reduceOpName(op) << " rank " << r << ": "
          << driver::describeElement(type, got.data() + bad * dataTypeSize(type),
                                     want.data() + bad * dataTypeSize(type), bad);
    }
  }

  Engine engine_{2, 16 << 20, nullServerObserver()};
  std::shared_ptr<Communicator> comm_;
  std::vector<std::shared_ptr<Recorder>> members_;
};

// Every type and op, with the inputs arriving in every order of 4 ranks (rank 0 first, last,
// in the middle): the same exact result whichever ranks were folded early.
TEST_F(EngineTest, EveryTypeAndOpInEveryArrivalOrder) {
  makeComm(4);
  std::vector<int> order = {0, 1, 2, 3};
  size_t k = 0;
  uint64_t seq = 0;
  do {
    for (int t = 0; t < kNumDataTypes; ++t) {
      for (int o = 0; o < kNumReduceOps; ++o) {
        const auto type = static_cast<DataType>(t);
        const auto op = static_cast<ReduceOp>(o);
        const size_t count = 1000 + 37 * static_cast<size_t>(t) + static_cast<size_t>(o);
        for (int r : order) engine_.submit(shard(), input(r, seq, type, op, count));
        ASSERT_NO_FATAL_FAILURE(expectResult(k, seq, type, op, count));
        ++k;
        ++seq;
      }
    }
  } while (std::next_permutation(order.begin(), order.end()));
  for (auto& m : members_) EXPECT_EQ(m->released(), static_cast<int>(k));
}

// 3 to 8 ranks, odd sizes, rank order, reverse and shuffled orders.
TEST_F(EngineTest, RankCountsAndOddSizes) {
  std::mt19937 rng(7);
  for (int n = 3; n <= 8; ++n) {
    makeComm(n);
    size_t k = 0;
    for (size_t count : {size_t{1}, size_t{7}, size_t{4097}, size_t{(1 << 16) + 3}}) {
      for (DataType type :
           {DataType::kFloat32, DataType::kFloat64, DataType::kInt64, DataType::kFloat16}) {
        std::vector<int> order(n);
        std::iota(order.begin(), order.end(), 0);
        if (k % 3 == 1) {
          std::reverse(order.begin(), order.end());
        } else if (k % 3 == 2) {
          std::shuffle(order.begin(), order.end(), rng);
        }
        for (int r : order) engine_.submit(shard(), input(r, k, type, ReduceOp::kSum, count));
        ASSERT_NO_FATAL_FAILURE(expectResult(k, k, type, ReduceOp::kSum, count));
        ++k;
      }
    }
    for (auto& m : members_) EXPECT_EQ(m->released(), static_cast<int>(k)) << n << " ranks";
  }
}

// Inputs in rank order are folded as each comes, and each folded buffer goes back to the pool at
// once: a slice holds rank 0's accumulator and at most the input being folded.
TEST_F(EngineTest, FoldsEachInputAsItComesAndFreesIt) {
  constexpr int kRanks = 8;
  makeComm(kRanks);
  constexpr size_t kCount = 4096;
  const size_t capacity = kCount * sizeof(float);  // a power of two: the pool's own size
  BufferPool& pool = engine_.pool(shard());
  for (int r = 0; r < kRanks; ++r) {
    SliceInput in = input(r, 0, DataType::kFloat32, ReduceOp::kSum, kCount);
    const size_t before = pool.cachedBytes();
    engine_.submit(shard(), std::move(in));
    const size_t after = pool.cachedBytes();
    if (r + 1 < kRanks) {
      // Rank 0's buffer is the accumulator; every later input is folded into it and freed.
      EXPECT_EQ(after - before, r == 0 ? 0 : capacity) << "after rank " << r;
    } else {
      // The last input, and the accumulator once every rank has the result.
      EXPECT_EQ(after - before, 2 * capacity) << "after the last rank";
    }
  }
  ASSERT_NO_FATAL_FAILURE(expectResult(0, 0, DataType::kFloat32, ReduceOp::kSum, kCount));
}

// One thread per rank files 200 calls of 16K floats as fast as it can, so folds overlap with
// arrivals on other threads: every result exact, every credit released once.
TEST_F(EngineTest, RanksOnTheirOwnThreads) {
  const int n = 5;
  makeComm(n);
  constexpr int kCalls = 200;
  constexpr size_t kCount = 16 * 1024;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      for (int c = 0; c < kCalls; ++c) {
        engine_.submit(shard(), input(r, c, DataType::kFloat32, ReduceOp::kSum, kCount));
      }
    });
  }
  for (auto& t : threads) t.join();
  // Results come in completion order, which follows the calls here (each thread files in order
  // and a call completes only once all ranks filed it), so result k is call k.
  for (int c = 0; c < kCalls; ++c) {
    ASSERT_NO_FATAL_FAILURE(expectResult(c, c, DataType::kFloat32, ReduceOp::kSum, kCount));
  }
  for (auto& m : members_) EXPECT_EQ(m->released(), kCalls);
}

// The communicator fails while inputs are filed and folded on several threads: nothing leaks and
// nothing is released twice. Each input's credit comes back exactly once, by its result or by
// the drop.
TEST_F(EngineTest, FailingWhileFoldingReleasesEveryInputOnce) {
  for (int attempt = 0; attempt < 6; ++attempt) {
    const int n = 4;
    makeComm(n);
    constexpr int kCalls = 60;
    constexpr size_t kCount = 32 * 1024;
    std::atomic<int> filed{0};
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        for (int c = 0; c < kCalls; ++c) {
          engine_.submit(shard(), input(r, c, DataType::kFloat64, ReduceOp::kMax, kCount));
          filed.fetch_add(1);
        }
      });
    }
    while (filed.load() < (attempt + 1) * 30) std::this_thread::yield();
    comm_->fail("test: failing mid-stream");
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(members_[r]->released(), kCalls) << "attempt " << attempt << ", rank " << r;
    }
    // Whatever completed before the failure is exact.
    const size_t done = members_[0]->resultCount();
    for (size_t k = 0; k < done; ++k) {
      ASSERT_NO_FATAL_FAILURE(expectResult(k, k, DataType::kFloat64, ReduceOp::kMax, kCount));
    }
  }
}

// A rank that sends a call twice fails the communicator, also when the slice is being folded.
TEST_F(EngineTest, DuplicateInputFailsTheCommunicator) {
  makeComm(3);
  engine_.submit(shard(), input(0, 0, DataType::kInt32, ReduceOp::kSum, 100));
  engine_.submit(shard(), input(1, 0, DataType::kInt32, ReduceOp::kSum, 100));
  EXPECT_FALSE(comm_->failed());
  engine_.submit(shard(), input(1, 0, DataType::kInt32, ReduceOp::kSum, 100));
  EXPECT_TRUE(comm_->failed());
  for (int r = 0; r < 2; ++r) EXPECT_EQ(members_[r]->resultCount(), 0u);
  EXPECT_EQ(members_[0]->released(), 1);
  EXPECT_EQ(members_[1]->released(), 2);
}

}  // namespace
}  // namespace tally::reducer::server
