// SPDX-License-Identifier: Apache-2.0
// One rank's side of a Gloo all-reduce benchmark: a Gloo context connected through a FileStore
// over the TCP transport, and the timed, optionally checked, all-reduce of one size.
//
// Gloo reports failures by throwing; every function here catches them and returns a Status, so
// nothing is thrown past this file. Every wait is bounded by BenchOptions::timeout_ms (the Gloo
// context timeout: rendezvous, connect, each receive, each barrier).
//
// All calls are collective: every rank of the group makes the same calls in the same order.
// Not thread-safe.
#pragma once

#include <memory>

#include "common/status.h"
#include "tools/gloo/gloo_options.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace tally::gloo_bench {

class GlooGroup {
 public:
  // Binds a TCP device to options.address, rendezvouses under "<prefix>.<algo>" in the
  // FileStore at options.store (created when missing) and connects a full mesh. On error *out
  // is untouched.
  static Status connect(const BenchOptions& options, GlooAlgo algo,
                        std::unique_ptr<GlooGroup>* out);
  ~GlooGroup();
  GlooGroup(const GlooGroup&) = delete;
  GlooGroup& operator=(const GlooGroup&) = delete;

  // Runs options.warmup then options.iters all-reduces (float32 sum) of `bytes`. Each iteration
  // copies the rank's input into the in-place buffer and runs the algorithm; the copy and the
  // run are timed together, as Tally's own ring baseline times its in-place all-reduce. A Gloo
  // barrier precedes the timed iterations, which go back to back. row->time_us is the slowest
  // rank's mean (a max all-reduce of the per-rank means); with options.check, row->wrong is the
  // number of wrong elements summed over ranks in the checked iterations (every warm-up and the
  // last timed one, bench::checkedCall), else -1. Every rank gets the same row. On error *row is
  // untouched.
  Status measure(uint64_t bytes, BenchRow* row);

  // A final barrier, so no rank tears down connections a peer still reads from.
  Status finish();

 private:
  GlooGroup(const BenchOptions& options, GlooAlgo algo, std::shared_ptr<gloo::Context> context);
  Status measureOrThrow(uint64_t bytes, BenchRow* row);

  const BenchOptions options_;  // a copy: the group does not depend on the caller's
  const GlooAlgo algo_;
  std::shared_ptr<gloo::Context> context_;
};

}  // namespace tally::gloo_bench
