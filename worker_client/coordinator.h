// SPDX-License-Identifier: Apache-2.0
// Rank 0's part of a communicator's membership changes (docs/failover.md, "One epoch change"):
// it takes suspicions and join offers, proposes one change at a time, gathers every rank's
// report and decides. Pure logic: no I/O, no clock of its own, no lock; the client's keeper
// thread drives it and sends what it returns.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "protocol/wire.h"

namespace tally::worker_client {
namespace wire = protocol::wire;

class Coordinator {
 public:
  // `addresses[s]`: slot s's reducer as the communicator formed. A decision leaving fewer than
  // min_reducers live slots fails the communicator.
  Coordinator(int nranks, std::vector<std::string> addresses, int min_reducers);

  // A suspicion of slot `slot`'s reducer, by any rank. Ignored when the slot is empty, or
  // already suspected or being proposed.
  void suspect(uint32_t slot, const std::string& reason);
  // Offers `address` for empty slot `slot`; ignored unless nothing else waits or is under way.
  void offerJoin(uint32_t slot, const std::string& address);

  // The next proposal, when none is under way and something waits; its epoch follows the last
  // decided one. Send it to every rank (this one included).
  std::optional<wire::Control> propose();
  // A rank's report. Returns the decision once every rank has reported on the proposal under
  // way; then the round is closed. Reports for other epochs, or a second one from the same
  // rank, are ignored (*ignored says so, for the caller's log).
  std::optional<wire::Control> report(uint32_t from, const wire::Control& r, bool* ignored);

  bool roundOpen() const { return round_.has_value(); }
  // The round under way is a join's.
  bool joinRoundOpen() const {
    return round_ && round_->proposal.change == wire::Change::kJoin;
  }
  // Ends the join round under way without the join: the decision (Void, with `why`). A loss
  // goes before a join: the keeper calls this when a suspicion comes during a join's round, or
  // when its reports are late.
  std::optional<wire::Control> voidJoin(const std::string& why);
  // Nothing under way and nothing waiting.
  bool idle() const { return !round_ && pending_.empty(); }
  uint32_t decidedEpoch() const { return decided_; }
  // The ranks the proposal under way has no report from yet, for the error when it times out.
  std::vector<uint32_t> missingReports() const;
  bool live(uint32_t slot) const { return slot < live_.size() && live_[slot]; }
  uint32_t liveCount() const;
  // Every reducer lost so far, with why: "10.0.0.9:2222 (connection reset), ...".
  std::string lostText() const;

 private:
  struct Pending {
    wire::Change change = wire::Change::kLost;
    uint32_t slot = 0;
    std::string address;
    std::string reason;
  };
  struct Round {
    wire::Control proposal;
    std::vector<bool> have;
    std::vector<wire::Control> reports;
    uint32_t count = 0;
  };
  wire::Control decide(const Round& round);

  const int nranks_;
  std::vector<std::string> addresses_;  // per slot, as it is now
  const int min_reducers_;
  std::vector<bool> live_;
  std::deque<Pending> pending_;
  std::optional<Round> round_;
  uint32_t decided_ = 0;
  std::vector<std::string> lost_;  // "address (reason)", in the order lost
};

}  // namespace tally::worker_client
