// --algo auto: each size runs through the algorithm NCCL would run with Tally's tuner loaded.
// The question goes through the same code as the plugin's getCollInfo (model/cost_table.h): a
// table shaped like NCCL's, with NCCL's ring cost for hosts whose net reports the link speed the
// tuner assumes, the CollNet entry costed by the model, and the cheapest entry taken.
//
// The setup is what the tuner in each worker would see: the workers as ranks, one per node, the
// reducers, and TALLY_LINK_MBPS as the workers get it (an emulated run sets it to the rate unless
// the caller set it; loopback leaves it unset), TALLY_LINK_LATENCY_US as the workers get it,
// NCCL_BUFFSIZE from --nccl-buffsize, and whether the tuner sets the chunk (--chunk tuner, NCCL
// 2.30).
#include <cstdlib>

#include "model/cost_table.h"
#include "tools/bench/bench.h"
#include "tools/bench/link_rate.h"

namespace tally::bench {

model::CollNetSetup benchSetup(const BenchOptions& o) {
  int64_t link_mbps = 0;
  if (const char* env = std::getenv("TALLY_LINK_MBPS"); env != nullptr) link_mbps = std::atoll(env);
  if (link_mbps <= 0 && !o.emulate.empty()) link_mbps = rateMbps(o.emulate);
  model::CollNetSetup s;
  s.ranks = o.workers;
  s.nodes = o.workers;
  s.reducers = o.reducers;
  s.link_from_config = link_mbps > 0;
  s.link_mbps = link_mbps > 0 ? static_cast<int>(link_mbps) : model::kAssumedLinkMbps;
  s.buff_size = o.calls.chain.buffsize;
  s.tuner_sets_chunk = o.calls.tuner_chunk;
  if (const char* env = std::getenv("TALLY_LINK_LATENCY_US"); env != nullptr && *env != '\0')
    s.latency_s = std::atof(env) * 1e-6;
  return s;
}

Algo autoPick(const BenchOptions& o, uint64_t bytes, bool server_supported) {
  if (!server_supported) return Algo::kRing;
  const model::AllReduceChoice c = model::chooseAllReduce(benchSetup(o), bytes);
  return c.algorithm == model::kAlgoCollNetChain || c.algorithm == model::kAlgoCollNetDirect
             ? Algo::kServer
             : Algo::kRing;
}

}  // namespace tally::bench
