// CPU cost of an all-reduce for `tally bench` and tally-gloo-bench: the CPU seconds (user + system,
// every thread of a process) that the kernel accounts to a process, and the cost per GiB moved.
//
// "Moved" is the same for every algorithm, so rows compare: the bytes each worker all-reduces,
// times the timed iterations, times the workers, i.e. the sum of every worker's input over the
// timed iterations (what a reduction server receives in all). Worker CPU per GiB is then what one
// worker spends per GiB of its own input; reducer CPU per GiB is what the reducers spend per GiB
// they receive.
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

// cpu_seconds / (moved_bytes / 2^30); -1 (unknown) when cpu_seconds is negative or nothing moved.
inline double cpuSecondsPerGiB(double cpu_seconds, uint64_t moved_bytes) {
  if (cpu_seconds < 0 || moved_bytes == 0) return -1;
  return cpu_seconds / (static_cast<double>(moved_bytes) / kBytesPerGiB);
}

}  // namespace tally::bench
