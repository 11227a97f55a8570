// SPDX-License-Identifier: Apache-2.0
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
#include "common/params.h"
#include "model/cost_table.h"
#include "tools/bench/bench.h"
#include "tools/bench/link_rate.h"

namespace tally::bench {

model::CollNetSetup benchSetup(const BenchOptions& o) {
  // The workers' parameters: this process's environment (the workers inherit it), with the
  // emulated rate as TALLY_LINK_MBPS where the environment sets none, as the workers do.
  Params params;
  if (!Params::load(EnvParamSource(), &params).isOk()) params = Params::defaults();
  if (params.linkMbps <= 0 && !o.emulate.empty()) params.linkMbps = rateMbps(o.emulate);
  params.ncclBuffsize = static_cast<int64_t>(o.calls.chain.buffsize);
  return model::collNetSetupFrom(params, static_cast<size_t>(o.reducers),
                                 static_cast<size_t>(o.workers), static_cast<size_t>(o.workers),
                                 o.calls.tuner_chunk);
}

Algo autoPick(const BenchOptions& o, uint64_t bytes, bool server_supported) {
  if (!server_supported) return Algo::kRing;
  const model::AllReduceChoice c = model::chooseAllReduce(benchSetup(o), bytes);
  return c.algorithm == model::kAlgoCollNetChain || c.algorithm == model::kAlgoCollNetDirect
             ? Algo::kServer
             : Algo::kRing;
}

}  // namespace tally::bench
