// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the soak and load tests.
//
// CallMix: a fixed, repeating mix of all-reduce calls (types, ops, counts) whose inputs and exact
// results come from tools/driver/reference.h, computed once per (spec, seed) and reused, so a
// worker can make thousands of checked calls without recomputing the reference every time.
// CheckedResults: the running tally a worker publishes through the Store; the parent then checks
// that no element was wrong and that every worker received the same bytes.
// residentKiB: a process's VmRSS, for the reducer memory checks.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/store.h"
#include "common/types.h"
#include "tools/driver/coll_driver.h"

namespace tally::soak {

struct CallSpec {
  DataType type;
  ReduceOp op;
  size_t count;
};

// What a worker saw over a stream of calls on one communicator.
struct CheckedResults {
  uint64_t calls = 0;  // calls that completed and were compared
  uint64_t wrong = 0;  // elements whose bytes differed from the reference
  uint64_t hash = 0;   // every output's hash folded in call order (same on every worker)

  // "calls N wrong W hash H", and back; decode() returns false on anything else.
  std::string encode() const;
  static bool decode(const std::string& text, CheckedResults* out);
};

// Call i of a stream uses spec i % S and seed index (i / S) % nseeds, so the same inputs come
// back only every S * nseeds calls and consecutive calls always differ in size or type: a stale
// or misplaced result cannot pass for the right one. Inputs are for `rank` of `nranks`; `salt`
// keeps different streams' values apart. One thread uses a CallMix at a time.
class CallMix {
 public:
  CallMix(std::vector<CallSpec> specs, int nseeds, int rank, int nranks, uint64_t salt);

  // Runs call i through comm (output buffer poisoned first), compares every element with the
  // reference and folds the result into *results. Returns false, after printing why to stderr,
  // only when the call itself failed; wrong elements are counted, and the first is printed.
  bool run(driver::CollComm* comm, uint64_t i, CheckedResults* results);

  const CallSpec& specOf(uint64_t i) const { return specs_[i % specs_.size()]; }

 private:
  struct Entry {
    std::vector<char> input;
    std::vector<char> expected;
  };
  Entry& entry(size_t spec, size_t seed);

  std::vector<CallSpec> specs_;
  size_t nseeds_;
  int rank_;
  int nranks_;
  uint64_t salt_;
  std::vector<Entry> entries_;  // spec-major, built on first use
  std::vector<char> out_;
};

// Parent side: reads "<key>/<rank>" for every worker (already written, no waiting) and expects
// `expected_calls` calls with no wrong element from each, and the same hash on every worker.
void expectResults(Store* store, const std::string& key, int nworkers, uint64_t expected_calls);

// Resident set size of process `pid` in KiB (VmRSS in /proc/<pid>/status).
Status residentKiB(pid_t pid, uint64_t* kib);

}  // namespace tally::soak
