// SPDX-License-Identifier: Apache-2.0
// The link of a slot whose reducer could not be joined when the communicator formed
// (docs/failover.md, "A reducer lost while a communicator forms"). It has ended before it began:
// the client reports it lost at once, and until the decision the slices placed on its slot wait
// in its books, to be placed again like any lost reducer's. Not a public interface.
#pragma once

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "worker_client/ledger.h"
#include "worker_client/link.h"

namespace tally::worker_client {

class DeadLink final : public Link {
 public:
  DeadLink(uint32_t slot, std::string address) : slot_(slot), address_(std::move(address)) {}

  Status start() override { return Status::ok(); }
  void post(SliceTask task) override {
    std::lock_guard<std::mutex> lock(mu_);
    ledger_.enqueue(std::move(task));
  }
  void sendControl(const wire::Frame&) override {}
  void ackIfBehind() override {}
  void requestBye() override {}
  bool waitSenderDone(int64_t) override { return true; }
  void postAbort(const std::string&) override {}
  void finishAbort(Clock::time_point, bool) override {}
  void closeConnection() override {}
  void stopAndJoin() override {}
  void retire(const std::string&, bool) override {}
  // Nothing was ever sent, so nothing was committed.
  std::vector<LedgerEntry> takeOrphans(wire::AckPoint* committed) override {
    std::lock_guard<std::mutex> lock(mu_);
    *committed = wire::AckPoint{};
    return ledger_.takeAll();
  }
  InPlaceOut inPlaceOut() const override { return {}; }
  bool ended() const override { return true; }
  int64_t lastHeardNs() const override { return 0; }
  int64_t busyNs(int64_t) const override { return 0; }
  const std::string& address() const override { return address_; }
  uint32_t slot() const override { return slot_; }

 private:
  const uint32_t slot_;
  const std::string address_;
  std::mutex mu_;
  SliceLedger ledger_;
};

}  // namespace tally::worker_client
