// SPDX-License-Identifier: Apache-2.0
// The tuner's version-free entry points, under the tables of tables_tuner.cc. NCCL finds the
// tuner in this library when NCCL_TUNER_PLUGIN names none (plugin/abi/tuner.h says how each
// version looks), creates one context per communicator, and asks it about every collective.
//
// When reducers are configured (TALLY_REDUCERS, CLUSTER_SPEC, TF_CONFIG) and TALLY_TUNER is on,
// the tuner writes the model's cost of a CollNet all-reduce (model/cost_table.h) into the CollNet
// entries NCCL left enabled, and NCCL keeps choosing the cheapest entry itself. Otherwise it
// changes nothing. Every input is configuration, the same on every rank (model/collnet.h), so
// every rank makes the same choice. The entry points never fail a collective: a tuner error is a
// collective error in NCCL, so they log and leave NCCL's choice instead.
//
// Thread safety: init and finalize may run on any thread; a context is read-only after init, so
// getCollInfo and getChunkSize may run concurrently on it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/params.h"
#include "model/collnet.h"
#include "plugin/abi/tuner.h"

namespace tally::plugin {

class PluginState;

// model::collNetSetupFrom a plugin state: its parameters and, when it is a CollNet rank, its
// reducer count. Never the state's devices: their speed is a local measurement.
model::CollNetSetup tunerSetupFor(const PluginState& state, size_t n_ranks, size_t n_nodes,
                                  bool sets_chunk);

// Creates a context from the plugin's state (its parameters and reducers) and logs the setup's
// line (model::describeTuner) at INFO, once per communicator. A state that cannot load (bad
// variables) gives a context that changes nothing. *context is set on success.
ncclResult_t tunerInit(size_t n_ranks, size_t n_nodes, ncclDebugLogger_t logger, bool sets_chunk,
                       void** context);
ncclResult_t tunerFinalize(void* context);

// v3 to v6: the cost table as NCCL passes it.
ncclResult_t tunerGetCollInfo(void* context, ncclFunc_t coll, size_t bytes, float** table,
                              int num_algo, int num_proto);

// v2: NCCL asks for an algorithm and a protocol. CollNetChain with Simple when NCCL offers
// CollNet and the model says CollNet is cheaper than NCCL's own ring cost would be
// (model::chooseAllReduce); otherwise both stay -1 and NCCL chooses.
ncclResult_t tunerPickV2(void* context, ncclFunc_t coll, size_t bytes, int collnet_support,
                         int* algorithm, int* protocol);

// v6: for a CollNet all-reduce with reducers, model::tunerCollNetChunk of NCCL's chunk; anything
// else keeps NCCL's.
ncclResult_t tunerChunkSize(void* context, ncclFunc_t coll, size_t bytes, int algo, int proto,
                            int n_channels, size_t* chunk);

}  // namespace tally::plugin
