// SPDX-License-Identifier: Apache-2.0
// LatencyHistogram: atomic buckets, made cumulative only when collected.
#include "reducer/metrics/latency_histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tally::metrics {

LatencyHistogram::LatencyHistogram(std::string name, std::string help,
                                   const std::vector<double>& bounds_seconds)
    : name_(std::move(name)),
      help_(std::move(help)),
      bounds_s_(bounds_seconds),
      counts_(new std::atomic<uint64_t>[bounds_seconds.size() + 1]) {
  for (double b : bounds_s_) bounds_ns_.push_back(static_cast<int64_t>(std::llround(b * 1e9)));
  for (size_t i = 0; i <= bounds_s_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void LatencyHistogram::observe(std::chrono::nanoseconds d) {
  const int64_t ns = std::max<int64_t>(0, d.count());
  const size_t bucket =
      std::lower_bound(bounds_ns_.begin(), bounds_ns_.end(), ns) - bounds_ns_.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
}

std::vector<prometheus::MetricFamily> LatencyHistogram::Collect() const {
  prometheus::ClientMetric metric;
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_s_.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    prometheus::ClientMetric::Bucket b;
    b.cumulative_count = cumulative;
    b.upper_bound = i < bounds_s_.size() ? bounds_s_[i] : std::numeric_limits<double>::infinity();
    metric.histogram.bucket.push_back(b);
  }
  metric.histogram.sample_count = cumulative;
  metric.histogram.sample_sum = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  prometheus::MetricFamily family;
  family.name = name_;
  family.help = help_;
  family.type = prometheus::MetricType::Histogram;
  family.metric.push_back(std::move(metric));
  return {std::move(family)};
}

}  // namespace tally::metrics
