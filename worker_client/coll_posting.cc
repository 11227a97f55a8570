// SPDX-License-Identifier: Apache-2.0
// The posting side's answers to the keeper (posting.h): holding calls while a change is agreed,
// placing a lost reducer's slices again, installing a joined link, and keeping retired links
// until nothing can reach them.
#include <algorithm>

#include "worker_client/coll_client_impl.h"
#include "worker_client/coll_link.h"
#include "worker_client/coll_raw_link.h"

namespace tally::worker_client {

uint64_t CollClientImpl::holdCalls() {
  std::lock_guard<std::mutex> lock(post_mu_);
  hold_ = true;
  return next_seq_;
}

uint64_t CollClientImpl::nextCall() {
  std::lock_guard<std::mutex> lock(post_mu_);
  return next_seq_;
}

void CollClientImpl::releaseCalls() {
  std::lock_guard<std::mutex> lock(post_mu_);
  hold_ = false;
}

LossApplied CollClientImpl::applyLoss(const wire::Control& c, std::vector<LedgerEntry> orphans) {
  LossApplied out;
  std::string& cannot = out.cannot;
  const std::string address = linkAt(c.slot)->address();
  std::vector<SliceTask> prompt;  // sent at once, not at the boundary
  std::lock_guard<std::mutex> lock(post_mu_);
  MembershipChange change;
  change.kind = MembershipChange::Kind::kLost;
  change.epoch = c.epoch;
  change.slot = c.slot;
  change.boundary = c.next_call;
  if (!placement_.apply(change)) {
    cannot = "epoch " + std::to_string(c.epoch) + " loses slot " + std::to_string(c.slot) +
             ", which is not live here";
  }
  for (LedgerEntry& e : orphans) {
    const SliceTask& t = e.task;
    const bool committed = t.epoch == 0 ? t.call->seq < c.commit.calls
                                        : t.epoch <= c.commit.recovery_epoch;
    if (committed) {
      // Some rank had the lost reducer's Commit for it, so every rank has landed it.
      if (!e.landed && cannot.empty()) {
        cannot = "call " + std::to_string(t.call->seq) + " slice " + std::to_string(t.slice) +
                 " was committed by the lost reducer but never reached this rank";
      }
      // An early call's slice was counted done when it landed.
      if (!t.call->early) completeSlice(t.call.get());
      continue;
    }
    // An early call is sent again from its copy: its input is intact however the result came.
    if (e.touched && t.call->inPlace() && !t.call->early && cannot.empty()) {
      cannot = "in-place call " + std::to_string(t.call->seq) + ": the result of slice " +
               std::to_string(t.slice) + " from lost reducer " + address +
               " had already overwritten this rank's input, so it cannot be summed again "
               "(in-place calls survive a reducer's loss only before its results arrive)";
    }
    SliceTask again_task = t;
    again_task.epoch = 0;  // its class comes from the placement when it goes out
    again_task.prompt = false;
    // An early call that had this result is done, perhaps given back to the caller: the
    // result that comes again is dropped.
    if (t.call->early && e.landed) again_task.drop_result = true;
    if (sentAtOnce(t, c.first_call)) {
      prompt.push_back(std::move(again_task));
    } else {
      parked_[c.epoch].push_back(std::move(again_task));
    }
    ++out.again;
  }
  boundaries_.push_back(Boundary{c.epoch, c.next_call});
  catch_up_until_ = std::max(catch_up_until_, c.next_call);
  hold_ = false;
  out.live = placement_.liveCount();
  if (cannot.empty()) {
    out.at_once = prompt.size();
    sendPromptLocked(c.epoch, std::move(prompt));
    flushBoundariesLocked();
  }
  return out;
}

bool CollClientImpl::sentAtOnce(const SliceTask& t, uint64_t first_call) const {
  // An early call's slice, below F: every rank posted the call. A normal slice, or one sent
  // promptly before, is then in the lost reducer's books on every rank (unless committed, which
  // P and RC tell alike); a recovery slice sent at its boundary is only once every rank reached
  // that boundary.
  if (!t.call->early || t.call->seq >= first_call) return false;
  return t.epoch == 0 || t.prompt || placement_.boundaryOf(t.epoch) <= first_call;
}

void CollClientImpl::sendPromptLocked(uint32_t epoch, std::vector<SliceTask> tasks) {
  sortForSending(&tasks);
  for (SliceTask& t : tasks) {
    const Placement p = placement_.place(t.call->seq, t.slice, epoch);
    if (!p.placed) {
      // Every slot is empty: the keeper is failing the communicator.
      parked_[epoch].push_back(std::move(t));
      continue;
    }
    t.epoch = epoch;
    t.prompt = true;
    links_[p.slot]->post(std::move(t));
  }
}

uint32_t CollClientImpl::installLink(const wire::Control& c, std::shared_ptr<Link> link) {
  std::lock_guard<std::mutex> lock(post_mu_);
  {
    std::lock_guard<std::mutex> llock(links_mu_);
    keepRetiredLocked(std::move(links_[c.slot]));  // its books went with the loss
    links_[c.slot] = std::move(link);
  }
  MembershipChange change;
  change.kind = MembershipChange::Kind::kJoin;
  change.epoch = c.epoch;
  change.slot = c.slot;
  change.boundary = c.next_call;
  (void)placement_.apply(change);
  catch_up_until_ = std::max(catch_up_until_, c.next_call);
  hold_ = false;
  flushBoundariesLocked();
  return placement_.liveCount();
}

void CollClientImpl::compactPlacement() {
  // The keeper alone changes the placement, so it may look without the lock.
  constexpr size_t kFewChanges = 8;
  if (placement_.changes().size() <= kFewChanges) return;
  std::lock_guard<std::mutex> lock(post_mu_);
  // The oldest call a slice may still be placed for: one whose record someone besides calls_
  // holds (its request, a link's books, a parked or orphaned slice).
  uint64_t first = next_seq_;
  for (const std::shared_ptr<Call>& c : calls_) {
    if (c.use_count() > 1) first = std::min(first, c->seq);
  }
  placement_.compact(first);
}

std::shared_ptr<Link> CollClientImpl::linkAt(uint32_t slot) {
  std::lock_guard<std::mutex> lock(links_mu_);
  return links_[slot];
}

std::shared_ptr<Link> CollClientImpl::newLink(uint32_t slot, const std::string& address,
                                              std::unique_ptr<transport::Connection> conn, Fd fd,
                                              int window) {
  if (fd.valid()) {
    return std::make_shared<RawLink>(this, slot, address, std::move(fd), progress_.get(), window,
                                     options_.timeouts.io_ms, link_crc_);
  }
  return std::make_shared<ThreadedLink>(this, slot, address, std::move(conn), window,
                                        options_.timeouts.io_ms, link_crc_);
}

Status CollClientImpl::startLink(const std::shared_ptr<Link>& link) {
  TALLY_RETURN_IF_ERROR(link->start());
  if (auto* raw = dynamic_cast<RawLink*>(link.get())) return progress_->add(raw, raw->fd());
  return Status::ok();
}

void CollClientImpl::keepRetired(std::shared_ptr<Link> link) {
  std::lock_guard<std::mutex> lock(links_mu_);
  keepRetiredLocked(std::move(link));
}

void CollClientImpl::keepRetiredLocked(std::shared_ptr<Link> link) {
  link->detach();
  retired_.push_back(std::move(link));
}

void CollClientImpl::dropRetired() {
  std::vector<std::shared_ptr<Link>> gone;
  {
    std::lock_guard<std::mutex> lock(links_mu_);
    for (auto it = retired_.begin(); it != retired_.end();) {
      if (!(*it)->detached()) {
        ++it;
        continue;
      }
      gone.push_back(std::move(*it));
      it = retired_.erase(it);
    }
  }
  // Dropped here, with no lock held (a link's end takes its own locks).
}

}  // namespace tally::worker_client
