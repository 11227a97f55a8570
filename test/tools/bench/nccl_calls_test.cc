// SPDX-License-Identifier: Apache-2.0
// The CollNet call sizes the bench issues (tools/driver/nccl_calls.h), against the sizes NCCL
// 2.28.9's enqueue.cc gives, worked out by hand from its rule (nccl-plugin-abi.md §12.4): with
// one GPU per host and 2 channels the chunk is 256 KiB from 32 MiB up, 128 KiB from 2 MiB, 64 KiB
// from 128 KiB and 32 KiB below.
#include "tools/driver/nccl_calls.h"

#include <gtest/gtest.h>

namespace tally::driver {
namespace {

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;

TEST(NcclCalls, OneGpuPerHostTwoChannels) {
  const NcclChainShape s;  // 2 channels, depth 1, NCCL_BUFFSIZE 4 MiB
  struct Case {
    uint64_t bytes, chunk;
  };
  const Case cases[] = {
      {4 * KiB, 32 * KiB},   {128 * KiB - 1, 32 * KiB}, {128 * KiB, 64 * KiB},
      {1 * MiB, 64 * KiB},   {2 * MiB - 1, 64 * KiB},   {2 * MiB, 128 * KiB},
      {16 * MiB, 128 * KiB}, {32 * MiB - 1, 128 * KiB}, {32 * MiB, 256 * KiB},
      {64 * MiB, 256 * KiB}, {1024 * MiB, 256 * KiB},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ncclChainChunkBytes(c.bytes, s), c.chunk) << c.bytes;
    EXPECT_EQ(ncclChainCallBytes(c.bytes, s), 2 * c.chunk) << c.bytes;
  }
}

TEST(NcclCalls, DeeperChainsGetSmallerChunks) {
  NcclChainShape s;
  s.depth = 8;  // an 8-GPU host
  // bytes / (2 x chunk) must reach 8 x 64 = 512 for 256 KiB: 256 MiB.
  EXPECT_EQ(ncclChainChunkBytes(256 * MiB, s), 256 * KiB);
  EXPECT_EQ(ncclChainChunkBytes(256 * MiB - 1, s), 128 * KiB);
  EXPECT_EQ(ncclChainChunkBytes(64 * MiB, s), 128 * KiB);
  // 8 x 8 = 64 for 128 KiB: 16 MiB; below it 64 KiB, and 32 KiB under 8 x 1 x 2 x 64 KiB = 1 MiB.
  EXPECT_EQ(ncclChainChunkBytes(16 * MiB - 1, s), 64 * KiB);
  EXPECT_EQ(ncclChainChunkBytes(1 * MiB, s), 64 * KiB);
  EXPECT_EQ(ncclChainChunkBytes(1 * MiB - 1, s), 32 * KiB);
}

TEST(NcclCalls, ChannelsBuffsizeAndATunersChunk) {
  NcclChainShape s;
  s.channels = 8;
  EXPECT_EQ(ncclChainChunkBytes(128 * MiB, s), 256 * KiB);  // 128 MiB / 2 MiB = 64
  EXPECT_EQ(ncclChainCallBytes(128 * MiB, s), 2 * MiB);     // the largest Chain call
  EXPECT_EQ(ncclChainChunkBytes(64 * MiB, s), 128 * KiB);
  s.channels = 12;  // channels beyond 8 make a second group, not larger calls
  EXPECT_EQ(ncclChainCallBytes(1024 * MiB, s), 8 * 256 * KiB);
  s = NcclChainShape{};
  s.buffsize = 1 * MiB;  // stepSize 128 KiB caps the chunk
  EXPECT_EQ(ncclStepBytes(s), 128 * KiB);
  EXPECT_EQ(ncclChainChunkBytes(64 * MiB, s), 128 * KiB);
  s = NcclChainShape{};
  s.tuner_chunk = 512 * KiB;  // NCCL 2.30's getChunkSize, up to stepSize
  EXPECT_EQ(ncclChainCallBytes(4 * KiB, s), 1 * MiB);
  s.tuner_chunk = 2 * MiB;
  EXPECT_EQ(ncclChainChunkBytes(64 * MiB, s), 512 * KiB);
  s.buffsize = 16 * MiB;
  EXPECT_EQ(ncclChainChunkBytes(64 * MiB, s), 2 * MiB);
}

}  // namespace
}  // namespace tally::driver
