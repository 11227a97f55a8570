// SPDX-License-Identifier: Apache-2.0
// The keeper (keeper.h): a rank's report on a proposed loss, and the wait before it when the loss
// is a drop as slow.
//
// A lost reducer's slices are summed again elsewhere from each rank's input. An in-place call's
// input is where its result lands, so a slice whose result began to land here cannot be
// (docs/failover.md, "In-place calls"). A dead reducer leaves no choice; a slow one still
// answers. So when the proposal drops a reducer as slow, every rank holds new calls as for any
// loss but keeps the link running until it holds no in-place slice whose result may still come:
// none is left, or none has begun to land and the reducer has been quiet for a slow window (its
// result can no longer be on its way: a slice another rank never sent is never summed). Calls
// that are not in place (all of NCCL's, which come through its own buffers) wait for nothing.
#include <algorithm>

#include "common/log.h"
#include "worker_client/keeper.h"

namespace tally::worker_client {
namespace wire = protocol::wire;

void Keeper::reportOnLoss(const wire::Control& c) {
  wire::Control r;
  r.kind = wire::ControlKind::kReport;
  r.change = c.change;
  r.epoch = c.epoch;
  r.slot = c.slot;
  // No call is posted until the decision: K is then past every rank's last call. First, so
  // that no post puts a slice in the lost link's books after they are taken.
  r.next_call = posting_->holdCalls();
  std::shared_ptr<Link> link = posting_->linkAt(c.slot);
  bool running = running_[c.slot];
  std::string why = lost_reasons_[c.slot];
  if (!suspected_[c.slot]) {
    // Another rank dropped it: this rank closes its connection too, so that nothing more comes
    // from it after this report.
    suspected_[c.slot] = true;
    lost_reasons_[c.slot] = c.reason;
    running = true;
    why = "dismissed: " + c.reason;
  }
  running_[c.slot] = false;
  if (running && droppedAsSlow(c.reason) && !link->ended()) {
    drain_ = Drain{r, why, nowNs()};
    return checkDrain(drain_->since_ns);  // most often there is nothing to wait for
  }
  if (running) link->retire(why, true);
  sendLossReport(r);
}

void Keeper::checkDrain(int64_t now_ns) {
  if (!drain_) return;
  const uint32_t slot = drain_->report.slot;
  std::shared_ptr<Link> link = posting_->linkAt(slot);
  const InPlaceOut out = link->inPlaceOut();
  const bool quiet = out.touched == 0 && now_ns - link->lastHeardNs() >= slow_.windowNs();
  // Well inside rank 0's wait for the reports (checkRounds).
  const int64_t bound_ns = std::max<int64_t>(options_.reducer_timeout_ms, 1000) * kNsPerMs / 2;
  const bool late = now_ns - drain_->since_ns >= bound_ns;
  if (out.sent > 0 && !quiet && !late && !link->ended()) return;
  TALLY_INFO(log::kColl,
             "CollNet rank %d: reducer %s (slot %u) ends after %lld ms, with %u in-place "
             "slices out (%u landing)",
             rank_, link->address().c_str(), slot,
             static_cast<long long>((now_ns - drain_->since_ns) / kNsPerMs), out.sent,
             out.touched);
  link->retire(drain_->why, true);
  wire::Control r = drain_->report;
  drain_.reset();
  sendLossReport(r);
}

void Keeper::sendLossReport(wire::Control r) {
  std::shared_ptr<Link> link = posting_->linkAt(r.slot);
  orphans_.clear();
  orphans_ = link->takeOrphans(&r.commit);
  sendToRankZero(r);
}

}  // namespace tally::worker_client
