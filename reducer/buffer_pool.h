// SPDX-License-Identifier: Apache-2.0
// Pooled, 64-byte aligned host buffers for the reducer's slice inputs and results.
//
// Capacities are powers of two from 4 KiB, so slices of one size reuse each other's memory. A
// Buffer goes back to its pool when its last reference drops; the pool keeps at most
// `max_cached_bytes` of free buffers and releases the rest. The server keeps one pool per engine
// shard, so the data path never meets a process-wide lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace tally::reducer {

class BufferPool;

// One block of memory on loan from a pool. Not copyable; shared through std::shared_ptr.
class Slab {
 public:
  Slab(uint8_t* data, size_t capacity, std::shared_ptr<BufferPool> pool)
      : data_(data), capacity_(capacity), pool_(std::move(pool)) {}
  ~Slab();
  Slab(const Slab&) = delete;
  Slab& operator=(const Slab&) = delete;

  uint8_t* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  uint8_t* data_;
  size_t capacity_;
  std::shared_ptr<BufferPool> pool_;
};
using Buffer = std::shared_ptr<Slab>;

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  static std::shared_ptr<BufferPool> create(size_t max_cached_bytes);
  ~BufferPool();

  // A buffer of at least `bytes` (>= 1). Thread-safe. Throws std::bad_alloc when memory runs out.
  Buffer get(size_t bytes);

  size_t cachedBytes();

 private:
  explicit BufferPool(size_t max_cached_bytes) : max_cached_bytes_(max_cached_bytes) {}
  friend class Slab;
  void give(uint8_t* data, size_t capacity);

  const size_t max_cached_bytes_;
  std::mutex mu_;
  std::map<size_t, std::vector<uint8_t*>> free_;  // capacity -> free blocks
  size_t cached_bytes_ = 0;
};

}  // namespace tally::reducer
