// SPDX-License-Identifier: Apache-2.0
// The hot path takes nothing from the heap: once a communicator is warm, iallreduce and test (and
// the threads behind them, on both the worker and the reducer side) reuse their records and
// buffers. This binary replaces the global operator new to count every C++ allocation in the
// process. Before the data path pooled its records it made about 21 allocations per slice; what
// may remain is a pooled block's first use when more slices than ever before are in flight at
// once, about one in a thousand slices.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "protocol/slicing.h"
#include "test/support/harness.h"

namespace {

std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};
thread_local uint64_t t_allocations = 0;

void* countedAlloc(std::size_t size, std::size_t align) {
  if (g_counting.load(std::memory_order_relaxed)) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    ++t_allocations;
  }
  if (size == 0) size = 1;
  void* p = align <= alignof(std::max_align_t)
                ? std::malloc(size)
                : std::aligned_alloc(align, (size + align - 1) / align * align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t size) { return countedAlloc(size, 0); }
void* operator new[](std::size_t size) { return countedAlloc(size, 0); }
void* operator new(std::size_t size, std::align_val_t a) {
  return countedAlloc(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a) {
  return countedAlloc(size, static_cast<std::size_t>(a));
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return countedAlloc(size, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return countedAlloc(size, 0);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace tally::reducer::test {
namespace {

struct Counts {
  uint64_t process = 0;           // every thread: callers, links, reducer readers, engine, writers
  std::vector<uint64_t> callers;  // each rank's own thread: iallreduce and test
};

// Runs `warm` then `measured` rounds of `inflight` calls of `count` floats per rank, every
// result checked, and counts allocations during the measured rounds only.
Counts runAndCount(int ranks, int reducers, size_t count, int inflight, int warm, int measured) {
  Counts counts;
  counts.callers.assign(ranks, 0);
  auto servers = startServers(reducers, 2, 16);
  EXPECT_EQ(static_cast<int>(servers.size()), reducers);
  auto opts = optionsFor(servers, 64 * 1024);
  opts.max_requests = inflight;
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll(std::vector<CollOptions>(ranks, opts), &clients);
  for (auto& s : st) EXPECT_TRUE(s.isOk()) << s.toString();
  if (testing::Test::HasFailure()) return counts;

  std::vector<std::string> errors(ranks);
  std::atomic<int> arrived{0};
  auto barrier = [&](int generation) {
    arrived.fetch_add(1);
    while (arrived.load() < generation * ranks) std::this_thread::yield();
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      std::vector<std::vector<float>> send(inflight, std::vector<float>(count));
      std::vector<std::vector<float>> recv(inflight, std::vector<float>(count));
      std::vector<CollRequest> reqs(inflight);
      for (int round = 0; round < warm + measured; ++round) {
        if (round == warm) {
          barrier(1);  // every rank warm before counting starts
          if (r == 0) g_counting.store(true);
          barrier(2);
          t_allocations = 0;
        }
        for (int k = 0; k < inflight; ++k) {
          for (size_t i = 0; i < count; i += 97) send[k][i] = static_cast<float>(r + round + k);
          Status s = post(clients[r].get(), send[k].data(), recv[k].data(), count,
                          DataType::kFloat32, ReduceOp::kSum, &reqs[k]);
          if (!s.isOk()) errors[r] = "post: " + s.toString();
        }
        for (int k = 0; k < inflight && errors[r].empty(); ++k) {
          Status s = waitRequest(&reqs[k], nullptr);
          if (!s.isOk()) errors[r] = "wait: " + s.toString();
          float want = 0;
          for (int q = 0; q < ranks; ++q) want += static_cast<float>(q + round + k);
          for (size_t i = 0; i < count && errors[r].empty(); i += 97) {
            if (recv[k][i] != want) errors[r] = "wrong sum at element " + std::to_string(i);
          }
        }
        if (!errors[r].empty()) break;
      }
      counts.callers[r] = t_allocations;
      barrier(3);
      if (r == 0) g_counting.store(false);
    });
  }
  for (auto& t : threads) t.join();
  counts.process = g_allocations.exchange(0);
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  for (auto& c : clients) c->close();
  return counts;
}

void expectNoAllocations(const char* what, size_t count, int inflight) {
  constexpr int kRanks = 2, kReducers = 2, kWarm = 40, kMeasured = 100;
  Counts c = runAndCount(kRanks, kReducers, count, inflight, kWarm, kMeasured);
  const uint64_t per_slice = sliceElements(count, sizeof(float), 64 * 1024, kReducers);
  const double slices_per_call = static_cast<double>((count + per_slice - 1) / per_slice);
  const double rank_slices = kMeasured * inflight * slices_per_call;
  const double slices = kRanks * rank_slices;
  std::printf("%s: %llu allocations in the process over %.0f slices (%.4f per slice)\n", what,
              static_cast<unsigned long long>(c.process), slices, c.process / slices);
  // At most one allocation per 50 slices (was 21 per slice), in the callers' own threads and in the
  // process.
  constexpr double kMaxPerSlice = 0.02;
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_LE(c.callers[r], kMaxPerSlice * rank_slices)
        << what << ": rank " << r << "'s iallreduce/test allocated";
  }
  EXPECT_LE(c.process / slices, kMaxPerSlice)
      << what << ": the worker or reducer threads allocated";
}

TEST(HotPath, SingleSliceCallsAllocateNothing) { expectNoAllocations("4 KiB calls", 1024, 8); }

TEST(HotPath, ManySliceCallsAllocateNothing) { expectNoAllocations("1 MiB calls", 256 * 1024, 4); }

}  // namespace
}  // namespace tally::reducer::test
