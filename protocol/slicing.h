// SPDX-License-Identifier: Apache-2.0
// How a CollNet call is cut into slices: one rule, used by the worker to cut and by the reducer
// to check, so both always agree.
//
// A call of total_count elements is cut into slices of equal size (the last may be shorter),
// spread round-robin over the reducers. A communicator's SlicePlan (carried in every Hello, the
// same on every rank) bounds them: at most max_slice_bytes (TALLY_SLICE_BYTES), and at least
// per_reducer slices per reducer, down to min_slice_bytes. A reducer answers a slice only once
// every rank's copy of it has arrived, so several slices per reducer let it send the first
// results while later inputs are still arriving: on a slow link that hides most of the
// store-and-forward delay. Every slice costs both sides a fixed amount of CPU, though, so where
// the CPU and not the link is the limit (fast links, loopback) fewer, larger slices win
// (docs/performance.md has the measurements behind both plans).
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/params.h"

namespace tally::protocol {

// The plan for links slower than kFastLinkMbps: at least kSlicesPerReducer slices per reducer,
// none under kMinSliceBytes, or kFastMinSliceBytes where a millisecond of the link carries more
// than kSlowLinkSliceLimit (above 1048 Mbit/s). Each slice costs both sides a few syscalls and
// wake-ups, tens of microseconds on a virtualized host, but delays its result by its own
// transfer time and, with a call done only once its Commit has come back, the pipeline's start
// and end with it: at 1 Gbit/s a 4 MiB all-reduce moved 1.36-1.44x Gloo's with 32 KiB slices
// against 1.21-1.27x with 128 KiB, for about 30% more reducer CPU per GiB (docs/performance.md).
// The step between, 64 KiB, is skipped: it matched 32 KiB under cubic at 400 Mbit/s and stalled
// under BBR, where a 1 MiB call with 64 KiB slices took twice as long (and 63 or 65 KiB did
// not).
inline constexpr uint32_t kSlicesPerReducer = 8;
inline constexpr uint64_t kMinSliceBytes = 32 * 1024;
inline constexpr uint64_t kSlowLinkSliceLimit = 128 * 1024;
// The plan for fast links and loopback.
inline constexpr uint32_t kFastSlicesPerReducer = 2;
inline constexpr uint64_t kFastMinSliceBytes = 128 * 1024;
inline constexpr int kFastLinkMbps = 25000;
// Hello bounds (wire.h).
inline constexpr uint32_t kMaxSlicesPerReducer = 64;
// The largest slice when TALLY_SLICE_BYTES is not set: its default in the parameter registry.
inline constexpr uint64_t kDefaultSliceBytes = paramDefaultBytes("TALLY_SLICE_BYTES");
static_assert(paramDefaultBytes("TALLY_SLICE_BYTES") > 0,
              "TALLY_SLICE_BYTES needs a plain default");

struct SlicePlan {
  uint64_t max_slice_bytes = kDefaultSliceBytes;
  uint32_t per_reducer = kSlicesPerReducer;
  uint64_t min_slice_bytes = kMinSliceBytes;
  bool operator==(const SlicePlan&) const = default;
};

// The smallest slice of the slow-link plan for a link of link_mbps (0: unknown).
inline constexpr uint64_t slowLinkMinSliceBytes(int link_mbps) {
  const uint64_t per_millisecond = link_mbps > 0 ? uint64_t(link_mbps) * 1000 / 8 : 0;  // bytes
  return per_millisecond > kSlowLinkSliceLimit ? kFastMinSliceBytes : kMinSliceBytes;
}

// The plan TALLY_SLICES_PER_REDUCER and TALLY_MIN_SLICE_BYTES ask for (0: chosen here from the
// link: `loopback`, or its speed in Mb/s, 0 when unknown).
inline SlicePlan choosePlan(uint64_t max_slice_bytes, uint32_t per_reducer,
                            uint64_t min_slice_bytes, bool loopback, int link_mbps) {
  const bool fast = loopback || link_mbps >= kFastLinkMbps;
  SlicePlan p;
  p.max_slice_bytes = max_slice_bytes;
  p.per_reducer = per_reducer != 0 ? per_reducer : fast ? kFastSlicesPerReducer : kSlicesPerReducer;
  p.min_slice_bytes = min_slice_bytes != 0 ? min_slice_bytes
                      : fast               ? kFastMinSliceBytes
                                           : slowLinkMinSliceBytes(link_mbps);
  return p;
}

// Elements per slice (>= 1) for a call of total_count elements of elt_bytes each.
inline uint64_t sliceElements(uint64_t total_count, uint64_t elt_bytes, const SlicePlan& plan,
                              uint64_t nreducers) {
  const uint64_t elt = std::max<uint64_t>(1, elt_bytes);
  const uint64_t max_elems = std::max<uint64_t>(1, plan.max_slice_bytes / elt);
  const uint64_t min_elems =
      std::min(max_elems, std::max<uint64_t>(1, plan.min_slice_bytes / elt));
  const uint64_t pieces =
      std::max<uint64_t>(1, nreducers) * std::max<uint64_t>(1, plan.per_reducer);
  const uint64_t even = (total_count + pieces - 1) / pieces;
  return std::clamp(even, min_elems, max_elems);
}

// The same with the slow-link plan and this largest slice.
inline uint64_t sliceElements(uint64_t total_count, uint64_t elt_bytes, uint64_t max_slice_bytes,
                              uint64_t nreducers) {
  SlicePlan plan;
  plan.max_slice_bytes = max_slice_bytes;
  return sliceElements(total_count, elt_bytes, plan, nreducers);
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

}  // namespace tally::protocol
