// SPDX-License-Identifier: Apache-2.0
#include "common/small_pool.h"

#include <mutex>

namespace tally::small_pool {
namespace {

constexpr size_t kClasses = kMaxBytes / kGranule;

struct FreeBlock {
  FreeBlock* next;
};

struct SizeClass {
  std::mutex mu;
  FreeBlock* head = nullptr;
  size_t count = 0;
};

// Never destroyed: threads may still free blocks while the process exits.
SizeClass* classes() {
  static SizeClass* all = new SizeClass[kClasses];
  return all;
}

size_t classOf(size_t bytes) { return bytes == 0 ? 0 : (bytes - 1) / kGranule; }

}  // namespace

void* allocate(size_t bytes) {
  if (bytes > kMaxBytes) return ::operator new(bytes);
  const size_t c = classOf(bytes);
  SizeClass& sc = classes()[c];
  {
    std::lock_guard<std::mutex> lock(sc.mu);
    if (FreeBlock* b = sc.head) {
      sc.head = b->next;
      --sc.count;
      return b;
    }
  }
  return ::operator new((c + 1) * kGranule);
}

void deallocate(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes > kMaxBytes) {
    ::operator delete(p);
    return;
  }
  SizeClass& sc = classes()[classOf(bytes)];
  {
    std::lock_guard<std::mutex> lock(sc.mu);
    if (sc.count < kMaxCachedPerClass) {
      sc.head = new (p) FreeBlock{sc.head};
      ++sc.count;
      return;
    }
  }
  ::operator delete(p);
}

size_t cachedBlocks() {
  size_t n = 0;
  for (size_t c = 0; c < kClasses; ++c) {
    std::lock_guard<std::mutex> lock(classes()[c].mu);
    n += classes()[c].count;
  }
  return n;
}

}  // namespace tally::small_pool
