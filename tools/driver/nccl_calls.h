// SPDX-License-Identifier: Apache-2.0
// The size of the iallreduce calls NCCL's CollNetChain proxy makes for an all-reduce of a given
// size, so the tools can drive the plugin with the calls a job would see. The facts are in
// nccl-plugin-abi.md §12.4 (2.28.9 src/enqueue.cc; 2.30.7 the same until a tuner's getChunkSize):
//
//   stepSize = NCCL_BUFFSIZE / NCCL_STEPS (4 MiB / 8 = 512 KiB by default)
//   chunk    = min(256 KiB, stepSize), halved for smaller messages (model/collnet.h)
//   one call = channels x chunk bytes (channels grouped 8 at a time), up to 8 in flight; the last
//              call's count is rounded up to whole chunks (its tail holds stale bytes).
//
// A tuner's chunk (NCCL 2.30, ncclTuner_v6 getChunkSize) replaces the formula's, up to stepSize.
// The bench, the demo and the tests use it; the rule itself is model/collnet.h's.
#pragma once

#include <algorithm>
#include <cstdint>

#include "model/collnet.h"

namespace tally::driver {

inline constexpr int kNcclSteps = model::kNcclSteps;  // calls in flight
inline constexpr uint64_t kNcclDefaultBuffSize = model::kNcclDefaultBuffSize;
inline constexpr int kNcclMaxSubs = 8;  // channels grouped into one call

struct NcclChainShape {
  int channels = 2;                          // CollNet channels of the collective
  int depth = 1;                             // intra-node chain length: GPUs per host
  uint64_t buffsize = kNcclDefaultBuffSize;  // NCCL_BUFFSIZE
  uint64_t tuner_chunk = 0;                  // a tuner's chunk (2.30); 0: NCCL's formula
};

inline uint64_t ncclStepBytes(const NcclChainShape& s) {
  return model::maxCollNetChunk(s.buffsize);
}

// The chunk of one channel for an all-reduce of `bytes`: NCCL's rule (model/collnet.h, which the
// tuner uses too), or the tuner's chunk up to stepSize.
inline uint64_t ncclChainChunkBytes(uint64_t bytes, const NcclChainShape& s) {
  if (s.tuner_chunk > 0) return std::min(s.tuner_chunk, ncclStepBytes(s));
  return model::ncclCollNetChunk(bytes, s.channels, s.depth, s.buffsize);
}

// The bytes of one iallreduce: the chunk of every channel of a group.
inline uint64_t ncclChainCallBytes(uint64_t bytes, const NcclChainShape& s) {
  const int subs = std::min(std::max(1, s.channels), kNcclMaxSubs);
  return static_cast<uint64_t>(subs) * ncclChainChunkBytes(bytes, s);
}

}  // namespace tally::driver
