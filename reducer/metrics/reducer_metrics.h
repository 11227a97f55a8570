// SPDX-License-Identifier: Apache-2.0
// ReducerMetrics: the ServerObserver (reducer/observer.h) behind `tally-reducer --metrics`, which
// keeps the reducer's Prometheus metrics. docs/metrics.md lists them.
//
// Every event is one or two atomic updates (prometheus-cpp counters and gauges are atomics; the
// latency histogram is LatencyHistogram, lock-free), so it is safe on the loop threads' path.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "reducer/observer.h"

namespace prometheus {
class Collectable;
class Counter;
class Gauge;
class Registry;
}  // namespace prometheus

namespace tally::metrics {

class LatencyHistogram;

// The upper bounds of tally_reducer_slice_latency_seconds, 50 us to 1 s.
const std::vector<double>& sliceLatencyBounds();

class ReducerMetrics final : public reducer::ServerObserver {
 public:
  ReducerMetrics();
  ~ReducerMetrics() override;
  ReducerMetrics(const ReducerMetrics&) = delete;
  ReducerMetrics& operator=(const ReducerMetrics&) = delete;

  void connectionOpened() override;
  void connectionClosed() override;
  void communicatorOpened() override;
  void communicatorClosed() override;
  void communicatorFailed() override;
  void memoryReserved(uint64_t bytes) override;
  void memoryReleased(uint64_t bytes) override;
  void sliceReduced(uint64_t input_bytes, std::chrono::nanoseconds latency) override;
  void error(reducer::ServerError cause) override;
  void epochDecided(reducer::EpochChange change) override;
  void communicatorRejoined() override;
  void zerocopySent(uint64_t sends, uint64_t copied, uint64_t refused) override;

  // What to register with an Exposer (which keeps weak references: keep this object alive).
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables() const;
  // Every metric in the Prometheus text exposition format, as GET /metrics answers.
  std::string render() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<LatencyHistogram> latency_;
  prometheus::Counter* bytes_ = nullptr;
  prometheus::Counter* slices_ = nullptr;
  prometheus::Gauge* connections_ = nullptr;
  prometheus::Gauge* communicators_ = nullptr;
  prometheus::Gauge* reserved_ = nullptr;
  prometheus::Counter* comm_failures_ = nullptr;
  std::array<prometheus::Counter*, reducer::kServerErrorCount> errors_{};
  std::array<prometheus::Counter*, reducer::kEpochChangeCount> epochs_{};
  prometheus::Counter* rejoins_ = nullptr;
  prometheus::Counter* zerocopy_sends_ = nullptr;
  prometheus::Counter* zerocopy_copied_ = nullptr;
  prometheus::Counter* zerocopy_refused_ = nullptr;
};

}  // namespace tally::metrics
