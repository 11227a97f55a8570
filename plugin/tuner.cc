// SPDX-License-Identifier: Apache-2.0
// The tuner's entry points (tuner.h).
#include "plugin/tuner.h"

#include <memory>
#include <string>

#include "common/log.h"
#include "model/cost_table.h"
#include "plugin/edge.h"
#include "plugin/state.h"

namespace tally::plugin {
namespace {

static_assert(model::kAlgoRing == NCCL_ALGO_RING);
static_assert(model::kAlgoCollNetDirect == NCCL_ALGO_COLLNET_DIRECT);
static_assert(model::kAlgoCollNetChain == NCCL_ALGO_COLLNET_CHAIN);
static_assert(model::kProtoSimple == NCCL_PROTO_SIMPLE);
static_assert(model::kFuncAllReduce == ncclFuncAllReduce);
static_assert(model::kIgnoredCost == NCCL_ALGO_PROTO_IGNORE);

// One communicator's tuner: its setup, fixed at init.
struct TunerContext {
  model::CollNetSetup setup;
};

const TunerContext* contextOf(void* context) { return static_cast<const TunerContext*>(context); }

bool isCollNet(int algo) {
  return algo == NCCL_ALGO_COLLNET_CHAIN || algo == NCCL_ALGO_COLLNET_DIRECT;
}

}  // namespace

model::CollNetSetup tunerSetupFor(const PluginState& state, size_t n_ranks, size_t n_nodes,
                                  bool sets_chunk) {
  const size_t reducers = state.collEnabled() ? state.reducers().addresses.size() : 0;
  return model::collNetSetupFrom(state.params(), reducers, n_ranks, n_nodes, sets_chunk);
}

ncclResult_t tunerInit(size_t n_ranks, size_t n_nodes, ncclDebugLogger_t logger, bool sets_chunk,
                       void** context) {
  if (context == nullptr) return ncclInternalError;
  installNcclLogger(logger);
  return guard("tuner init", [&]() -> Status {
    auto ctx = std::make_unique<TunerContext>();
    PluginState* state = nullptr;
    Status loaded = PluginState::global(&state);
    if (loaded.isOk()) {
      ctx->setup = tunerSetupFor(*state, n_ranks, n_nodes, sets_chunk);
      if (!state->params().tuner) {
        TALLY_INFO(log::kInit | log::kTuning, "tuner off (TALLY_TUNER=0): NCCL's costs stand");
      } else {
        TALLY_INFO(log::kInit | log::kTuning, "%s", model::describeTuner(ctx->setup).c_str());
      }
    } else {
      // The net side reports the bad variable; the tuner only stays out of the way.
      ctx->setup.ranks = static_cast<int64_t>(n_ranks);
      ctx->setup.nodes = static_cast<int64_t>(n_nodes);
      TALLY_INFO(log::kInit | log::kTuning, "tuner changes nothing: %s", loaded.toString().c_str());
    }
    *context = ctx.release();
    return Status::ok();
  });
}

ncclResult_t tunerFinalize(void* context) {
  delete contextOf(context);
  return ncclSuccess;
}

ncclResult_t tunerGetCollInfo(void* context, ncclFunc_t coll, size_t bytes, float** table,
                              int num_algo, int num_proto) {
  if (context == nullptr || table == nullptr) return ncclSuccess;
  // NCCL passes its [algorithms][protocols] array of floats cast to float**.
  model::applyCollNetCosts(contextOf(context)->setup, static_cast<int>(coll), bytes,
                           reinterpret_cast<float*>(table), num_algo, num_proto);
  return ncclSuccess;
}

ncclResult_t tunerPickV2(void* context, ncclFunc_t coll, size_t bytes, int collnet_support,
                         int* algorithm, int* protocol) {
  if (context == nullptr || algorithm == nullptr || protocol == nullptr) return ncclSuccess;
  if (collnet_support != 1 || coll != ncclFuncAllReduce) return ncclSuccess;
  const model::AllReduceChoice choice = model::chooseAllReduce(contextOf(context)->setup, bytes);
  if (choice.algorithm == model::kAlgoCollNetChain) {
    *algorithm = NCCL_ALGO_COLLNET_CHAIN;
    *protocol = NCCL_PROTO_SIMPLE;
  }
  return ncclSuccess;
}

ncclResult_t tunerChunkSize(void* context, ncclFunc_t coll, size_t bytes, int algo, int proto,
                            int n_channels, size_t* chunk) {
  if (context == nullptr || chunk == nullptr) return ncclSuccess;
  if (coll != ncclFuncAllReduce || !isCollNet(algo) || proto != NCCL_PROTO_SIMPLE) {
    return ncclSuccess;
  }
  *chunk = model::tunerCollNetChunk(contextOf(context)->setup, bytes, n_channels, *chunk);
  return ncclSuccess;
}

}  // namespace tally::plugin
