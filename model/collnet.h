// SPDX-License-Identifier: Apache-2.0
// The all-reduce model (allreduce.h) as NCCL sees it: how NCCL cuts a CollNet all-reduce into
// calls, what NCCL's own cost table says a ring costs, and from there what Tally's tuner writes
// into NCCL's table, the crossover it implies, and the chunk it asks for. Pure arithmetic.
//
// Every input is configuration, the same on every rank of a communicator (the reducer count,
// TALLY_LINK_MBPS, NCCL_BUFFSIZE, nRanks and nNodes from NCCL): NCCL picks the cheapest entry of
// its table on each rank independently, and ranks that pick differently hang. Nothing measured on
// one host (its interface's speed, its cores) may enter.
//
// NCCL's facts used here (2.28.9 and 2.30.7 src/enqueue.cc and src/graph/tuning.cc; the latency
// constants are tuning.cc's ncclTunerConstantsDefaults, the per-step sum its ring latency):
//   - CollNetChain's chunk: min(256 KiB, NCCL_BUFFSIZE / 8), halved while
//     bytes / (channels x chunk) < depth x 64 (down to 128 KiB), < depth x 8 (to 64 KiB),
//     < depth (to 32 KiB); each CollNet call carries channels x chunk bytes (a group of up to 8
//     channels), at most 8 calls in flight; a v6 tuner may raise the chunk up to NCCL_BUFFSIZE / 8.
//   - The ring's cost, microseconds: latency + bytes / (1000 x algorithm bandwidth in GB/s), with
//     the bus bandwidth speed / 8000 GB/s for a net of `speed` Mb/s, algorithm bandwidth = bus
//     bandwidth x nRanks / (2 (nRanks - 1)); latency: a base (Simple 8.4, LL 6.6) plus per step
//     between nodes the net's (Simple 14, LL 2.7, or the tree's 5.0 with one rank per node) plus
//     the net's reported latency (twice for Simple: a flush), which Tally reports as
//     TALLY_LINK_LATENCY_US, and per step inside a node the PCI one (Simple 5.7, LL 1.0); Simple's
//     latency x 1.4 once bytes / (channels x nRanks) >= 64; LL's bandwidth is half of Simple's.
#pragma once

#include <cstdint>
#include <string>

#include "common/params.h"
#include "model/allreduce.h"

