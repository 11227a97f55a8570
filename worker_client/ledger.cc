// SPDX-License-Identifier: Apache-2.0
#include "worker_client/ledger.h"

#include <algorithm>

namespace tally::worker_client {

void completeSlice(Call* call) {
  if (call->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    call->shared->calls_in_flight.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void SliceLedger::countUnlanded(const SliceTask& task) {
  if (task.epoch != 0) {
    ++unlanded_epochs_[task.epoch];
    return;
  }
  const uint64_t seq = task.call->seq;
  if (!unlanded_calls_.empty() && unlanded_calls_.back().first == seq) {
    ++unlanded_calls_.back().second;
    return;
  }
  // Normal slices come in call order, so the list stays sorted; one that does not (a broken
  // caller) is filed in its place.
  auto it = std::lower_bound(unlanded_calls_.begin(), unlanded_calls_.end(),
                             std::make_pair(seq, uint32_t{0}));
  if (it != unlanded_calls_.end() && it->first == seq) {
    ++it->second;
  } else {
    unlanded_calls_.insert(it, {seq, 1});
  }
}

void SliceLedger::uncountUnlanded(const SliceTask& task) {
  if (task.epoch != 0) {
    auto it = unlanded_epochs_.find(task.epoch);
    if (it != unlanded_epochs_.end() && --it->second == 0) unlanded_epochs_.erase(it);
    return;
  }
  const uint64_t seq = task.call->seq;
  auto it = std::lower_bound(unlanded_calls_.begin(), unlanded_calls_.end(),
                             std::make_pair(seq, uint32_t{0}));
  if (it == unlanded_calls_.end() || it->first != seq) return;
  if (--it->second == 0) unlanded_calls_.erase(it);
}

void SliceLedger::enqueue(SliceTask task) {
  countUnlanded(task);
  queue_.push_back(std::move(task));
}

void SliceLedger::enqueuePrompt(SliceTask task) {
  countUnlanded(task);
  prompt_.push_back(std::move(task));
}

SliceTask SliceLedger::popPrompt() {
  SliceTask t = std::move(prompt_.front());
  prompt_.pop_front();
  return t;
}

SliceTask SliceLedger::popQueued() {
  SliceTask t = std::move(queue_.front());
  queue_.pop_front();
  return t;
}

LedgerEntry& SliceLedger::record(SliceTask task, bool from_queue) {
  if (!from_queue) countUnlanded(task);
  if (task.epoch != 0) ++recovery_entries_;
  const Key key{task.call->seq, task.slice};
  LedgerEntry& e = entries_[key];
  e = LedgerEntry{};
  e.task = std::move(task);
  return e;
}

LedgerEntry* SliceLedger::find(uint64_t seq, uint32_t slice) {
  auto it = entries_.find(Key{seq, slice});
  return it == entries_.end() ? nullptr : &it->second;
}

void SliceLedger::land(LedgerEntry* entry) {
  if (entry->landed) return;
  entry->landed = true;
  uncountUnlanded(entry->task);
  // An early call is done slice by slice as they land (call.h, kEarlyDoneBytes); a slice sent
  // again after that was counted the first time.
  if (entry->task.call->early && !entry->task.drop_result) completeSlice(entry->task.call.get());
  if (entry->task.epoch != 0) {
    landed_epoch_ = std::max(landed_epoch_, entry->task.epoch);
  } else {
    const uint64_t seq = entry->task.call->seq;
    if (!landed_any_call_ || seq > landed_call_) landed_call_ = seq;
    landed_any_call_ = true;
    if (!entry->task.call->early && (!urgent_any_ || seq > urgent_call_)) {
      urgent_call_ = seq;
      urgent_any_ = true;
    }
  }
}

std::optional<wire::AckPoint> SliceLedger::nextAck(uint64_t posted_through,
                                                   uint32_t applied_epoch, bool only_urgent) {
  const bool urgent = (urgent_any_ && urgent_call_ >= acked_.calls) ||
                      landed_epoch_ > acked_.recovery_epoch;
  if (only_urgent && !urgent) return std::nullopt;
  const wire::AckPoint p = ackPoint(posted_through, applied_epoch);
  const bool calls = landed_any_call_ && landed_call_ >= acked_.calls && p.calls > acked_.calls;
  const bool epochs = landed_epoch_ > acked_.recovery_epoch && p.recovery_epoch > acked_.recovery_epoch;
  if (!calls && !epochs) return std::nullopt;
  acked_.calls = std::max(acked_.calls, p.calls);
  acked_.recovery_epoch = std::max(acked_.recovery_epoch, p.recovery_epoch);
  return acked_;
}

Status SliceLedger::commit(const wire::AckPoint& given, const std::string& reducer) {
  // Commits come as messages and with results, which two threads of the reducer may queue in
  // either order: one that raises nothing is stale, not wrong.
  const wire::AckPoint point{std::max(given.calls, committed_.calls),
                             std::max(given.recovery_epoch, committed_.recovery_epoch)};
  if (point == committed_) return Status::ok();
  auto covered = [&](const LedgerEntry& e) {
    return e.task.epoch == 0 ? e.task.call->seq < point.calls
                             : e.task.epoch <= point.recovery_epoch;
  };
  // Checked before anything changes: a Commit ahead of this rank's own results breaks the
  // protocol (the reducer counted an Ack this rank never sent).
  const bool scan_all = recovery_entries_ > 0 && point.recovery_epoch > committed_.recovery_epoch;
  for (const auto& [key, e] : entries_) {
    if (!scan_all && key.first >= point.calls) break;
    if (covered(e) && !e.landed) {
      return Status::remote("reducer " + reducer + " committed call " +
                            std::to_string(key.first) + " slice " + std::to_string(key.second) +
                            " before its result reached this rank");
    }
  }
  for (const auto* queue : {&queue_, &prompt_}) {
    for (const auto& q : *queue) {
      if (q.epoch == 0 ? q.call->seq < point.calls : q.epoch <= point.recovery_epoch) {
        return Status::remote("reducer " + reducer + " committed call " +
                              std::to_string(q.call->seq) + " before this rank sent all of it");
      }
    }
  }
  // The least of every rank's Ack never passes this rank's own: a Commit past it covers
  // slices not even sent (or posted) yet.
  if (point.calls > acked_.calls || point.recovery_epoch > acked_.recovery_epoch) {
    return Status::remote("reducer " + reducer + " sent Commit(" + std::to_string(given.calls) +
                          ", " + std::to_string(given.recovery_epoch) + ") past this rank's Ack(" +
                          std::to_string(acked_.calls) + ", " +
                          std::to_string(acked_.recovery_epoch) + ")");
  }
  committed_ = point;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (!scan_all && it->first.first >= point.calls) break;
    if (!covered(it->second)) {
      ++it;
      continue;
    }
    if (it->second.task.epoch != 0) --recovery_entries_;
    const bool counted = it->second.task.call->early;  // at landing
    if (it->second.last_message > released_) {
      held_.push_back(Held{it->second.last_message, std::move(it->second.task.call), !counted});
    } else if (!counted) {
      completeSlice(it->second.task.call.get());
    }
    it = entries_.erase(it);
  }
  return Status::ok();
}

void SliceLedger::letGo(Held& h) {
  if (h.count_done) completeSlice(h.call.get());
  h.call.reset();
}

void SliceLedger::release(uint64_t messages_released) {
  released_ = std::max(released_, messages_released);
  for (size_t i = 0; i < held_.size();) {
    if (held_[i].last_message > released_) {
      ++i;
      continue;
    }
    letGo(held_[i]);
    held_[i] = std::move(held_.back());
    held_.pop_back();
  }
}

void SliceLedger::releaseAll() {
  for (Held& h : held_) letGo(h);
  held_.clear();
}

wire::AckPoint SliceLedger::ackPoint(uint64_t posted_through, uint32_t applied_epoch) const {
  wire::AckPoint p;
  p.calls = unlanded_calls_.empty() ? posted_through
                                    : std::min(posted_through, unlanded_calls_.front().first);
  p.recovery_epoch = applied_epoch;
  if (!unlanded_epochs_.empty()) {
    p.recovery_epoch = std::min(applied_epoch, unlanded_epochs_.begin()->first - 1);
  }
  return p;
}

InPlaceOut SliceLedger::inPlaceOut() const {
  InPlaceOut out;
  for (const auto& [key, e] : entries_) {
    if (e.task.call->early || !e.task.call->inPlace()) continue;
    ++out.sent;
    if (e.touched) ++out.touched;
  }
  return out;
}

std::vector<LedgerEntry> SliceLedger::takeAll() {
  std::vector<LedgerEntry> out;
  out.reserve(prompt_.size() + queue_.size() + entries_.size());
  for (SliceTask& t : prompt_) {
    LedgerEntry e;
    e.task = std::move(t);
    out.push_back(std::move(e));
  }
  for (SliceTask& t : queue_) {
    LedgerEntry e;
    e.task = std::move(t);
    out.push_back(std::move(e));
  }
  for (auto& [key, e] : entries_) out.push_back(std::move(e));
  queue_.clear();
  prompt_.clear();
  entries_.clear();
  unlanded_calls_.clear();
  unlanded_epochs_.clear();
  recovery_entries_ = 0;
  landed_any_call_ = false;
  urgent_any_ = false;
  landed_epoch_ = 0;
  return out;
}

}  // namespace tally::worker_client
