// The size of the iallreduce calls NCCL's CollNetChain proxy makes for an all-reduce of a given
// size, so the tools can drive the plugin with the calls a job would see. The facts are in
// nccl-plugin-abi.md §12.4 (2.28.9 src/enqueue.cc; 2.30.7 the same until a tuner's getChunkSize):
//
//   stepSize = NCCL_BUFFSIZE / NCCL_STEPS (4 MiB / 8 = 512 KiB by default)
//   chunk    = min(256 KiB, stepSize), then halved while
//              bytes / (channels x chunk) < depth x 64 and chunk > 128 KiB,
//              bytes / (channels x chunk) < depth x 8  and chunk >  64 KiB,
//              bytes / (channels x chunk) < depth      and chunk >  32 KiB
//   one call = channels x chunk bytes (channels grouped 8 at a time), up to 8 in flight; the last
//              call's count is rounded up to whole chunks (its tail holds stale bytes).
//
// A tuner's chunk (NCCL 2.30, ncclTuner_v6 getChunkSize) replaces the formula's, up to stepSize.
// Header-only: the bench, the demo and the tests use it.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tally::driver {

inline constexpr int kNcclSteps = 8;                       // NCCL_STEPS: calls in flight
inline constexpr uint64_t kNcclDefaultBuffSize = 4 << 20;  // NCCL_BUFFSIZE of the Simple protocol
inline constexpr int kNcclMaxSubs = 8;                     // channels grouped into one call

struct NcclChainShape {
  int channels = 2;                          // CollNet channels of the collective
  int depth = 1;                             // intra-node chain length: GPUs per host
  uint64_t buffsize = kNcclDefaultBuffSize;  // NCCL_BUFFSIZE
  uint64_t tuner_chunk = 0;                  // a tuner's chunk (2.30); 0: NCCL's formula
};

inline uint64_t ncclStepBytes(const NcclChainShape& s) { return s.buffsize / kNcclSteps; }

// The chunk of one channel for an all-reduce of `bytes`.
inline uint64_t ncclChainChunkBytes(uint64_t bytes, const NcclChainShape& s) {
  const uint64_t step = ncclStepBytes(s);
  if (s.tuner_chunk > 0) return std::min(s.tuner_chunk, step);
  const uint64_t channels = static_cast<uint64_t>(std::max(1, s.channels));
  const uint64_t depth = static_cast<uint64_t>(std::max(1, s.depth));
  uint64_t chunk = std::min<uint64_t>(256 << 10, step);
  while (bytes / (channels * chunk) < depth * 64 && chunk > (128 << 10)) chunk /= 2;
  while (bytes / (channels * chunk) < depth * 8 && chunk > (64 << 10)) chunk /= 2;
  while (bytes / (channels * chunk) < depth && chunk > (32 << 10)) chunk /= 2;
  return chunk;
}

// The bytes of one iallreduce: the chunk of every channel of a group.
inline uint64_t ncclChainCallBytes(uint64_t bytes, const NcclChainShape& s) {
  const int subs = std::min(std::max(1, s.channels), kNcclMaxSubs);
  return static_cast<uint64_t>(subs) * ncclChainChunkBytes(bytes, s);
}

}  // namespace tally::driver
