// SPDX-License-Identifier: Apache-2.0
// What the net and CollNet comms share about their requests: a fixed pool of request slots, and
// the range of caller memory each posted request touches.
//
// NCCL bounds the requests in flight per comm (NCCL_NET_MAX_REQUESTS, times maxRecvs on the send
// side), so a comm allocates its slots once and the data path never allocates one. acquire()
// returning nullptr is the "no room" case: the entry point then answers success with a NULL
// request and NCCL retries.
//
// NCCL deregisters memory (deregMr) before it frees it, and Tally must stop touching it first
// (docs/reliability.md): each request records the bytes it may read or write as a MemRange, and
// deregMr aborts the comm when an unfinished request overlaps the deregistered range.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace tally::plugin {

// Bytes [begin, end) of caller memory. Empty when begin == end.
struct MemRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;

  static MemRange of(const void* data, size_t bytes) {
    const auto b = reinterpret_cast<uintptr_t>(data);
    return MemRange{b, b + bytes};
  }
  // The smallest range holding both (a larger span is safe for the abort path).
  MemRange with(const MemRange& o) const {
    if (o.begin >= o.end) return *this;
    if (begin >= end) return o;
    return MemRange{std::min(begin, o.begin), std::max(end, o.end)};
  }
  bool overlaps(const MemRange& o) const {
    return begin < end && o.begin < o.end && begin < o.end && o.begin < end;
  }
};

// A fixed set of request slots. T must be default-constructible; a released slot is reset to T{}.
// Thread-safe: acquire and release may be called from any thread.
template <typename T>
class RequestPool {
 public:
  explicit RequestPool(size_t capacity) : slots_(new T[capacity]), capacity_(capacity) {
    free_.reserve(capacity);
    for (size_t i = capacity; i > 0; --i) free_.push_back(&slots_[i - 1]);
  }
  RequestPool(const RequestPool&) = delete;
  RequestPool& operator=(const RequestPool&) = delete;

  // A free slot, or nullptr when all are in use.
  T* acquire() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) return nullptr;
    T* slot = free_.back();
    free_.pop_back();
    return slot;
  }

  // Returns `slot` (from acquire) to the pool. Resets it outside the lock so that destroying a
  // transport request never runs under the pool mutex.
  void release(T* slot) {
    *slot = T{};
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(slot);
  }

  // True when `p` is one of this pool's slots (in use or not).
  bool owns(const void* p) const {
    auto* t = static_cast<const T*>(p);
    return t >= slots_.get() && t < slots_.get() + capacity_;
  }

  // Calls f(slot) for every slot, in use or not, under the pool's lock (slots in use are the
  // caller's to tell apart, e.g. by a magic set once posted).
  template <typename F>
  void forEachSlot(F f) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < capacity_; ++i) f(&slots_[i]);
  }

  size_t capacity() const { return capacity_; }
  size_t inUse() const {
    std::lock_guard<std::mutex> lock(mu_);
    return capacity_ - free_.size();
  }

 private:
  std::unique_ptr<T[]> slots_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::vector<T*> free_;
};

}  // namespace tally::plugin
