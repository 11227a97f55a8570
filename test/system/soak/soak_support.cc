// SPDX-License-Identifier: Apache-2.0
#include "test/system/soak/soak_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "test/support/cluster.h"
#include "tools/driver/reference.h"

namespace tally::soak {

namespace {

constexpr uint64_t kHashSeed = 1469598103934665603ull;
constexpr uint64_t kHashPrime = 1099511628211ull;
// Written over the output before each call, so a call that leaves it untouched cannot pass.
constexpr int kPoison = 0xA5;

}  // namespace

std::string CheckedResults::encode() const {
  char text[96];
  std::snprintf(text, sizeof(text), "calls %" PRIu64 " wrong %" PRIu64 " hash %016" PRIx64, calls,
                wrong, hash);
  return text;
}

bool CheckedResults::decode(const std::string& text, CheckedResults* out) {
  CheckedResults r;
  if (std::sscanf(text.c_str(), "calls %" SCNu64 " wrong %" SCNu64 " hash %" SCNx64, &r.calls,
                  &r.wrong, &r.hash) != 3) {
    return false;
  }
  *out = r;
  return true;
}

CallMix::CallMix(std::vector<CallSpec> specs, int nseeds, int rank, int nranks, uint64_t salt)
    : specs_(std::move(specs)),
      nseeds_(static_cast<size_t>(nseeds < 1 ? 1 : nseeds)),
      rank_(rank),
      nranks_(nranks),
      salt_(salt),
      entries_(specs_.size() * nseeds_) {
  size_t largest = 0;
  for (const CallSpec& s : specs_) largest = std::max(largest, s.count * dataTypeSize(s.type));
  out_.resize(largest);
}

CallMix::Entry& CallMix::entry(size_t spec, size_t seed) {
  Entry& e = entries_[spec * nseeds_ + seed];
  if (e.input.empty()) {
    const CallSpec& s = specs_[spec];
    const size_t bytes = s.count * dataTypeSize(s.type);
    const uint64_t value_seed = salt_ * 7919 + spec * 131 + seed;
    e.input.resize(bytes);
    e.expected.resize(bytes);
    driver::fillInput(s.type, s.op, rank_, nranks_, value_seed, s.count, e.input.data());
    driver::fillExpected(s.type, s.op, nranks_, value_seed, s.count, e.expected.data());
  }
  return e;
}

bool CallMix::run(driver::CollComm* comm, uint64_t i, CheckedResults* results) {
  const size_t spec = static_cast<size_t>(i % specs_.size());
  const size_t seed = static_cast<size_t>((i / specs_.size()) % nseeds_);
  const CallSpec& s = specs_[spec];
  const Entry& e = entry(spec, seed);
  const size_t bytes = e.input.size();
  std::memset(out_.data(), kPoison, bytes);
  Status st = comm->allreduce(e.input.data(), out_.data(), s.count, s.type, s.op);
  std::string what = "call " + std::to_string(i) + " (" + dataTypeName(s.type) + " " +
                     reduceOpName(s.op) + " " + std::to_string(s.count) + ")";
  if (!functional::check(comm->rank(), st, what)) return false;
  size_t first = 0;
  const size_t wrong =
      driver::countMismatches(s.type, out_.data(), e.expected.data(), s.count, &first);
  if (wrong != 0 && results->wrong == 0) {
    std::fprintf(stderr, "worker %d: %s: %zu wrong, first %s\n", comm->rank(), what.c_str(), wrong,
                 driver::describeElement(s.type, out_.data(), e.expected.data(), first).c_str());
  }
  results->calls += 1;
  results->wrong += wrong;
  if (results->calls == 1) results->hash = kHashSeed;
  results->hash = (results->hash ^ driver::hashBytes(out_.data(), bytes)) * kHashPrime;
  return true;
}

void expectResults(Store* store, const std::string& key, int nworkers, uint64_t expected_calls) {
  std::vector<CheckedResults> all(static_cast<size_t>(nworkers));
  for (int r = 0; r < nworkers; ++r) {
    std::string text;
    Status s = store->get(key + "/" + std::to_string(r), &text, 0);
    ASSERT_TRUE(s.isOk()) << s.toString();
    ASSERT_TRUE(CheckedResults::decode(text, &all[static_cast<size_t>(r)]))
        << "worker " << r << " wrote '" << text << "'";
  }
  for (int r = 0; r < nworkers; ++r) {
    const CheckedResults& c = all[static_cast<size_t>(r)];
    EXPECT_EQ(c.calls, expected_calls) << key << ": worker " << r;
    EXPECT_EQ(c.wrong, 0u) << key << ": worker " << r << " got elements unlike the reference";
    EXPECT_EQ(c.hash, all[0].hash) << key << ": worker " << r << " got other bytes than worker 0";
  }
}

Status residentKiB(pid_t pid, uint64_t* kib) {
  const std::string path = "/proc/" + std::to_string(pid) + "/status";
  std::ifstream in(path);
  if (!in) return Status::system("cannot open " + path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    uint64_t value = 0;
    std::string unit;
    if (!(fields >> value >> unit) || unit != "kB") {
      return Status::internal(path + ": cannot parse '" + line + "'");
    }
    *kib = value;
    return Status::ok();
  }
  return Status::internal(path + " has no VmRSS line (a zombie?)");
}

}  // namespace tally::soak
