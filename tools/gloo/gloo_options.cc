// SPDX-License-Identifier: Apache-2.0
#include "tools/gloo/gloo_options.h"

#include <arpa/inet.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/sizes.h"
#include "common/strings.h"

namespace tally::gloo_bench {
namespace {

constexpr uint64_t kElementBytes = sizeof(float);

// The value before centring: (7i + 13r) mod 17, spread so neighbouring elements and ranks differ.
int64_t rawValue(int64_t rank, uint64_t index) {
  return static_cast<int64_t>((index % 17 * 7 + static_cast<uint64_t>(rank) % 17 * 13) % 17);
}

}  // namespace

const char* algoRowName(GlooAlgo algo) {
  return algo == GlooAlgo::kRingChunked ? "gloo_ring_chunked" : "gloo_halving_doubling";
}

const char* algoFlagName(GlooAlgo algo) {
  return algo == GlooAlgo::kRingChunked ? "ring_chunked" : "halving_doubling";
}

Status parseAlgos(const std::string& text, std::vector<GlooAlgo>* out) {
  if (text == "ring_chunked") {
    *out = {GlooAlgo::kRingChunked};
  } else if (text == "halving_doubling") {
    *out = {GlooAlgo::kHalvingDoubling};
  } else if (text == "both") {
    *out = {GlooAlgo::kRingChunked, GlooAlgo::kHalvingDoubling};
  } else {
    return Status::invalidUsage("expected ring_chunked, halving_doubling or both, got '" + text +
                                "'");
  }
  return Status::ok();
}

Status parseSizes(const std::string& text, std::vector<uint64_t>* out) {
  std::vector<uint64_t> sizes;
  for (const std::string& item : split(text, ',')) {
    uint64_t bytes = 0;
    Status parsed = parseBytes(item, &bytes);
    if (!parsed.isOk()) return parsed;
    const uint64_t count = bytes / kElementBytes;
    if (count == 0) {
      return Status::invalidUsage("'" + item + "' is smaller than one float32 (4 bytes)");
    }
    if (count > static_cast<uint64_t>(INT_MAX)) {
      return Status::invalidUsage("'" + item + "' is more than INT_MAX float32 elements");
    }
    sizes.push_back(count * kElementBytes);
  }
  *out = std::move(sizes);
  return Status::ok();
}

Status validate(const BenchOptions& options) {
  if (options.nranks < 1) return Status::invalidUsage("--nranks must be at least 1");
  if (options.rank < 0 || options.rank >= options.nranks) {
    return Status::invalidUsage("--rank " + std::to_string(options.rank) + " is not in [0, " +
                                std::to_string(options.nranks) + ")");
  }
  if (options.iters < 1) return Status::invalidUsage("--iters must be at least 1");
  if (options.warmup < 0) return Status::invalidUsage("--warmup must not be negative");
  if (options.timeout_ms <= 0) return Status::invalidUsage("--timeout must be positive");
  if (options.store.empty()) return Status::invalidUsage("--store must name a directory");
  if (options.prefix.empty()) return Status::invalidUsage("--prefix must not be empty");
  if (options.algos.empty() || options.sizes.empty()) {
    return Status::invalidUsage("nothing to run: no algorithm or no size");
  }
  unsigned char scratch[sizeof(struct in6_addr)];
  if (::inet_pton(AF_INET, options.address.c_str(), scratch) != 1 &&
      ::inet_pton(AF_INET6, options.address.c_str(), scratch) != 1) {
    return Status::invalidUsage("--address: expected a numeric IP address, got '" +
                                options.address + "'");
  }
  return Status::ok();
}

float inputValue(int rank, size_t index) { return static_cast<float>(rawValue(rank, index) - 8); }

float expectedSum(int nranks, size_t index) {
  int64_t sum = 0;
  for (int r = 0; r < nranks; ++r) sum += rawValue(r, index) - 8;
  return static_cast<float>(sum);
}

size_t countWrong(const float* got, const float* expected, size_t count, size_t* first_bad) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    // Bitwise: the sums are exact integers, so any difference, -0 or NaN included, is an error.
    if (std::memcmp(&got[i], &expected[i], sizeof(float)) != 0) {
      if (wrong == 0 && first_bad != nullptr) *first_bad = i;
      ++wrong;
    }
  }
  return wrong;
}

std::string rowJson(const BenchRow& row) {
  nlohmann::ordered_json j;  // fields in the documented order
  j["algo"] = algoRowName(row.algo);
  j["bytes"] = row.bytes;
  j["count"] = row.count;
  j["time_us"] = row.time_us;
  j["algbw_gbs"] = row.time_us > 0 ? static_cast<double>(row.bytes) / (row.time_us * 1e3) : 0.0;
  j["wrong"] = row.wrong;
  j["cpu_s"] = row.cpu_s >= 0 ? nlohmann::ordered_json(row.cpu_s) : nlohmann::ordered_json(nullptr);
  return j.dump();
}

}  // namespace tally::gloo_bench
