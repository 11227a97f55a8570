// SPDX-License-Identifier: Apache-2.0
// A latency histogram that observes with two relaxed atomic adds and no lock, for the reducer's
// per-slice hot path (prometheus::Histogram takes a mutex per Observe). It is a
// prometheus::Collectable, so an Exposer or a render serves it like any registry.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace tally::metrics {

class LatencyHistogram final : public prometheus::Collectable {
 public:
  // `bounds_seconds`: the buckets' upper bounds, strictly increasing; +Inf is added.
  LatencyHistogram(std::string name, std::string help, const std::vector<double>& bounds_seconds);

  // Counts one duration in the first bucket whose bound is >= it. Any thread, wait-free.
  void observe(std::chrono::nanoseconds d);

  // One histogram family: cumulative buckets, count and sum in seconds. Each value is read
  // atomically, the set of them is not (a scrape racing an observe may see the count one ahead
  // of a bucket), which Prometheus tolerates.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::string name_;
  const std::string help_;
  std::vector<double> bounds_s_;
  std::vector<int64_t> bounds_ns_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bucket, not cumulative; last is +Inf
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace tally::metrics
