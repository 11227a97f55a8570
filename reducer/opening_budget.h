// SPDX-License-Identifier: Apache-2.0
// The reducer's budget of connections that have not joined a communicator yet:
// ones that have not proven the job token, or not sent their Hello. Such a peer has proven
// nothing, so it gets a small count of its own, apart from --max-connections (members): when the
// budget is full, a new connection takes the place of the oldest one, which is told to leave
// (evicted). Peers that connect and say nothing therefore cannot keep a job that holds the token
// out: a worker answers the Challenge and says Hello within milliseconds, and only `limit` newer
// connections arriving in that time could push it out.
//
// Any thread. Each connection holds its Slot from accept until it joins (release()) or closes
// (the destructor), and looks at evicted() on its tick.
#pragma once

#include <atomic>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>

namespace tally::reducer::server {

class OpeningBudget {
 public:
  class Slot {
   public:
    ~Slot() { release(); }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    // The budget was full and this was the oldest opening connection: it should close.
    bool evicted() const { return evicted_.load(std::memory_order_acquire); }
    // The connection joined a communicator (or closes): it leaves the budget. Idempotent.
    void release();

   private:
    friend class OpeningBudget;
    explicit Slot(OpeningBudget* budget) : budget_(budget) {}
    OpeningBudget* const budget_;
    std::list<Slot*>::iterator it_;
    bool listed_ = false;  // budget_->mu_
    std::atomic<bool> evicted_{false};
  };

  // 0 means no limit. Set before the first enter().
  void setLimit(size_t limit) { limit_ = limit; }
  size_t limit() const { return limit_; }
  // A connection starts its opening. When `limit` others are opening already, the oldest of
  // them is evicted (it leaves the budget at once and closes on its next tick).
  std::unique_ptr<Slot> enter();
  // Connections opening now (not counting evicted ones still closing).
  size_t size();

 private:
  size_t limit_ = 0;
  std::mutex mu_;
  std::list<Slot*> live_;  // oldest first
};

}  // namespace tally::reducer::server
