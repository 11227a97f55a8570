// Bytes of caller memory a posted call touches, for the abort path: NCCL deregisters memory
// (deregMr) before it frees it, and Tally must stop touching it first (docs/reliability.md).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

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

}  // namespace tally::plugin
