// SPDX-License-Identifier: Apache-2.0
// The exported ncclTuner tables, v2 to v6: signature adapters over the version-free entry points
// in tuner.h. v2 to v4 have no communicator id and no constants; v5 and v6 share init and
// getCollInfo; only v6 asks for chunk sizes, so only its contexts let the model count on the
// tuner's chunk.
#include "plugin/abi/abi.h"
#include "plugin/tables.h"
#include "plugin/tuner.h"

namespace tally::plugin {
namespace {

// v2 to v4: init(nRanks, nNodes, logger, &context).
ncclResult_t tunerInitV2(size_t n_ranks, size_t n_nodes, ncclDebugLogger_t logger, void** context) {
  return tunerInit(n_ranks, n_nodes, logger, false, context);
}

// v5: the communicator id, NVLink domains and NCCL's constants come too; Tally uses none of them.
ncclResult_t tunerInitV5(void** context, uint64_t /*comm_id*/, size_t n_ranks, size_t n_nodes,
                         ncclDebugLogger_t logger, ncclNvlDomainInfo_v5_t* /*nvl_domains*/,
                         ncclTunerConstants_v5_t* /*constants*/) {
  return tunerInit(n_ranks, n_nodes, logger, false, context);
}

// v6: as v5, and NCCL will ask for the chunk.
ncclResult_t tunerInitV6(void** context, uint64_t /*comm_id*/, size_t n_ranks, size_t n_nodes,
                         ncclDebugLogger_t logger, ncclNvlDomainInfo_v6_t* /*nvl_domains*/,
                         ncclTunerConstants_v6_t* /*constants*/) {
  return tunerInit(n_ranks, n_nodes, logger, true, context);
}

// v2: the tuner picks; nChannels stays NCCL's.
ncclResult_t getCollInfoV2(void* context, ncclFunc_t coll, size_t bytes, int collnet_support,
                           int /*nvls_support*/, int /*num_pipe_ops*/, int* algorithm,
                           int* protocol, int* /*n_channels*/) {
  return tunerPickV2(context, coll, bytes, collnet_support, algorithm, protocol);
}

// v3: the cost table; nChannels stays NCCL's.
ncclResult_t getCollInfoV3(void* context, ncclFunc_t coll, size_t bytes, int /*num_pipe_ops*/,
                           float** table, int num_algo, int num_proto, int* /*n_channels*/) {
  return tunerGetCollInfo(context, coll, bytes, table, num_algo, num_proto);
}

// v4 on: regBuff too.
ncclResult_t getCollInfoV4(void* context, ncclFunc_t coll, size_t bytes, int /*num_pipe_ops*/,
                           float** table, int num_algo, int num_proto, int /*reg_buff*/,
                           int* /*n_channels*/) {
  return tunerGetCollInfo(context, coll, bytes, table, num_algo, num_proto);
}

}  // namespace
}  // namespace tally::plugin

namespace tp = tally::plugin;

extern "C" TALLY_EXPORT const ncclTuner_v2_t ncclTunerPlugin_v2 = {
    .name = tp::kPluginName,
    .init = tp::tunerInitV2,
    .getCollInfo = tp::getCollInfoV2,
    .destroy = tp::tunerFinalize,
};

extern "C" TALLY_EXPORT const ncclTuner_v3_t ncclTunerPlugin_v3 = {
    .name = tp::kPluginName,
    .init = tp::tunerInitV2,
    .getCollInfo = tp::getCollInfoV3,
    .destroy = tp::tunerFinalize,
};

extern "C" TALLY_EXPORT const ncclTuner_v4_t ncclTunerPlugin_v4 = {
    .name = tp::kPluginName,
    .init = tp::tunerInitV2,
    .getCollInfo = tp::getCollInfoV4,
    .destroy = tp::tunerFinalize,
};

extern "C" TALLY_EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {
    .name = tp::kPluginName,
    .init = tp::tunerInitV5,
    .getCollInfo = tp::getCollInfoV4,
    .finalize = tp::tunerFinalize,
};

extern "C" TALLY_EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {
    .name = tp::kPluginName,
    .init = tp::tunerInitV6,
    .getCollInfo = tp::getCollInfoV4,
    .finalize = tp::tunerFinalize,
    .getChunkSize = tp::tunerChunkSize,
};
