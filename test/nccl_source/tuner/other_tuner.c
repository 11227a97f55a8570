// SPDX-License-Identifier: Apache-2.0
/* A tuner that is not Tally's, for the nccl-source tuner tests to name in NCCL_TUNER_PLUGIN: each
 * of its tables marks NCCL's choice in a way Tally's tuner never would, so a test can tell whose
 * tuner NCCL called.
 *
 *   ncclTunerPlugin_v2  picks Tree with LL for every collective (NCCL 2.28 on turn the pick into a
 *                       cost of 0 for that entry)
 *   ncclTunerPlugin_v5  (built with TALLY_OTHER_TUNER_V5) writes TALLY_OTHER_TUNER_MARK into every
 *                       entry of the cost table that NCCL left enabled
 *
 * Written in C against Tally's own declarations of the tuner ABI. */
#include "plugin/abi/tuner.h"

#define TALLY_OTHER_TUNER_EXPORT __attribute__((visibility("default")))

/* Every context points here; the tuner keeps no state. */
static int context_token;

static ncclResult_t initV2(size_t n_ranks, size_t n_nodes, ncclDebugLogger_t logger,
                           void** context) {
  (void)n_ranks;
  (void)n_nodes;
  (void)logger;
  *context = &context_token;
  return ncclSuccess;
}

static ncclResult_t pickV2(void* context, ncclFunc_t coll, size_t bytes, int collnet_support,
                           int nvls_support, int num_pipe_ops, int* algorithm, int* protocol,
                           int* n_channels) {
  (void)context;
  (void)coll;
  (void)bytes;
  (void)collnet_support;
  (void)nvls_support;
  (void)num_pipe_ops;
  (void)n_channels;
  *algorithm = NCCL_ALGO_TREE;
  *protocol = NCCL_PROTO_LL;
  return ncclSuccess;
}

static ncclResult_t finalize(void* context) {
  (void)context;
  return ncclSuccess;
}

TALLY_OTHER_TUNER_EXPORT const ncclTuner_v2_t ncclTunerPlugin_v2 = {
    .name = "OtherTuner",
    .init = initV2,
    .getCollInfo = pickV2,
    .destroy = finalize,
};

#ifdef TALLY_OTHER_TUNER_V5
static ncclResult_t initV5(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                           ncclDebugLogger_t logger, ncclNvlDomainInfo_v5_t* nvl_domains,
                           ncclTunerConstants_v5_t* constants) {
  (void)comm_id;
  (void)nvl_domains;
  (void)constants;
  return initV2(n_ranks, n_nodes, logger, context);
}

static ncclResult_t markV5(void* context, ncclFunc_t coll, size_t bytes, int num_pipe_ops,
                           float** cost_table, int num_algo, int num_proto, int reg_buff,
                           int* n_channels) {
  (void)context;
  (void)coll;
  (void)bytes;
  (void)num_pipe_ops;
  (void)reg_buff;
  (void)n_channels;
  /* NCCL passes its [algorithms][protocols] array of floats cast to float**. */
  float* table = (float*)cost_table;
  for (int i = 0; i < num_algo * num_proto; ++i) {
    if (table[i] != NCCL_ALGO_PROTO_IGNORE) table[i] = TALLY_OTHER_TUNER_MARK;
  }
  return ncclSuccess;
}

TALLY_OTHER_TUNER_EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {
    .name = "OtherTuner",
    .init = initV5,
    .getCollInfo = markV5,
    .finalize = finalize,
};
#endif
