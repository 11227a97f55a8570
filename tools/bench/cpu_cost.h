// SPDX-License-Identifier: Apache-2.0
// CPU cost of an all-reduce for `tally bench` and tally-gloo-bench: the CPU seconds (user + system,
// every thread of a process) that the kernel accounts to a process, and the cost per GiB moved.
//
// "Moved" is the same for every algorithm, so rows compare: the bytes each worker all-reduces,
// times the timed iterations, times the workers, i.e. the sum of every worker's input over the
// timed iterations (what a reduction server receives in all). Worker CPU per GiB is then what one
// worker spends per GiB of its own input; reducer CPU per GiB is what the reducers spend per GiB
// they receive. CPU per socket GiB divides by the bytes that crossed that side's sockets
// instead, which differ by algorithm: what each byte through a socket costs.
//
// The clock is the kernel's per-process CPU clock (clock_getcpuclockid), which counts the same
// user + system time as getrusage and /proc/<pid>/stat, in nanoseconds rather than 10 ms ticks, so
// that a row of a few milliseconds still measures. Header-only, so its unit test needs no bench.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstdint>

namespace tally::bench {

inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

// CPU seconds a process has used so far, all its threads (living and ended) together; pid 0 is
// the calling process. -1 when the kernel cannot tell (e.g. no such process).
inline double processCpuSeconds(pid_t pid = 0) {
  clockid_t clock = CLOCK_PROCESS_CPUTIME_ID;
  if (pid != 0 && ::clock_getcpuclockid(pid, &clock) != 0) return -1;
  struct timespec ts = {};
  if (::clock_gettime(clock, &ts) != 0) return -1;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Bytes a row moved: bytes x iterations x workers (see above). 0 when any factor is not positive.
inline uint64_t movedBytes(uint64_t bytes, int iters, int workers) {
  if (iters <= 0 || workers <= 0) return 0;
  return bytes * static_cast<uint64_t>(iters) * static_cast<uint64_t>(workers);
}

// Bytes that crossed the workers' sockets, in and out, all workers together, for one row: a
// reduction-server worker sends its input once and receives the sum once (2 x bytes); a ring
// worker (Tally's ring, Gloo's ring, and Gloo's halving-doubling at a power of two workers)
// sends 2(n-1)/n of its input and receives as much (4(n-1)/n x bytes). Payload only: the
// headers add well under 1% at the sizes where CPU per byte matters. 0 when unknown (a factor
// not positive).
enum class SocketPattern { kServer, kRing };
inline uint64_t workerSocketBytes(SocketPattern pattern, uint64_t bytes, int iters, int workers) {
  if (iters <= 0 || workers <= 0) return 0;
  const uint64_t per_worker =
      pattern == SocketPattern::kServer
          ? 2 * bytes
          : 4 * bytes * static_cast<uint64_t>(workers - 1) / static_cast<uint64_t>(workers);
  return per_worker * static_cast<uint64_t>(iters) * static_cast<uint64_t>(workers);
}

// Bytes that crossed the reducers' sockets, all reducers together: every worker's input in, the
// sum out to every worker (2 x moved).
inline uint64_t reducerSocketBytes(uint64_t bytes, int iters, int workers) {
  return 2 * movedBytes(bytes, iters, workers);
}

// cpu_seconds / (moved_bytes / 2^30); -1 (unknown) when cpu_seconds is negative or nothing moved.
inline double cpuSecondsPerGiB(double cpu_seconds, uint64_t moved_bytes) {
  if (cpu_seconds < 0 || moved_bytes == 0) return -1;
  return cpu_seconds / (static_cast<double>(moved_bytes) / kBytesPerGiB);
}

}  // namespace tally::bench
