// SPDX-License-Identifier: Apache-2.0
// The bench's CPU cost arithmetic (tools/bench/cpu_cost.h): bytes moved, seconds per GiB, the
// unknown cases, and the process CPU clock (it advances while this process computes).
#include "tools/bench/cpu_cost.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>

namespace tally::bench {
namespace {

TEST(CpuCost, MovedBytesIsBytesTimesItersTimesWorkers) {
  EXPECT_EQ(movedBytes(64u << 20, 5, 4), 1280ull << 20);
  EXPECT_EQ(movedBytes(4096, 1, 1), 4096u);
  EXPECT_EQ(movedBytes(4096, 0, 4), 0u);
  EXPECT_EQ(movedBytes(4096, 5, 0), 0u);
  EXPECT_EQ(movedBytes(4096, -1, 4), 0u);
}

TEST(CpuCost, SecondsPerGiB) {
  const uint64_t gib = 1ull << 30;
  EXPECT_DOUBLE_EQ(cpuSecondsPerGiB(3.0, gib), 3.0);
  EXPECT_DOUBLE_EQ(cpuSecondsPerGiB(3.0, 4 * gib), 0.75);
  EXPECT_DOUBLE_EQ(cpuSecondsPerGiB(0.0, gib), 0.0);  // a ring row's reducers
  // 64 MiB x 5 iterations x 4 workers = 1.25 GiB; 2.5 CPU seconds is 2 per GiB.
  EXPECT_DOUBLE_EQ(cpuSecondsPerGiB(2.5, movedBytes(64u << 20, 5, 4)), 2.0);
  // 1 MiB in 1 ms of CPU: 1.024 s per GiB.
  EXPECT_NEAR(cpuSecondsPerGiB(0.001, 1u << 20), 1.024, 1e-12);
}

TEST(CpuCost, SocketBytesFollowTheAlgorithm) {
  const uint64_t mib = 1u << 20;
  // A reduction-server worker: its input out, the sum in. 4 workers x 5 iterations.
  EXPECT_EQ(workerSocketBytes(SocketPattern::kServer, 64 * mib, 5, 4), 2 * 64 * mib * 5 * 4);
  // A ring worker at 4 ranks: 3/2 of its input out and as much in, 3 x its input.
  EXPECT_EQ(workerSocketBytes(SocketPattern::kRing, 64 * mib, 5, 4), 3 * 64 * mib * 5 * 4);
  // At 2 ranks the ring moves what the reduction server does; at 8, 7/2 of the input.
  EXPECT_EQ(workerSocketBytes(SocketPattern::kRing, 64 * mib, 1, 2),
            workerSocketBytes(SocketPattern::kServer, 64 * mib, 1, 2));
  EXPECT_EQ(workerSocketBytes(SocketPattern::kRing, 64 * mib, 1, 8), 7 * 32 * mib * 8);
  // The reducers take in every worker's input and send every worker the sum.
  EXPECT_EQ(reducerSocketBytes(64 * mib, 5, 4), 2 * movedBytes(64 * mib, 5, 4));
  EXPECT_EQ(workerSocketBytes(SocketPattern::kServer, 64 * mib, 0, 4), 0u);
  EXPECT_EQ(workerSocketBytes(SocketPattern::kRing, 64 * mib, 5, 0), 0u);
  EXPECT_EQ(reducerSocketBytes(64 * mib, 5, 0), 0u);
}

TEST(CpuCost, UnknownStaysUnknown) {
  EXPECT_EQ(cpuSecondsPerGiB(-1, 1u << 30), -1);
  EXPECT_EQ(cpuSecondsPerGiB(1.0, 0), -1);
}

TEST(CpuCost, ProcessClockAdvancesWithWork) {
  const double before = processCpuSeconds();
  ASSERT_GE(before, 0);
  volatile uint64_t x = 0;
  while (processCpuSeconds() - before < 0.02) x = x + 1;  // spins until 20 ms of CPU
  EXPECT_GE(processCpuSeconds() - before, 0.02);
  // The same clock read through the pid, as the bench reads a reducer's.
  EXPECT_GE(processCpuSeconds(::getpid()), before + 0.02);
}

TEST(CpuCost, NoSuchProcessIsUnknown) {
  // Just above the kernel's largest pid_max (4194304), so never a live process. (Far larger
  // values overflow the clock id the pid is packed into.)
  EXPECT_EQ(processCpuSeconds(4194305), -1);
}

}  // namespace
}  // namespace tally::bench
