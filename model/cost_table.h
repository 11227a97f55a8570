// SPDX-License-Identifier: Apache-2.0
// What Tally's tuner does to NCCL's cost table, on a plain float table shaped as NCCL's
// ([algorithms][protocols], microseconds, -1 for a disabled entry), so that the plugin's
// getCollInfo and the bench ask the same code: the bench builds a table with NCCL's own ring cost
// (collnet.h) and asks which entry NCCL would take.
//
// The algorithm and protocol indices are NCCL's (they are the ABI's; plugin/abi/tuner.h
// declares them for the plugin and checks they agree).
#pragma once

#include <cstdint>

#include "model/collnet.h"

namespace tally::model {

inline constexpr int kAlgoTree = 0;
inline constexpr int kAlgoRing = 1;
inline constexpr int kAlgoCollNetDirect = 2;
inline constexpr int kAlgoCollNetChain = 3;
inline constexpr int kProtoLl = 0;
inline constexpr int kProtoLl128 = 1;
inline constexpr int kProtoSimple = 2;
inline constexpr int kFuncAllReduce = 4;
inline constexpr float kIgnoredCost = -1.0f;  // NCCL_ALGO_PROTO_IGNORE
// NCCL's tables: 6 algorithms in 2.21, 7 from 2.23 (PAT); always 3 protocols.
inline constexpr int kMaxAlgorithms = 16;
inline constexpr int kMaxProtocols = 8;

// The cheapest enabled ring entry of NCCL's table (any protocol); -1 when NCCL disabled the ring.
double ringCostInTable(const float* table, int num_algo, int num_proto);

// Writes the tuner's CollNet all-reduce cost (collNetCostMicros, scaled from the table's own ring
// entry) into the CollNet entries NCCL left enabled
// (CollNetDirect and CollNetChain, Simple only: NCCL runs CollNet on no other protocol) and
// returns how many it wrote. Nothing else is touched, and nothing at all for a collective other
// than all-reduce, a setup the model does not cover, or a table too small to hold CollNetChain.
int applyCollNetCosts(const CollNetSetup& setup, int coll, uint64_t bytes, float* table,
                      int num_algo, int num_proto);

// The entry NCCL takes: the cheapest one that is not disabled (the first on a tie), as NCCL scans
// its table. False when every entry is disabled.
bool cheapestEntry(const float* table, int num_algo, int num_proto, int* algo, int* proto);

// The bench's question, "which algorithm for an all-reduce of `bytes`": a 7 x 3 table as NCCL
// would pass it on hosts whose net reports setup.link_mbps (its ring costs from
// ncclRingAllReduceMicros, CollNetChain enabled, every other entry disabled), edited by
// applyCollNetCosts, and its cheapest entry. With no reducers the CollNet entry keeps a
// placeholder above the ring's cost, so the ring is the answer.
struct AllReduceChoice {
  int algorithm = kAlgoRing;
  int protocol = kProtoSimple;
  double micros = 0;           // the chosen entry's cost
  double ring_micros = 0;      // NCCL's ring (the cheaper protocol)
  double collnet_micros = -1;  // the tuner's CollNet cost (collNetCostMicros); -1: not covered
};
AllReduceChoice chooseAllReduce(const CollNetSetup& setup, uint64_t bytes);

}  // namespace tally::model
