// SPDX-License-Identifier: Apache-2.0
#include "worker_client/coordinator.h"

#include <algorithm>
#include <cstdint>

namespace tally::worker_client {
namespace wire = protocol::wire;

Coordinator::Coordinator(int nranks, std::vector<std::string> addresses, int min_reducers)
    : nranks_(nranks),
      addresses_(std::move(addresses)),
      min_reducers_(min_reducers),
      live_(addresses_.size(), true) {}

uint32_t Coordinator::liveCount() const {
  return static_cast<uint32_t>(std::count(live_.begin(), live_.end(), true));
}

void Coordinator::suspect(uint32_t slot, const std::string& reason) {
  if (!live(slot)) return;
  if (round_ && round_->proposal.slot == slot && round_->proposal.change == wire::Change::kLost) {
    return;
  }
  for (const Pending& p : pending_) {
    if (p.slot == slot && p.change == wire::Change::kLost) return;
  }
  // A loss goes before a join that waits: the join can be offered again.
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [](const Pending& p) { return p.change == wire::Change::kJoin; }),
                 pending_.end());
  pending_.push_back(Pending{wire::Change::kLost, slot, addresses_[slot], reason});
}

void Coordinator::offerJoin(uint32_t slot, const std::string& address) {
  if (slot >= live_.size() || live_[slot] || round_ || !pending_.empty()) return;
  pending_.push_back(Pending{wire::Change::kJoin, slot, address, ""});
}

std::optional<wire::Control> Coordinator::propose() {
  if (round_ || pending_.empty()) return std::nullopt;
  const Pending p = pending_.front();
  pending_.pop_front();
  wire::Control c;
  c.kind = wire::ControlKind::kPropose;
  c.change = p.change;
  c.epoch = decided_ + 1;
  c.slot = p.slot;
  c.address = p.address;
  c.reason = p.reason;
  Round round;
  round.proposal = c;
  round.have.assign(static_cast<size_t>(nranks_), false);
  round.reports.resize(static_cast<size_t>(nranks_));
  round_ = std::move(round);
  return c;
}

std::optional<wire::Control> Coordinator::report(uint32_t from, const wire::Control& r,
                                                 bool* ignored) {
  *ignored = true;
  if (!round_ || r.kind != wire::ControlKind::kReport || r.epoch != round_->proposal.epoch ||
      r.change != round_->proposal.change || r.slot != round_->proposal.slot ||
      from >= round_->have.size() || round_->have[from]) {
    return std::nullopt;
  }
  *ignored = false;
  round_->have[from] = true;
  round_->reports[from] = r;
  if (++round_->count < static_cast<uint32_t>(nranks_)) return std::nullopt;
  wire::Control d = decide(*round_);
  round_.reset();
  return d;
}

std::optional<wire::Control> Coordinator::voidJoin(const std::string& why) {
  if (!joinRoundOpen()) return std::nullopt;
  wire::Control d = round_->proposal;
  d.kind = wire::ControlKind::kDecide;
  d.change = wire::Change::kVoid;
  d.reason = why;
  for (const wire::Control& r : round_->reports) d.next_call = std::max(d.next_call, r.next_call);
  decided_ = d.epoch;
  round_.reset();
  return d;
}

std::vector<uint32_t> Coordinator::missingReports() const {
  std::vector<uint32_t> out;
  if (!round_) return out;
  for (uint32_t r = 0; r < round_->have.size(); ++r) {
    if (!round_->have[r]) out.push_back(r);
  }
  return out;
}

std::string Coordinator::lostText() const {
  std::string text;
  for (const std::string& l : lost_) text += (text.empty() ? "" : ", ") + l;
  return text;
}

wire::Control Coordinator::decide(const Round& round) {
  const wire::Control& p = round.proposal;
  wire::Control d = p;
  d.kind = wire::ControlKind::kDecide;
  decided_ = p.epoch;
  // K: no rank has posted a call from it on (each stopped at its report), every rank can reach
  // it. F: every rank has posted every call below it. The commits: the furthest any rank heard
  // from the lost reducer.
  d.first_call = UINT64_MAX;
  for (const wire::Control& r : round.reports) {
    d.next_call = std::max(d.next_call, r.next_call);
    d.first_call = std::min(d.first_call, r.next_call);
    d.commit.calls = std::max(d.commit.calls, r.commit.calls);
    d.commit.recovery_epoch = std::max(d.commit.recovery_epoch, r.commit.recovery_epoch);
  }
  if (p.change == wire::Change::kLost) {
    live_[p.slot] = false;
    lost_.push_back(p.address + " (" + p.reason + ")");
    if (liveCount() < static_cast<uint32_t>(std::max(1, min_reducers_))) {
      d.change = wire::Change::kFail;
      d.reason = std::to_string(liveCount()) + " of " + std::to_string(live_.size()) +
                 " reducers left, fewer than TALLY_MIN_REDUCERS=" + std::to_string(min_reducers_);
    }
    return d;
  }
  // A join happens only when every rank joined the new reducer.
  for (const wire::Control& r : round.reports) {
    if (!r.ok) {
      d.change = wire::Change::kVoid;
      d.reason = r.reason;
      return d;
    }
  }
  live_[p.slot] = true;
  addresses_[p.slot] = p.address;
  return d;
}

}  // namespace tally::worker_client
