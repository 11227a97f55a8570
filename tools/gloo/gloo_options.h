// SPDX-License-Identifier: Apache-2.0
// What one tally-gloo-bench process runs (tools/gloo/gloo_bench.cc), the values every rank feeds
// to the all-reduce, and the JSON row rank 0 prints. Nothing here touches Gloo, so the parsing
// and the arithmetic can be read (and reasoned about) without it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace tally::gloo_bench {

enum class GlooAlgo { kRingChunked, kHalvingDoubling };

// "gloo_ring_chunked" / "gloo_halving_doubling": the "algo" field of a row.
const char* algoRowName(GlooAlgo algo);
// "ring_chunked" / "halving_doubling": the --algo spelling, also used in store prefixes.
const char* algoFlagName(GlooAlgo algo);

struct BenchOptions {
  int rank = -1;
  int nranks = 0;
  std::string store;            // FileStore directory shared by every rank
  std::string prefix = "gloo";  // key prefix inside the store; one per run sharing a directory
  std::string address;          // IP the TCP device binds to
  std::vector<GlooAlgo> algos;
  std::vector<uint64_t> sizes;  // bytes, each a positive multiple of sizeof(float)
  int iters = 5;
  int warmup = 2;
  bool check = false;
  int64_t timeout_ms = 120000;
};

// --algo: "ring_chunked", "halving_doubling" or "both" (ring-chunked first).
Status parseAlgos(const std::string& text, std::vector<GlooAlgo>* out);

// --sizes: comma-separated sizes with binary units ("256K,1M,4100"). A size counts whole float32
// elements: it is rounded down to a multiple of 4 bytes, as nccl-tests does, and a size below
// 4 bytes, or above INT_MAX elements (Gloo's count is an int), is an error.
Status parseSizes(const std::string& text, std::vector<uint64_t>* out);

// Cross-field checks once every flag is parsed: rank in [0, nranks), iters >= 1, the address
// is a numeric IPv4 or IPv6 address.
Status validate(const BenchOptions& options);

// Rank `rank`'s input at `index`: a small integer in [-8, 8], so every partial sum of up to
// 2^20 ranks is an exact float32 and any summation order gives the same bits.
float inputValue(int rank, size_t index);
// The all-reduce sum at `index`, computed in integer arithmetic from inputValue's formula.
float expectedSum(int nranks, size_t index);

// Elements of `got` that differ from `expected` (NaN counts as wrong). When some differ and
// first_bad is non-null it receives the first such index.
size_t countWrong(const float* got, const float* expected, size_t count, size_t* first_bad);

struct BenchRow {
  GlooAlgo algo = GlooAlgo::kRingChunked;
  uint64_t bytes = 0;
  uint64_t count = 0;
  double time_us = 0;  // the slowest rank's mean time of one timed iteration
  int64_t wrong = -1;  // wrong elements over all ranks and checked iterations; -1 when not checked
  // CPU seconds (user + system) of every rank's process over the timed iterations, summed over
  // ranks; -1 when a rank could not read its CPU clock.
  double cpu_s = -1;
};

// {"algo":...,"bytes":...,"count":...,"time_us":...,"algbw_gbs":...,"wrong":...,"cpu_s":...} on
// one line, algbw_gbs = bytes / time in GB/s (10^9 bytes per second); cpu_s is null when unknown.
std::string rowJson(const BenchRow& row);

}  // namespace tally::gloo_bench
