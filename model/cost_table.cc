// SPDX-License-Identifier: Apache-2.0
// The tuner's edit of NCCL's cost table (cost_table.h).
#include "model/cost_table.h"

#include <algorithm>

namespace tally::model {

int applyCollNetCosts(const CollNetSetup& setup, int coll, uint64_t bytes, float* table,
                      int num_algo, int num_proto) {
  if (table == nullptr || coll != kFuncAllReduce || num_algo <= kAlgoCollNetChain ||
      num_proto <= kProtoSimple) {
    return 0;
  }
  const double micros =
      collNetCostMicros(setup, bytes, ringCostInTable(table, num_algo, num_proto));
  if (micros < 0) return 0;
  int written = 0;
  for (int algo : {kAlgoCollNetDirect, kAlgoCollNetChain}) {
    float& entry = table[algo * num_proto + kProtoSimple];
    if (entry == kIgnoredCost) continue;
    entry = static_cast<float>(micros);
    ++written;
  }
  return written;
}

double ringCostInTable(const float* table, int num_algo, int num_proto) {
  if (table == nullptr || num_algo <= kAlgoRing) return -1;
  double best = -1;
  for (int p = 0; p < num_proto; ++p) {
    const float cost = table[kAlgoRing * num_proto + p];
    if (cost >= 0 && (best < 0 || cost < best)) best = cost;
  }
  return best;
}

bool cheapestEntry(const float* table, int num_algo, int num_proto, int* algo, int* proto) {
  bool found = false;
  float best = 0;
  for (int a = 0; a < num_algo; ++a) {
    for (int p = 0; p < num_proto; ++p) {
      const float cost = table[a * num_proto + p];
      if (cost < 0 || (found && cost >= best)) continue;
      found = true;
      best = cost;
      *algo = a;
      *proto = p;
    }
  }
  return found;
}

AllReduceChoice chooseAllReduce(const CollNetSetup& setup, uint64_t bytes) {
  constexpr int kAlgos = 7;
  constexpr int kProtos = 3;
  float table[kAlgos][kProtos];
  std::fill(&table[0][0], &table[0][0] + kAlgos * kProtos, kIgnoredCost);
  AllReduceChoice choice;
  choice.ring_micros = ncclRingAllReduceMicros(setup, bytes);
  if (choice.ring_micros < 0) return choice;  // one rank: NCCL runs the ring without a net
  // NCCL's ring entry: the cheaper of its Simple and LL costs.
  table[kAlgoRing][kProtoSimple] = static_cast<float>(choice.ring_micros);
  // A placeholder that loses to the ring unless the tuner rewrites it.
  table[kAlgoCollNetChain][kProtoSimple] = static_cast<float>(choice.ring_micros * 2 + 1);
  applyCollNetCosts(setup, kFuncAllReduce, bytes, &table[0][0], kAlgos, kProtos);
  choice.collnet_micros = collNetCostMicros(setup, bytes, choice.ring_micros);
  int algo = kAlgoRing;
  int proto = kProtoSimple;
  cheapestEntry(&table[0][0], kAlgos, kProtos, &algo, &proto);
  choice.algorithm = algo;
  choice.protocol = proto;
  choice.micros = table[algo][proto];
  return choice;
}

}  // namespace tally::model
