// SPDX-License-Identifier: Apache-2.0
#include "transport/verbs/reg_cache.h"

#include <algorithm>
#include <utility>

namespace tally::transport::verbs {

RegistrationCache::Pin::Pin(Pin&& other) noexcept
    : cache_(std::move(other.cache_)), entry_(std::exchange(other.entry_, nullptr)) {}

RegistrationCache::Pin& RegistrationCache::Pin::operator=(Pin&& other) noexcept {
  if (this != &other) {
    reset();
    cache_ = std::move(other.cache_);
    entry_ = std::exchange(other.entry_, nullptr);
  }
  return *this;
}

// An entry's keys and range never change while it is pinned, so reading them needs no lock.
uint32_t RegistrationCache::Pin::lkey() const { return entry_->reg.lkey; }
uint32_t RegistrationCache::Pin::rkey() const { return entry_->reg.rkey; }
uint64_t RegistrationCache::Pin::base() const { return entry_->start; }
uint64_t RegistrationCache::Pin::length() const { return entry_->end - entry_->start; }

void RegistrationCache::Pin::reset() {
  if (entry_ != nullptr) cache_->release(std::exchange(entry_, nullptr));
  cache_.reset();
}

std::shared_ptr<RegistrationCache> RegistrationCache::create(RegisterFn reg, DeregisterFn dereg,
                                                             const RegCacheLimits& limits) {
  return std::shared_ptr<RegistrationCache>(
      new RegistrationCache(std::move(reg), std::move(dereg), limits));
}

RegistrationCache::RegistrationCache(RegisterFn reg, DeregisterFn dereg,
                                     const RegCacheLimits& limits)
    : reg_(std::move(reg)), dereg_(std::move(dereg)), limits_(limits) {}

RegistrationCache::~RegistrationCache() {
  // Pins hold the cache alive, so only unpinned entries are left here.
  for (Entry& entry : entries_) dereg_(entry.reg);
}

Status RegistrationCache::acquire(const void* addr, size_t length, MemoryType type, Pin* out) {
  const uint64_t first = reinterpret_cast<uintptr_t>(addr);
  const uint64_t last = first + std::max<uint64_t>(length, 1);  // exclusive
  // Host ranges grow to whole pages; device memory is registered as asked, since the pages
  // around a GPU allocation need not be mapped.
  const uint64_t mask = type == MemoryType::kHost ? limits_.alignment - 1 : 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->stale || it->type != type || it->start > first || it->end < last) continue;
    ++it->pins;
    ++stats_.hits;
    entries_.splice(entries_.begin(), entries_, it);  // most recently used first
    out->reset();
    out->cache_ = shared_from_this();
    out->entry_ = &entries_.front();
    return Status::ok();
  }
  const uint64_t own_start = first & ~mask;
  const uint64_t own_end = (last + mask) & ~mask;
  // Merge the unpinned neighbours: overlapping or adjacent entries of the same type.
  uint64_t start = own_start;
  uint64_t end = own_end;
  for (const Entry& e : entries_) {
    if (e.pins == 0 && !e.stale && e.type == type && e.start <= end && e.end >= start) {
      start = std::min(start, e.start);
      end = std::max(end, e.end);
    }
  }
  Registered reg;
  Status status = reg_(start, end - start, type, &reg);
  if (!status.isOk() && (start != own_start || end != own_end)) {
    start = own_start;
    end = own_end;
    status = reg_(start, end - start, type, &reg);
  }
  TALLY_RETURN_IF_ERROR(status);
  ++stats_.registrations;
  for (auto it = entries_.begin(); it != entries_.end();) {
    bool absorbed =
        it->pins == 0 && !it->stale && it->type == type && it->start >= start && it->end <= end;
    it = absorbed ? dropLocked(it) : std::next(it);
  }
  entries_.push_front(Entry{start, end, type, reg, 1, false});
  out->reset();
  out->cache_ = shared_from_this();
  out->entry_ = &entries_.front();
  return Status::ok();
}

void RegistrationCache::release(Entry* entry) {
  std::lock_guard<std::mutex> lock(mu_);
  if (--entry->pins > 0) return;
  auto it =
      std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return &e == entry; });
  if (entry->stale) {
    dropLocked(it);
    return;
  }
  trimLocked();
}

std::list<RegistrationCache::Entry>::iterator RegistrationCache::dropLocked(
    std::list<Entry>::iterator it) {
  dereg_(it->reg);
  ++stats_.deregistrations;
  return entries_.erase(it);
}

void RegistrationCache::trimLocked() {
  size_t count = 0;
  uint64_t bytes = 0;
  for (const Entry& e : entries_) {
    if (e.pins == 0) {
      ++count;
      bytes += e.end - e.start;
    }
  }
  // Walk from the least recently used end, dropping unpinned entries until within bounds.
  for (auto it = entries_.end(); it != entries_.begin() && (count > limits_.max_unpinned_entries ||
                                                            bytes > limits_.max_unpinned_bytes);) {
    --it;
    if (it->pins != 0) continue;
    --count;
    bytes -= it->end - it->start;
    it = dropLocked(it);
  }
}

void RegistrationCache::invalidate(const void* addr, size_t length) {
  const uint64_t first = reinterpret_cast<uintptr_t>(addr);
  const uint64_t last = first + std::max<uint64_t>(length, 1);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->start >= last || it->end <= first) {
      ++it;
    } else if (it->pins > 0) {
      it->stale = true;
      ++it;
    } else {
      it = dropLocked(it);
    }
  }
}

RegCacheStats RegistrationCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  RegCacheStats stats = stats_;
  stats.entries = entries_.size();
  for (const Entry& e : entries_) {
    if (e.pins > 0) {
      ++stats.pinned_entries;
    } else {
      stats.unpinned_bytes += e.end - e.start;
    }
  }
  return stats;
}

}  // namespace tally::transport::verbs
