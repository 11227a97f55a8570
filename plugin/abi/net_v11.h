// SPDX-License-Identifier: Apache-2.0
/* Version 11 of NCCL's net and CollNet plugin tables, Tally's own declaration; the version NCCL
 * 2.28 calls directly. init returns a per-communicator ctx (called once per communicator), listen
 * and net connect take that ctx, finalize(ctx) closes it, net gains setNetAttr, properties gain
 * maxMultiRequestSize.
 */
#ifndef TALLY_PLUGIN_ABI_NET_V11_H_
#define TALLY_PLUGIN_ABI_NET_V11_H_

#include "plugin/abi/net_v10.h"

typedef ncclNetVDeviceProps_v9_t ncclNetVDeviceProps_v11_t;
typedef ncclNetSGE_v9_t ncclNetSGE_v11_t;
typedef ncclNetCommConfig_v10_t ncclNetCommConfig_v11_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed; /* Mbps */
  int port;
  float latency; /* microseconds */
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v11_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
} ncclNetProperties_v11_t;

typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

/* NCCL initializes every field to NCCL_NET_ATTR_UNDEF. */
typedef struct {
  ncclNetCommAttr_v11_t sendCommAttr;
  ncclNetCommAttr_v11_t recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} ncclNetAttr_v11_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v11_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v11_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v11_t* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v11_t* netAttr);
} ncclNet_v11_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm,
                          void** collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
  ncclResult_t (*regMr)(void* collComm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* collComm, void* mhandle);
  ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, size_t count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                             void* recvMhandle, void** request);
  ncclResult_t (*iallgather)(void* collComm, void* sendData, int nRecvParts,
                             ncclNetSGE_v11_t* recvParts, size_t bytesPerRank,
                             size_t windowOffset, size_t windowBytes, void* sendMhandle,
                             void** request);
  ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_v11_t* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                 void* recvMhandle, void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v11_t* props);
  ncclResult_t (*finalize)(void* ctx);
} ncclCollNet_v11_t;

TALLY_ABI_ASSERT(sizeof(ncclNetProperties_v11_t) == 112, "ncclNetProperties_v11_t is 112 bytes");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, forceFlush) == 32, "v11 forceFlush @32");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, speed) == 36, "v11 speed @36");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, latency) == 44, "v11 latency @44");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, maxRecvs) == 52, "v11 maxRecvs @52");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, netDeviceType) == 56,
                 "v11 netDeviceType @56");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, vProps) == 64, "v11 vProps @64");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88, "v11 maxP2pBytes @88");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, maxCollBytes) == 96, "v11 maxCollBytes @96");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104,
                 "v11 maxMultiRequestSize @104");

TALLY_ABI_ASSERT(sizeof(ncclNetCommConfig_v11_t) == 4, "ncclNetCommConfig_v11_t is 4 bytes");
TALLY_ABI_ASSERT(sizeof(ncclNetCommAttr_v11_t) == 16, "ncclNetCommAttr_v11_t is 16 bytes");
TALLY_ABI_ASSERT(offsetof(ncclNetCommAttr_v11_t, minFlowsPerPeer) == 12,
                 "minFlowsPerPeer @12");
TALLY_ABI_ASSERT(sizeof(ncclNetAttr_v11_t) == 44, "ncclNetAttr_v11_t is 44 bytes");
TALLY_ABI_ASSERT(offsetof(ncclNetAttr_v11_t, recvCommAttr) == 16, "recvCommAttr @16");
TALLY_ABI_ASSERT(offsetof(ncclNetAttr_v11_t, op) == 32, "op @32");
TALLY_ABI_ASSERT(offsetof(ncclNetAttr_v11_t, algo) == 36, "algo @36");
TALLY_ABI_ASSERT(offsetof(ncclNetAttr_v11_t, proto) == 40, "proto @40");

TALLY_ABI_ASSERT(sizeof(ncclNet_v11_t) == 176, "ncclNet_v11_t is 22 slots");
TALLY_ABI_ASSERT(offsetof(ncclNet_v11_t, init) == 8, "ncclNet_v11_t init @8");
TALLY_ABI_ASSERT(offsetof(ncclNet_v11_t, listen) == 32, "ncclNet_v11_t listen @32");
TALLY_ABI_ASSERT(offsetof(ncclNet_v11_t, connect) == 40, "ncclNet_v11_t connect @40");
TALLY_ABI_ASSERT(offsetof(ncclNet_v11_t, regMr) == 56, "ncclNet_v11_t regMr @56");
TALLY_ABI_ASSERT(offsetof(ncclNet_v11_t, isend) == 80, "ncclNet_v11_t isend @80");
TALLY_ABI_ASSERT(offsetof(ncclNet_v11_t, irecv) == 88, "ncclNet_v11_t irecv @88");
TALLY_ABI_ASSERT(offsetof(ncclNet_v11_t, test) == 104, "ncclNet_v11_t test @104");
TALLY_ABI_ASSERT(offsetof(ncclNet_v11_t, makeVDevice) == 152, "ncclNet_v11_t makeVDevice @152");
TALLY_ABI_ASSERT(offsetof(ncclNet_v11_t, finalize) == 160, "ncclNet_v11_t finalize @160");
TALLY_ABI_ASSERT(offsetof(ncclNet_v11_t, setNetAttr) == 168, "ncclNet_v11_t setNetAttr @168");

TALLY_ABI_ASSERT(sizeof(ncclCollNet_v11_t) == 152, "ncclCollNet_v11_t is 19 slots");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v11_t, listen) == 32, "ncclCollNet_v11_t listen @32");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v11_t, connect) == 40, "ncclCollNet_v11_t connect @40");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v11_t, iallreduce) == 80,
                 "ncclCollNet_v11_t iallreduce @80");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v11_t, iallgather) == 88,
                 "ncclCollNet_v11_t iallgather @88");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v11_t, iflush) == 104, "ncclCollNet_v11_t iflush @104");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v11_t, test) == 112, "ncclCollNet_v11_t test @112");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v11_t, closeColl) == 120,
                 "ncclCollNet_v11_t closeColl @120");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v11_t, makeVDevice) == 136,
                 "ncclCollNet_v11_t makeVDevice @136");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v11_t, finalize) == 144,
                 "ncclCollNet_v11_t finalize @144");

#endif /* TALLY_PLUGIN_ABI_NET_V11_H_ */
