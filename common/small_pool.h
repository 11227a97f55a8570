// SPDX-License-Identifier: Apache-2.0
// Small blocks for the data path, reused instead of taken from the heap each time.
//
// Per-call records (transport requests, queue entries, map nodes) are a few dozen to a few
// hundred bytes and live for one call. They come from per-size free lists here: a block freed on
// one thread is reused by the next allocation of its size on any thread, so once a communicator
// is warm its calls take nothing from the heap. Blocks up to kMaxBytes are pooled (in classes of
// kGranule bytes); larger ones go to operator new. Each class keeps at most kMaxCachedPerClass
// free blocks and returns the rest to the heap, so a burst does not pin memory for good.
#pragma once

#include <cstddef>
#include <new>

namespace tally::small_pool {

inline constexpr size_t kGranule = 64;
inline constexpr size_t kMaxBytes = 1024;
inline constexpr size_t kMaxCachedPerClass = 4096;

// Thread-safe. Blocks are aligned to alignof(std::max_align_t). Throws std::bad_alloc.
void* allocate(size_t bytes);
// `bytes` must be the size given to allocate.
void deallocate(void* p, size_t bytes) noexcept;
// Free blocks held by the pool, all classes together (for tests).
size_t cachedBlocks();

}  // namespace tally::small_pool

namespace tally {

// A standard allocator over small_pool, for containers and allocate_shared on the data path.
template <typename T>
struct PoolAllocator {
  using value_type = T;
  static_assert(alignof(T) <= alignof(std::max_align_t), "pool blocks are max_align_t aligned");

  PoolAllocator() noexcept = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}  // NOLINT: rebinding is implicit by design

  T* allocate(size_t n) { return static_cast<T*>(small_pool::allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { small_pool::deallocate(p, n * sizeof(T)); }

  template <typename U>
  bool operator==(const PoolAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace tally

// Inside a class: its objects (through new/delete, e.g. std::make_unique) come from small_pool.
#define TALLY_POOLED_NEW(Class)                                                             \
  static void* operator new(size_t bytes) { return ::tally::small_pool::allocate(bytes); } \
  static void operator delete(void* p, size_t bytes) noexcept {                            \
    ::tally::small_pool::deallocate(p, bytes);                                             \
  }                                                                                        \
  static_assert(true, "")
