// SPDX-License-Identifier: Apache-2.0
#include "reducer/opening_budget.h"

namespace tally::reducer::server {

std::unique_ptr<OpeningBudget::Slot> OpeningBudget::enter() {
  std::unique_ptr<Slot> slot(new Slot(this));
  std::lock_guard<std::mutex> lock(mu_);
  while (limit_ > 0 && live_.size() >= limit_) {
    Slot* oldest = live_.front();
    live_.pop_front();
    oldest->listed_ = false;
    oldest->evicted_.store(true, std::memory_order_release);
  }
  slot->it_ = live_.insert(live_.end(), slot.get());
  slot->listed_ = true;
  return slot;
}

size_t OpeningBudget::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

void OpeningBudget::Slot::release() {
  std::lock_guard<std::mutex> lock(budget_->mu_);
  if (!listed_) return;
  budget_->live_.erase(it_);
  listed_ = false;
}

}  // namespace tally::reducer::server
