// SPDX-License-Identifier: Apache-2.0
// A cache of memory registrations, keyed by address range.
//
// RDMA needs every buffer registered (pinned, with keys the device knows) and registering costs
// a system call plus page pinning, so registrations are shared and kept.
//
// Policy
//   acquire(addr, len) hits when one live entry of the same memory type contains the whole
//   range. Otherwise the range (host memory: grown to whole pages) is registered anew; unpinned
//   entries it overlaps or touches (adjacent) are merged into it: the new registration covers
//   their union and they are deregistered. Pinned entries are never merged or re-registered, so
//   a new entry may overlap a pinned one. If registering the union fails (part of it may no
//   longer be mapped), only the requested range is registered.
//   Every acquire pins its entry until the Pin is released. An entry whose last pin goes away
//   stays cached (least recently used first out) while the unpinned entries stay within
//   max_unpinned_entries and max_unpinned_bytes; with a bound of 0 it is deregistered at once.
//   invalidate(addr, len) drops every entry overlapping the range: unpinned ones at once, pinned
//   ones when their last pin is released (they are no longer handed out).
//
// Retention and freed memory: a registration pins the physical pages it was made on. Memory that
// is freed and mapped again at the same address gets new pages, and a cached unpinned entry for
// it would point at the old ones. Keep the unpinned bounds at 0 (the verbs transport's default)
// unless the buffers passed without a MemoryRegion live as long as the connection, or call
// invalidate() when they are freed.
//
// Threads: every method may be called from any thread; one mutex guards the cache, and the
// registrar runs under it (registrations are serialized). Lookup is a scan, most recently used
// first: the cache holds tens to a few thousand entries.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>

#include "common/status.h"
#include "transport/transport.h"

namespace tally::transport::verbs {

// What the registrar returns for a range: the device's keys and an opaque handle (an ibv_mr*).
struct Registered {
  void* handle = nullptr;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

// Registers [addr, addr+length) of `type`, or deregisters a result of it.
using RegisterFn =
    std::function<Status(uint64_t addr, uint64_t length, MemoryType type, Registered* out)>;
using DeregisterFn = std::function<void(const Registered&)>;

struct RegCacheLimits {
  size_t max_unpinned_entries = 0;
  uint64_t max_unpinned_bytes = 0;
  // Host registrations cover whole pages of this size (a power of two); kCuda ranges are
  // registered exactly.
  uint64_t alignment = 4096;
};

struct RegCacheStats {
  uint64_t hits = 0;
  uint64_t registrations = 0;
  uint64_t deregistrations = 0;
  size_t entries = 0;  // live, including stale pinned ones
  size_t pinned_entries = 0;
  uint64_t unpinned_bytes = 0;
};

class RegistrationCache : public std::enable_shared_from_this<RegistrationCache> {
  struct Entry;

 public:
  // One reference to a cached registration; released when destroyed. Move-only.
  class Pin {
   public:
    Pin() = default;
    Pin(Pin&& other) noexcept;
    Pin& operator=(Pin&& other) noexcept;
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;
    ~Pin() { reset(); }

    explicit operator bool() const { return entry_ != nullptr; }
    uint32_t lkey() const;
    uint32_t rkey() const;
    uint64_t base() const;    // first byte the registration covers
    uint64_t length() const;  // bytes it covers
    void reset();

   private:
    friend class RegistrationCache;
    std::shared_ptr<RegistrationCache> cache_;
    Entry* entry_ = nullptr;
  };

  static std::shared_ptr<RegistrationCache> create(RegisterFn reg, DeregisterFn dereg,
                                                   const RegCacheLimits& limits);
  ~RegistrationCache();

  // A pin on a registration covering [addr, addr+length); length 0 is treated as 1 byte. Fails
  // with the registrar's Status; *out is untouched then.
  Status acquire(const void* addr, size_t length, MemoryType type, Pin* out);
  void invalidate(const void* addr, size_t length);
  RegCacheStats stats() const;

 private:
  struct Entry {
    uint64_t start = 0;
    uint64_t end = 0;  // exclusive
    MemoryType type = MemoryType::kHost;
    Registered reg;
    int pins = 0;
    bool stale = false;  // invalidated while pinned: never handed out again
  };

  RegistrationCache(RegisterFn reg, DeregisterFn dereg, const RegCacheLimits& limits);
  void release(Entry* entry);
  // Deregisters and forgets the unpinned entry at `it`.
  std::list<Entry>::iterator dropLocked(std::list<Entry>::iterator it);
  void trimLocked();

  const RegisterFn reg_;
  const DeregisterFn dereg_;
  const RegCacheLimits limits_;
  mutable std::mutex mu_;
  std::list<Entry> entries_;  // most recently used first; guarded by mu_
  RegCacheStats stats_;       // guarded by mu_ (entries/pinned/bytes computed on read)
};

}  // namespace tally::transport::verbs
