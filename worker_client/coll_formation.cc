// SPDX-License-Identifier: Apache-2.0
#include "worker_client/coll_formation.h"

#include <condition_variable>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

namespace tally::worker_client {

Status formWithReducers(std::vector<JoinRequest> requests, int64_t grace_ms,
                        std::vector<FormedLink>* out) {
  const size_t n = requests.size();
  std::vector<FormedLink> formed(n);
  Cancel cancel{false};
  std::mutex mu;
  std::condition_variable cv;
  // Guarded by mu.
  std::vector<bool> ended(n, false);
  size_t ended_count = 0;
  bool rejected = false;
  size_t first_ready = n;  // the first reducer that said Ready (n: none yet)
  Clock::time_point first_ready_at;

  std::vector<std::thread> threads;
  threads.reserve(n);
  auto stopAll = [&] {
    cancel.store(true, std::memory_order_release);
    for (std::thread& t : threads) t.join();
  };
  for (size_t i = 0; i < n; ++i) {
    requests[i].cancel = &cancel;
    try {
      threads.emplace_back([&, i] {
        FormedLink f;
        f.window = static_cast<int>(requests[i].hello.window);
        f.status = joinReducer(requests[i], &f.conn, &f.fd, &f.window);
        std::lock_guard<std::mutex> lock(mu);
        if (f.status.isOk() && first_ready == n) {
          first_ready = i;
          first_ready_at = Clock::now();
        }
        if (f.status.code() == StatusCode::kInvalidUsage) rejected = true;
        formed[i] = std::move(f);
        ended[i] = true;
        ++ended_count;
        cv.notify_all();
      });
    } catch (const std::system_error& e) {
      stopAll();  // what the started joins opened closes with `formed`
      return Status::system("cannot start a thread to join reducer " + requests[i].address + ": " +
                            e.what());
    }
  }
  std::vector<bool> given_up(n, false);
  size_t ready_one = n;
  {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      if (ended_count == n || rejected) break;
      if (first_ready == n || grace_ms <= 0) {
        cv.wait(lock);
        continue;
      }
      const auto cutoff = first_ready_at + std::chrono::milliseconds(grace_ms);
      if (Clock::now() >= cutoff) {
        // Every join still under way is given up (a rejected configuration fails anyway).
        for (size_t i = 0; i < n; ++i) given_up[i] = !ended[i];
        break;
      }
      cv.wait_until(lock, cutoff);
    }
    ready_one = first_ready;
  }
  stopAll();
  for (size_t i = 0; i < n; ++i) {
    // A join given up may still have made it just before it looked at the flag: it is kept.
    if (!given_up[i] || formed[i].status.isOk()) continue;
    formed[i].status =
        Status::timeout("reducer " + requests[i].address + " not joined within " +
                        std::to_string(grace_ms) + " ms of reducer " + requests[ready_one].address +
                        "'s Ready (TALLY_REDUCER_TIMEOUT_MS): " + formed[i].status.message());
  }
  *out = std::move(formed);
  return Status::ok();
}

}  // namespace tally::worker_client
