// SPDX-License-Identifier: Apache-2.0
#include "transport/network.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace tally::transport {

Status finishConnect(PendingConnection* pending, int64_t timeout_ms,
                     std::unique_ptr<Connection>* out) {
  if (pending == nullptr) return Status::internal("finishConnect: no pending connection");
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Short sleeps first, so a loopback connect finishes in well under a millisecond of waiting;
  // then up to 5 ms, so a peer that is not up yet costs little CPU.
  int64_t sleep_us = 50;
  for (;;) {
    std::unique_ptr<Connection> conn;
    TALLY_RETURN_IF_ERROR(pending->step(&conn));
    if (conn) {
      *out = std::move(conn);
      return Status::ok();
    }
    const int64_t waited_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    if (timeout_ms >= 0 && waited_ms >= timeout_ms) {
      return Status::timeout("connect did not finish within " + std::to_string(timeout_ms) +
                             " ms");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min<int64_t>(sleep_us * 2, 5000);
  }
}

}  // namespace tally::transport