namespace tally::model {

inline constexpr uint64_t kNcclDefaultBuffSize = 4ull << 20;  // NCCL_BUFFSIZE's default
inline constexpr int kNcclSteps = 8;                          // NCCL_STEPS
inline constexpr uint64_t kNcclChainMaxChunk = 256 * 1024;
// NCCL's speed for a net that reports none, and the tuner's when TALLY_LINK_MBPS is unset: a
// rate every rank agrees on, where the interface's own would not be.
inline constexpr int kAssumedLinkMbps = 10000;
// CollNet channels an all-reduce uses (NCCL decides, and lowers it for small messages; the tuner
// does not see it when it writes its costs). Two: one NIC per host.
inline constexpr int kAssumedCollNetChannels = 2;
// The sizes the crossover is looked for in.
inline constexpr uint64_t kCrossoverMinBytes = 1024;
inline constexpr uint64_t kCrossoverMaxBytes = 1ull << 30;

// What a communicator's tuner knows, all of it configuration (see the top).
struct CollNetSetup {
  int64_t ranks = 0;     // nRanks
  int64_t nodes = 0;     // nNodes: the hosts the model's n counts
  int64_t reducers = 0;  // m
  int link_mbps = kAssumedLinkMbps;
  bool link_from_config = false;              // TALLY_LINK_MBPS set
  uint64_t buff_size = kNcclDefaultBuffSize;  // NCCL_BUFFSIZE
  bool tuner_sets_chunk = false;              // tuner v6: getChunkSize raises the chunk
  double latency_s = kDefaultLatencySeconds;
  double reducer_cores = kDefaultReducerCores;
};

// The setup of a communicator of n_ranks on n_nodes from the parameters: TALLY_LINK_MBPS (else
// kAssumedLinkMbps), NCCL_BUFFSIZE, `reducers` (0 when TALLY_TUNER is off, so the tuner changes
// nothing) and whether the tuner sets the chunk (tuner v6). The plugin's tuner and `tally doctor`
// both build it here.
CollNetSetup collNetSetupFrom(const Params& params, size_t reducers, size_t n_ranks, size_t n_nodes,
                              bool sets_chunk);

// NCCL's CollNetChain chunk for an all-reduce of `bytes` over `channels` channels whose intra-node
// chain is `depth` GPUs long, with NCCL_BUFFSIZE `buff_size`.
uint64_t ncclCollNetChunk(uint64_t bytes, int channels, int depth, uint64_t buff_size);

// The largest chunk a v6 tuner may ask for: NCCL_BUFFSIZE / 8.
uint64_t maxCollNetChunk(uint64_t buff_size);

// The chunk Tally's tuner asks for: of NCCL's chunk and its doublings up to maxCollNetChunk, the
// one the model says finishes the all-reduce first (the smaller on a tie). NCCL's own chunk when
// the setup has no reducers or fewer than two nodes.
uint64_t tunerCollNetChunk(const CollNetSetup& setup, uint64_t bytes, int channels,
                           uint64_t nccl_chunk);

// The model's CollNet all-reduce of `bytes` in microseconds, with NCCL's chunking (or the
// tuner's, with tuner_sets_chunk) over kAssumedCollNetChannels, and, when ring_micros is given,
// the same model's ring over the same hosts (what `tally plan` compares it with). Negative when
// the model does not cover the setup (no reducers, fewer than two nodes, no ranks).
double collNetAllReduceMicros(const CollNetSetup& setup, uint64_t bytes,
                              double* ring_micros = nullptr);

// The model's ring all-reduce of `bytes` (links, CPU and a latency per step, allreduce.h);
// negative where collNetAllReduceMicros is.
double modelRingMicros(const CollNetSetup& setup, uint64_t bytes);

// What the tuner writes into a CollNet entry: the lower of the model's own time for it
// (collNetAllReduceMicros) and NCCL's ring cost scaled by the model's ratio of the reduction
// server's time to the ring's. NCCL's ring cost counts no CPU; where the model's CPU per byte
// bounds both algorithms (fast TCP links) the first would lose to a ring the model says is
// slower, and the second puts CollNet on NCCL's own scale, as `tally plan` compares them.
// nccl_ring_micros is the ring's entry in NCCL's table; 0 or less: ncclRingAllReduceMicros.
// Negative where the model does not cover the setup.
double collNetCostMicros(const CollNetSetup& setup, uint64_t bytes, double nccl_ring_micros);

// NCCL's own cost of a ring all-reduce of `bytes` (the cheaper of Simple and LL), microseconds,
// for a net of setup.link_mbps: what NCCL's table holds for the ring on such hosts.
double ncclRingAllReduceMicros(const CollNetSetup& setup, uint64_t bytes);

// The smallest all-reduce size from which the tuner's CollNet cost is below NCCL's ring cost at
// every size up to kCrossoverMaxBytes (kCrossoverMinBytes when it is cheaper throughout); 0 when
// the ring is cheaper at kCrossoverMaxBytes or the model does not cover the setup.
uint64_t collNetCrossoverBytes(const CollNetSetup& setup);

// The tuner's line: its inputs and the crossover (or, where CollNet is cheaper only for small
// messages, the power of two from which the ring is), e.g. "tuner: 8 ranks on 8 nodes, 2 reducers,
// link 10000 Mb/s (TALLY_LINK_MBPS), latency 50 us, NCCL_BUFFSIZE 4 MiB; CollNet all-reduce
// from 1.50 MiB (rs 1.52 ms, NCCL ring 1.55 ms there)".
std::string describeTuner(const CollNetSetup& setup);

}  // namespace tally::model
