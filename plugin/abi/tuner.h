// SPDX-License-Identifier: Apache-2.0
/* Tally's own declaration of NCCL's tuner plugin tables, v2 to v6 (NCCL 2.21 to 2.30), written
 * from the facts of the ABI; every size and offset is asserted (x86-64, LP64).
 *
 * NCCL looks for a tuner in the net plugin's library when NCCL_TUNER_PLUGIN names none that opens
 * (2.28 and 2.30 re-open the net plugin's library and try ncclTunerPlugin_v6 (2.30 only), _v5,
 * _v4, _v3 and _v2 in that order; 2.21 opens NCCL_NET_PLUGIN's library, or libnccl-net.so, and
 * looks for ncclTunerPlugin_v2 only). NCCL_TUNER_PLUGIN=none turns every tuner off.
 *
 * The cost table (v3 on) is NCCL's float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] of
 * expected times in microseconds, passed as float** with its two dimensions; NCCL takes the
 * cheapest entry. An entry NCCL has disabled holds NCCL_ALGO_PROTO_IGNORE (-1.0), and a tuner
 * must leave it so. A result other than ncclSuccess from getCollInfo or getChunkSize fails the
 * collective (NCCL checks it), so Tally's tuner always succeeds. */
#ifndef TALLY_PLUGIN_ABI_TUNER_H_
#define TALLY_PLUGIN_ABI_TUNER_H_

#include "plugin/abi/nccl_types.h"

/* ---- Collectives, algorithms and protocols -------------------------------------------------- */

typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4
} ncclFunc_t;

#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6 /* from NCCL 2.23 */

#define NCCL_PROTO_UNDEF -1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2

#define NCCL_ALGO_PROTO_IGNORE -1.0f

/* The dimensions of the v5/v6 constants; the cost table's come with each call. */
#define TALLY_TUNER_NUM_ALGORITHMS_V5 7
#define TALLY_TUNER_NUM_PROTOCOLS_V5 3
#define TALLY_TUNER_NUM_HW_LINKS_V5 3
#define TALLY_TUNER_NUM_COMPCAPS_V5 4
#define TALLY_TUNER_NUM_TUNING_SCALES_V5 3

/* ---- v2 (NCCL 2.19 to 2.21): the tuner picks; 2.28 and 2.30 adapt it to a cost table -------- */

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  /* Writes an algorithm and a protocol (both, or neither) and may write nChannels; what it
   * leaves at -1 (or 0 channels) NCCL chooses. collNetSupport and nvlsSupport are 0 or 1. */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                              int nvlsSupport, int numPipeOps, int* algorithm, int* protocol,
                              int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v2_t;

/* ---- v3 and v4: the cost table ----------------------------------------------------------- */

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v3_t;

/* v4 adds regBuff: whether the user buffers are registered. */
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v4_t;

/* ---- v5 (NCCL 2.27 on): init per communicator with its id, NVLink domains and constants ---- */

typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;

/* NCCL's tuning constants, which init may change (Tally leaves them alone). */
typedef struct {
  double baseLatencies[TALLY_TUNER_NUM_ALGORITHMS_V5][TALLY_TUNER_NUM_PROTOCOLS_V5];
  double hwLatencies[TALLY_TUNER_NUM_HW_LINKS_V5][TALLY_TUNER_NUM_ALGORITHMS_V5]
                    [TALLY_TUNER_NUM_PROTOCOLS_V5];
  double llMaxBws[TALLY_TUNER_NUM_COMPCAPS_V5][TALLY_TUNER_NUM_TUNING_SCALES_V5];
  double perChMaxRingLL128Bws[TALLY_TUNER_NUM_COMPCAPS_V5][TALLY_TUNER_NUM_TUNING_SCALES_V5];
  double perChMaxTreeLL128Bws[TALLY_TUNER_NUM_COMPCAPS_V5][TALLY_TUNER_NUM_TUNING_SCALES_V5];
  double perChMaxTreeBws[TALLY_TUNER_NUM_COMPCAPS_V5][TALLY_TUNER_NUM_TUNING_SCALES_V5];
  double perChMaxNVLSTreeBws[TALLY_TUNER_NUM_COMPCAPS_V5][TALLY_TUNER_NUM_TUNING_SCALES_V5];
} ncclTunerConstants_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* nvlDomainInfo,
                       ncclTunerConstants_v5_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*finalize)(void* context);
} ncclTuner_v5_t;

