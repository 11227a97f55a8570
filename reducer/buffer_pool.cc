// SPDX-License-Identifier: Apache-2.0
#include "reducer/buffer_pool.h"

#include "common/small_pool.h"

#include <bit>
#include <cstdlib>
#include <new>

namespace tally::reducer {
namespace {

constexpr size_t kMinCapacity = 4096;
constexpr size_t kAlign = 64;

size_t capacityFor(size_t bytes) {
  return std::bit_ceil(bytes < kMinCapacity ? kMinCapacity : bytes);
}

}  // namespace

Slab::~Slab() { pool_->give(data_, capacity_); }

std::shared_ptr<BufferPool> BufferPool::create(size_t max_cached_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_cached_bytes));
}

BufferPool::~BufferPool() {
  for (auto& [cap, blocks] : free_) {
    for (uint8_t* b : blocks) std::free(b);
  }
}

Buffer BufferPool::get(size_t bytes) {
  const size_t cap = capacityFor(bytes);
  uint8_t* data = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(cap);
    if (it != free_.end() && !it->second.empty()) {
      data = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= cap;
    }
  }
  if (data == nullptr) {
    data = static_cast<uint8_t*>(std::aligned_alloc(kAlign, cap));
    if (data == nullptr) throw std::bad_alloc();
  }
  // The Slab keeps the pool alive, so buffers may outlive whoever made the pool.
  return std::allocate_shared<Slab>(PoolAllocator<Slab>(), data, cap, shared_from_this());
}

void BufferPool::give(uint8_t* data, size_t capacity) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_bytes_ + capacity <= max_cached_bytes_) {
      free_[capacity].push_back(data);
      cached_bytes_ += capacity;
      return;
    }
  }
  std::free(data);
}

size_t BufferPool::cachedBytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_bytes_;
}

}  // namespace tally::reducer
