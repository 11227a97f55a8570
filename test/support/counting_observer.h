// SPDX-License-Identifier: Apache-2.0
// A ServerObserver for tests: counts every event with atomics, no metrics library.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "reducer/observer.h"

namespace tally::reducer::test {

class CountingObserver final : public ServerObserver {
 public:
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> peak_connections{0};
  std::atomic<int64_t> communicators{0};
  std::atomic<int64_t> peak_communicators{0};
  std::atomic<uint64_t> communicator_failures{0};
  std::atomic<int64_t> reserved_bytes{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> slices{0};
  std::atomic<int64_t> max_latency_ns{0};
  std::atomic<int64_t> min_latency_ns{INT64_MAX};
  std::array<std::atomic<uint64_t>, kServerErrorCount> errors{};
  std::array<std::atomic<uint64_t>, kEpochChangeCount> epochs{};
  std::atomic<uint64_t> rejoins{0};
  std::atomic<uint64_t> zerocopy_sends{0};
  std::atomic<uint64_t> zerocopy_copied{0};
  std::atomic<uint64_t> zerocopy_refused{0};

  void connectionOpened() override { raise(connections, peak_connections); }
  void connectionClosed() override { connections.fetch_sub(1); }
  void communicatorOpened() override { raise(communicators, peak_communicators); }
  void communicatorClosed() override { communicators.fetch_sub(1); }
  void communicatorFailed() override { communicator_failures.fetch_add(1); }
  void memoryReserved(uint64_t n) override { reserved_bytes.fetch_add(static_cast<int64_t>(n)); }
  void memoryReleased(uint64_t n) override { reserved_bytes.fetch_sub(static_cast<int64_t>(n)); }
  void sliceReduced(uint64_t input_bytes, std::chrono::nanoseconds latency) override {
    bytes.fetch_add(input_bytes);
    slices.fetch_add(1);
    int64_t ns = latency.count();
    int64_t seen = max_latency_ns.load();
    while (ns > seen && !max_latency_ns.compare_exchange_weak(seen, ns)) {
    }
    seen = min_latency_ns.load();
    while (ns < seen && !min_latency_ns.compare_exchange_weak(seen, ns)) {
    }
  }
  void error(ServerError cause) override { errors[static_cast<size_t>(cause)].fetch_add(1); }
  void epochDecided(EpochChange change) override {
    epochs[static_cast<size_t>(change)].fetch_add(1);
  }
  void communicatorRejoined() override { rejoins.fetch_add(1); }
  void zerocopySent(uint64_t sends, uint64_t copied, uint64_t refused) override {
    zerocopy_sends.fetch_add(sends);
    zerocopy_copied.fetch_add(copied);
    zerocopy_refused.fetch_add(refused);
  }

  uint64_t errorCount(ServerError cause) const { return errors[static_cast<size_t>(cause)]; }
  uint64_t epochCount(EpochChange change) const { return epochs[static_cast<size_t>(change)]; }
  uint64_t totalErrors() const {
    uint64_t n = 0;
    for (auto& e : errors) n += e.load();
    return n;
  }

 private:
  static void raise(std::atomic<int64_t>& value, std::atomic<int64_t>& peak) {
    const int64_t now = value.fetch_add(1) + 1;
    int64_t seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
  }
};

// Polls `done` every millisecond until it holds or `timeout` passes; returns its last value.
inline bool waitUntil(const std::function<bool()>& done,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace tally::reducer::test
