// SPDX-License-Identifier: Apache-2.0
// ReducerMetrics: the metric families, and the events that move them.
#include "reducer/metrics/reducer_metrics.h"

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "reducer/metrics/latency_histogram.h"

namespace tally::metrics {

const std::vector<double>& sliceLatencyBounds() {
  static const std::vector<double> bounds = {50e-6, 100e-6, 250e-6, 500e-6, 1e-3,   2.5e-3, 5e-3,
                                             10e-3, 25e-3,  50e-3,  100e-3, 250e-3, 500e-3, 1.0};
  return bounds;
}

ReducerMetrics::ReducerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      latency_(std::make_shared<LatencyHistogram>(
          "tally_reducer_slice_latency_seconds",
          "Time from the first input of a slice arriving to its result being queued to the "
          "workers.",
          sliceLatencyBounds())) {
  bytes_ = &prometheus::BuildCounter()
                .Name("tally_reducer_bytes_reduced_total")
                .Help("Input bytes reduced: each slice's bytes times its communicator's ranks.")
                .Register(*registry_)
                .Add({});
  slices_ = &prometheus::BuildCounter()
                 .Name("tally_reducer_slices_total")
                 .Help("Slices reduced and answered.")
                 .Register(*registry_)
                 .Add({});
  connections_ = &prometheus::BuildGauge()
                      .Name("tally_reducer_connections")
                      .Help("Open worker connections.")
                      .Register(*registry_)
                      .Add({});
  communicators_ = &prometheus::BuildGauge()
                        .Name("tally_reducer_communicators")
                        .Help("Communicators held: forming or formed, until the last member left.")
                        .Register(*registry_)
                        .Add({});
  reserved_ = &prometheus::BuildGauge()
                   .Name("tally_reducer_reserved_bytes")
                   .Help("Slice memory communicators hold against --max-memory.")
                   .Register(*registry_)
                   .Add({});
  comm_failures_ = &prometheus::BuildCounter()
                        .Name("tally_reducer_communicator_failures_total")
                        .Help("Communicators failed (their members were sent an Error).")
                        .Register(*registry_)
                        .Add({});
  auto& errors = prometheus::BuildCounter()
                     .Name("tally_reducer_errors_total")
                     .Help("Errors by cause; see docs/metrics.md for the causes.")
                     .Register(*registry_);
  // Every cause from the start, so a rate() over a cause that has not happened yet reads 0.
  for (int i = 0; i < reducer::kServerErrorCount; ++i) {
    errors_[i] =
        &errors.Add({{"cause", reducer::serverErrorName(static_cast<reducer::ServerError>(i))}});
  }
  auto& epochs = prometheus::BuildCounter()
                     .Name("tally_reducer_failover_epochs_total")
                     .Help(
                         "Membership changes rank 0 decided and relayed through this reducer, "
                         "once per communicator and epoch, by change.")
                     .Register(*registry_);
  for (int i = 0; i < reducer::kEpochChangeCount; ++i) {
    epochs_[i] =
        &epochs.Add({{"change", reducer::epochChangeName(static_cast<reducer::EpochChange>(i))}});
  }
  rejoins_ = &prometheus::BuildCounter()
                  .Name("tally_reducer_rejoins_total")
                  .Help(
                      "Communicators this reducer joined while they ran (a Hello epoch above "
                      "0), counted when they formed on it.")
                  .Register(*registry_)
                  .Add({});
  zerocopy_sends_ = &prometheus::BuildCounter()
                         .Name("tally_reducer_zerocopy_sends_total")
                         .Help("sendmsg calls with MSG_ZEROCOPY (--zerocopy on or always).")
                         .Register(*registry_)
                         .Add({});
  zerocopy_copied_ = &prometheus::BuildCounter()
                          .Name("tally_reducer_zerocopy_copied_total")
                          .Help(
                              "Zero-copy sends the kernel copied after all (loopback, a device "
                              "without scatter-gather), as its completions said.")
                          .Register(*registry_)
                          .Add({});
  zerocopy_refused_ = &prometheus::BuildCounter()
                           .Name("tally_reducer_zerocopy_refused_total")
                           .Help(
                               "Writes copied because the kernel refused to pin more pages "
                               "(ENOBUFS: RLIMIT_MEMLOCK or net.core.optmem_max).")
                           .Register(*registry_)
                           .Add({});
}

ReducerMetrics::~ReducerMetrics() = default;

void ReducerMetrics::connectionOpened() { connections_->Increment(); }
void ReducerMetrics::connectionClosed() { connections_->Decrement(); }
void ReducerMetrics::communicatorOpened() { communicators_->Increment(); }
void ReducerMetrics::communicatorClosed() { communicators_->Decrement(); }
void ReducerMetrics::communicatorFailed() { comm_failures_->Increment(); }
void ReducerMetrics::memoryReserved(uint64_t bytes) {
  reserved_->Increment(static_cast<double>(bytes));
}
void ReducerMetrics::memoryReleased(uint64_t bytes) {
  reserved_->Decrement(static_cast<double>(bytes));
}

void ReducerMetrics::sliceReduced(uint64_t input_bytes, std::chrono::nanoseconds latency) {
  // A double counts bytes exactly up to 2^53 (8 PiB); past that it rounds, harmlessly for rates.
  bytes_->Increment(static_cast<double>(input_bytes));
  slices_->Increment();
  latency_->observe(latency);
}

void ReducerMetrics::error(reducer::ServerError cause) {
  const auto i = static_cast<size_t>(cause);
  if (i < errors_.size()) errors_[i]->Increment();
}

void ReducerMetrics::epochDecided(reducer::EpochChange change) {
  const auto i = static_cast<size_t>(change);
  if (i < epochs_.size()) epochs_[i]->Increment();
}

void ReducerMetrics::communicatorRejoined() { rejoins_->Increment(); }

void ReducerMetrics::zerocopySent(uint64_t sends, uint64_t copied, uint64_t refused) {
  zerocopy_sends_->Increment(static_cast<double>(sends));
  zerocopy_copied_->Increment(static_cast<double>(copied));
  zerocopy_refused_->Increment(static_cast<double>(refused));
}

std::vector<std::shared_ptr<prometheus::Collectable>> ReducerMetrics::collectables() const {
  return {registry_, latency_};
}

std::string ReducerMetrics::render() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (auto& f : latency_->Collect()) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace tally::metrics
