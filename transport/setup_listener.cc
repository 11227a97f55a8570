// SPDX-License-Identifier: Apache-2.0
#include "transport/setup_listener.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/log.h"

namespace tally::transport {

using Clock = std::chrono::steady_clock;

SetupListener::SetupListener(std::string backend, std::unique_ptr<side::SideListener> side,
                             const ConnectHandle& handle, AdmitSetup admit)
    : backend_(std::move(backend)),
      side_(std::move(side)),
      handle_(handle),
      admit_(std::move(admit)) {}

Status SetupListener::accept(std::unique_ptr<Connection>* conn) {
  std::lock_guard<std::mutex> lock(mu_);
  *conn = nullptr;
  for (;;) {
    std::unique_ptr<Connection> tcp;
    TALLY_RETURN_IF_ERROR(side_->accept(&tcp));
    if (!tcp) break;
    std::unique_ptr<AcceptedSetup> setup;
    TALLY_RETURN_IF_ERROR(admit_(std::move(tcp), &setup));
    setups_.push_back(std::move(setup));
  }
  stepAllLocked();
  if (!ready_.empty()) {
    *conn = std::move(ready_.front());
    ready_.pop_front();
  }
  return Status::ok();
}

Status SetupListener::acceptWait(int64_t timeout_ms, std::unique_ptr<Connection>* conn) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0));
  int64_t nap_us = 50;
  for (;;) {
    TALLY_RETURN_IF_ERROR(accept(conn));
    if (*conn) return Status::ok();
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (timeout_ms >= 0 && left <= 0) return Status::ok();
    bool setting_up = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      setting_up = !setups_.empty();
    }
    if (setting_up) {
      std::this_thread::sleep_for(std::chrono::microseconds(nap_us));
      nap_us = std::min<int64_t>(nap_us * 2, 2000);
      continue;
    }
    nap_us = 50;
    std::unique_ptr<Connection> tcp;
    TALLY_RETURN_IF_ERROR(
        side_->acceptWait(timeout_ms < 0 ? 100 : std::min<int64_t>(left, 100), &tcp));
    if (!tcp) continue;
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<AcceptedSetup> setup;
    TALLY_RETURN_IF_ERROR(admit_(std::move(tcp), &setup));
    setups_.push_back(std::move(setup));
  }
}

void SetupListener::stepAllLocked() {
  for (size_t i = 0; i < setups_.size();) {
    std::unique_ptr<Connection> conn;
    Status status = setups_[i]->step(&conn);
    if (status.isOk() && !conn) {
      ++i;
      continue;
    }
    if (status.isOk()) {
      ready_.push_back(std::move(conn));
    } else {
      TALLY_WARN("%s: listener %s dropped peer %s: %s", backend_.c_str(),
                 side_->address().c_str(), setups_[i]->peerName().c_str(),
                 status.toString().c_str());
    }
    setups_.erase(setups_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

}  // namespace tally::transport