/* ---- v6 (NCCL 2.30): v5 plus getChunkSize ------------------------------------------------ */

typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;
typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v6_t* nvlDomainInfo,
                       ncclTunerConstants_v6_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*finalize)(void* context);
  /* May be NULL. *chunkSize holds NCCL's chunk on entry; NCCL clamps what the tuner writes to
   * NCCL_BUFFSIZE / 8 (logging each clamp) and rounds it down to the protocol's grain. */
  ncclResult_t (*getChunkSize)(void* context, ncclFunc_t collType, size_t nBytes, int algo,
                               int proto, int nChannels, size_t* chunkSize);
} ncclTuner_v6_t;

/* ---- Sizes (x86-64) ---------------------------------------------------------------------- */

TALLY_ABI_ASSERT(sizeof(ncclFunc_t) == 4, "ncclFunc_t is 4 bytes");
TALLY_ABI_ASSERT(sizeof(ncclTuner_v2_t) == 32, "ncclTuner_v2_t is 4 slots");
TALLY_ABI_ASSERT(offsetof(ncclTuner_v2_t, getCollInfo) == 16, "v2 getCollInfo @16");
TALLY_ABI_ASSERT(offsetof(ncclTuner_v2_t, destroy) == 24, "v2 destroy @24");
TALLY_ABI_ASSERT(sizeof(ncclTuner_v3_t) == 32, "ncclTuner_v3_t is 4 slots");
TALLY_ABI_ASSERT(offsetof(ncclTuner_v3_t, getCollInfo) == 16, "v3 getCollInfo @16");
TALLY_ABI_ASSERT(sizeof(ncclTuner_v4_t) == 32, "ncclTuner_v4_t is 4 slots");
TALLY_ABI_ASSERT(offsetof(ncclTuner_v4_t, destroy) == 24, "v4 destroy @24");
TALLY_ABI_ASSERT(sizeof(ncclNvlDomainInfo_v5_t) == 12, "ncclNvlDomainInfo_v5_t is 3 ints");
TALLY_ABI_ASSERT(sizeof(ncclTunerConstants_v5_t) == 144 * 8, "144 doubles");
TALLY_ABI_ASSERT(offsetof(ncclTunerConstants_v5_t, hwLatencies) == 21 * 8, "hwLatencies @168");
TALLY_ABI_ASSERT(offsetof(ncclTunerConstants_v5_t, llMaxBws) == 84 * 8, "llMaxBws @672");
TALLY_ABI_ASSERT(offsetof(ncclTunerConstants_v5_t, perChMaxNVLSTreeBws) == 132 * 8,
                 "perChMaxNVLSTreeBws @1056");
TALLY_ABI_ASSERT(sizeof(ncclTuner_v5_t) == 32, "ncclTuner_v5_t is 4 slots");
TALLY_ABI_ASSERT(offsetof(ncclTuner_v5_t, init) == 8, "v5 init @8");
TALLY_ABI_ASSERT(offsetof(ncclTuner_v5_t, finalize) == 24, "v5 finalize @24");
TALLY_ABI_ASSERT(sizeof(ncclTuner_v6_t) == 40, "ncclTuner_v6_t is 5 slots");
TALLY_ABI_ASSERT(offsetof(ncclTuner_v6_t, getChunkSize) == 32, "v6 getChunkSize @32");

#endif /* TALLY_PLUGIN_ABI_TUNER_H_ */
