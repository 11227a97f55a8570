// `tally demo`: starts tally-reducer processes and worker processes on loopback, all-reduces
// float32 sums through the plugin's exported CollNet table driven as NCCL drives it, checks every
// result against an independently computed reference, and prints size, time and algorithm
// bandwidth beside a ring all-reduce over the same plugin's point-to-point net.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/store.h"

namespace tally::demo {

struct DemoOptions {
  std::string plugin;   // path of libnccl-net-tally.so
  std::string reducer;  // path of tally-reducer
  int workers = 4;
  int reducers = 2;
  std::vector<uint64_t> sizes;  // bytes per all-reduce
  int iters = 5;
  int warmup = 2;
  int table_version = 0;        // 0: the newest both tables export
  bool ring = true;             // also run the ring baseline
  int reducer_threads = 0;      // 0: tally-reducer's default
  int64_t timeout_ms = 120000;  // whole-run bound for the workers
  bool verbose = false;
};

// Default sizes: 256 KiB .. 64 MiB, x4.
std::vector<uint64_t> defaultSizes();

// Runs the demo and prints its table to stdout. Returns the process exit code: 0 when every
// result was right and every process succeeded.
int runDemo(const DemoOptions& options);

// The body of one worker process (in demo_worker.cc): sets the plugin's environment, drives
// CollNet and the ring, writes per-size results to the store as "<impl>/<size>/<rank>" =
// "<mean time in us> <wrong elements>". Returns the worker's exit code.
int runDemoWorker(const DemoOptions& options, const std::string& reducer_list, int table_version,
                  Store* store, int rank);

}  // namespace tally::demo
