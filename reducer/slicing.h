// How a CollNet all-reduce call is cut into slices: one rule, used by the worker to cut and by the
// reducer to check, so both always agree.
//
// A call of total_count elements is cut into slices of equal size (the last may be shorter),
// spread round-robin over the reducers. Slices are at most TALLY_SLICE_BYTES, and a call is cut
// into at least kSlicesPerReducer slices per reducer, down to kMinSliceBytes: a reducer answers a
// slice only once every rank's copy of it has arrived, so several slices per reducer let it send
// the first results while later inputs are still arriving. With one slice per reducer a call
// costs a full receive plus a full send on every link; NCCL's CollNet calls are 256 KiB to a few
// MiB, so without this cut they would be one or two slices per reducer (docs/performance.md has
// the measurements behind the two constants).
#pragma once

#include <algorithm>
#include <cstdint>

namespace tally::reducer {

inline constexpr uint64_t kSlicesPerReducer = 8;
inline constexpr uint64_t kMinSliceBytes = 32 * 1024;

// Elements per slice (>= 1) for a call of total_count elements of elt_bytes each.
inline uint64_t sliceElements(uint64_t total_count, uint64_t elt_bytes, uint64_t max_slice_bytes,
                              uint64_t nreducers) {
  const uint64_t elt = std::max<uint64_t>(1, elt_bytes);
  const uint64_t max_elems = std::max<uint64_t>(1, max_slice_bytes / elt);
  const uint64_t min_elems =
      std::min(max_elems, std::max<uint64_t>(1, kMinSliceBytes / elt));
  const uint64_t pieces = std::max<uint64_t>(1, nreducers) * kSlicesPerReducer;
  const uint64_t even = (total_count + pieces - 1) / pieces;
  return std::clamp(even, min_elems, max_elems);
}

// A run of elements [offset, offset + count) of a call.
struct Span {
  uint64_t offset = 0;
  uint64_t count = 0;
  bool operator==(const Span&) const = default;
};

// Slice `index` of a call of total_count elements cut into slices of per_slice elements.
inline Span sliceSpan(uint64_t total_count, uint64_t per_slice, uint64_t index) {
  const uint64_t offset = index * per_slice;
  if (offset >= total_count) return Span{total_count, 0};
  return Span{offset, std::min(per_slice, total_count - offset)};
}

// All-gather and reduce-scatter (wire.h SliceHeader): rank `rank`'s part of a window of
// total_count elements that starts at element window_offset of the nranks x rank_count vector,
// in window-relative elements. Empty when the window misses the rank's part.
inline Span rankPart(uint64_t rank, uint64_t rank_count, uint64_t window_offset,
                     uint64_t total_count) {
  const uint64_t begin = rank * rank_count;  // global elements
  const uint64_t end = begin + rank_count;
  const uint64_t lo = std::max(begin, window_offset);
  const uint64_t hi = std::min(end, window_offset + total_count);
  if (hi <= lo) return Span{lo > window_offset ? std::min(lo - window_offset, total_count) : 0, 0};
  return Span{lo - window_offset, hi - lo};
}

// The piece of `slice` inside `part`: what a rank sends of an all-gather slice and receives of
// a reduce-scatter result. An empty piece sits at the slice's start, so both ends name it alike.
inline Span pieceOf(Span slice, Span part) {
  const uint64_t lo = std::max(slice.offset, part.offset);
  const uint64_t hi = std::min(slice.offset + slice.count, part.offset + part.count);
  if (hi <= lo) return Span{slice.offset, 0};
  return Span{lo, hi - lo};
}

}  // namespace tally::reducer
