// SPDX-License-Identifier: Apache-2.0
/* Version 12 of NCCL's net and CollNet plugin tables, Tally's own declaration; the version NCCL
 * 2.30 looks for first. The slots, their order and their parameters are v11's; only the property
 * layout changes: a virtual NIC lists up to 8 devices instead of 4 (so every field after vProps
 * moves by 16 bytes), and two 16-bit ids, railId and planeId, close the struct. Their
 * "undefined" value, NCCL_NET_ID_UNDEF, tells NCCL to ignore them. The config, attribute, SGE and
 * device-handle structs are v11's under a new name.
 */
#ifndef TALLY_PLUGIN_ABI_NET_V12_H_
#define TALLY_PLUGIN_ABI_NET_V12_H_

#include "plugin/abi/net_v11.h"

/* NCCL_NET_MAX_DEVS_PER_NIC (nccl_types.h) stays the v9 to v11 limit, 4. */
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
#define NCCL_NET_ID_UNDEF (-1)

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

typedef ncclNetCommConfig_v11_t ncclNetCommConfig_v12_t;
typedef ncclNetCommAttr_v11_t ncclNetCommAttr_v12_t;
typedef ncclNetAttr_v11_t ncclNetAttr_v12_t;
typedef ncclNetSGE_v11_t ncclNetSGE_v12_t;
typedef ncclNetDeviceHandle_v11_t ncclNetDeviceHandle_v12_t;

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
  ncclNetVDeviceProps_v12_t vProps; /* 36 bytes, then 4 bytes of padding */
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;  /* NCCL_NET_ID_UNDEF: no rail */
  int16_t planeId; /* NCCL_NET_ID_UNDEF: no plane */
} ncclNetProperties_v12_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config,
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v12_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v12_t** recvDevComm);
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
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v12_t* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v12_t* netAttr);
} ncclNet_v12_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
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
  /* NULL in a v12 table stays NULL in NCCL 2.30, which then keeps AllGather off CollNet. */
  ncclResult_t (*iallgather)(void* collComm, void* sendData, int nRecvParts,
                             ncclNetSGE_v12_t* recvParts, size_t bytesPerRank,
                             size_t windowOffset, size_t windowBytes, void* sendMhandle,
                             void** request);
  /* Likewise for ReduceScatter. */
  ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_v12_t* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                 void* recvMhandle, void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v12_t* props);
  ncclResult_t (*finalize)(void* ctx);
} ncclCollNet_v12_t;

TALLY_ABI_ASSERT(sizeof(ncclNetVDeviceProps_v12_t) == 36, "ncclNetVDeviceProps_v12_t is 36 bytes");
TALLY_ABI_ASSERT(offsetof(ncclNetVDeviceProps_v12_t, devs) == 4, "v12 vProps devs @4");

TALLY_ABI_ASSERT(sizeof(ncclNetProperties_v12_t) == 128, "ncclNetProperties_v12_t is 128 bytes");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, pciPath) == 8, "v12 pciPath @8");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, guid) == 16, "v12 guid @16");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, ptrSupport) == 24, "v12 ptrSupport @24");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, regIsGlobal) == 28, "v12 regIsGlobal @28");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, forceFlush) == 32, "v12 forceFlush @32");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, speed) == 36, "v12 speed @36");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, port) == 40, "v12 port @40");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, latency) == 44, "v12 latency @44");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, maxComms) == 48, "v12 maxComms @48");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, maxRecvs) == 52, "v12 maxRecvs @52");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, netDeviceType) == 56,
                 "v12 netDeviceType @56");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, netDeviceVersion) == 60,
                 "v12 netDeviceVersion @60");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, vProps) == 64, "v12 vProps @64");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104, "v12 maxP2pBytes @104");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, maxCollBytes) == 112,
                 "v12 maxCollBytes @112");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120,
                 "v12 maxMultiRequestSize @120");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, railId) == 124, "v12 railId @124");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, planeId) == 126, "v12 planeId @126");

TALLY_ABI_ASSERT(sizeof(ncclNetCommConfig_v12_t) == 4, "ncclNetCommConfig_v12_t is 4 bytes");
TALLY_ABI_ASSERT(sizeof(ncclNetCommAttr_v12_t) == 16, "ncclNetCommAttr_v12_t is 16 bytes");
TALLY_ABI_ASSERT(sizeof(ncclNetAttr_v12_t) == 44, "ncclNetAttr_v12_t is 44 bytes");
TALLY_ABI_ASSERT(offsetof(ncclNetAttr_v12_t, recvCommAttr) == 16, "v12 recvCommAttr @16");
TALLY_ABI_ASSERT(offsetof(ncclNetAttr_v12_t, op) == 32, "v12 op @32");
TALLY_ABI_ASSERT(offsetof(ncclNetAttr_v12_t, algo) == 36, "v12 algo @36");
TALLY_ABI_ASSERT(offsetof(ncclNetAttr_v12_t, proto) == 40, "v12 proto @40");
TALLY_ABI_ASSERT(sizeof(ncclNetSGE_v12_t) == 24, "ncclNetSGE_v12_t is 24 bytes");
TALLY_ABI_ASSERT(offsetof(ncclNetSGE_v12_t, address) == 8, "v12 SGE address @8");
TALLY_ABI_ASSERT(offsetof(ncclNetSGE_v12_t, size) == 16, "v12 SGE size @16");
TALLY_ABI_ASSERT(sizeof(ncclNetDeviceHandle_v12_t) == 32, "ncclNetDeviceHandle_v12_t is 32 bytes");
TALLY_ABI_ASSERT(offsetof(ncclNetDeviceHandle_v12_t, needsProxyProgress) == 24,
                 "v12 needsProxyProgress @24");

TALLY_ABI_ASSERT(sizeof(ncclNet_v12_t) == 176, "ncclNet_v12_t is 22 slots");
TALLY_ABI_ASSERT(offsetof(ncclNet_v12_t, init) == 8, "ncclNet_v12_t init @8");
TALLY_ABI_ASSERT(offsetof(ncclNet_v12_t, getProperties) == 24, "ncclNet_v12_t getProperties @24");
TALLY_ABI_ASSERT(offsetof(ncclNet_v12_t, listen) == 32, "ncclNet_v12_t listen @32");
TALLY_ABI_ASSERT(offsetof(ncclNet_v12_t, connect) == 40, "ncclNet_v12_t connect @40");
TALLY_ABI_ASSERT(offsetof(ncclNet_v12_t, regMr) == 56, "ncclNet_v12_t regMr @56");
TALLY_ABI_ASSERT(offsetof(ncclNet_v12_t, regMrDmaBuf) == 64, "ncclNet_v12_t regMrDmaBuf @64");
TALLY_ABI_ASSERT(offsetof(ncclNet_v12_t, isend) == 80, "ncclNet_v12_t isend @80");
TALLY_ABI_ASSERT(offsetof(ncclNet_v12_t, irecv) == 88, "ncclNet_v12_t irecv @88");
TALLY_ABI_ASSERT(offsetof(ncclNet_v12_t, iflush) == 96, "ncclNet_v12_t iflush @96");
TALLY_ABI_ASSERT(offsetof(ncclNet_v12_t, test) == 104, "ncclNet_v12_t test @104");
TALLY_ABI_ASSERT(offsetof(ncclNet_v12_t, getDeviceMr) == 136, "ncclNet_v12_t getDeviceMr @136");
TALLY_ABI_ASSERT(offsetof(ncclNet_v12_t, irecvConsumed) == 144,
                 "ncclNet_v12_t irecvConsumed @144");
TALLY_ABI_ASSERT(offsetof(ncclNet_v12_t, makeVDevice) == 152, "ncclNet_v12_t makeVDevice @152");
TALLY_ABI_ASSERT(offsetof(ncclNet_v12_t, finalize) == 160, "ncclNet_v12_t finalize @160");
TALLY_ABI_ASSERT(offsetof(ncclNet_v12_t, setNetAttr) == 168, "ncclNet_v12_t setNetAttr @168");

TALLY_ABI_ASSERT(sizeof(ncclCollNet_v12_t) == 152, "ncclCollNet_v12_t is 19 slots");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v12_t, getProperties) == 24,
                 "ncclCollNet_v12_t getProperties @24");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v12_t, listen) == 32, "ncclCollNet_v12_t listen @32");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v12_t, connect) == 40, "ncclCollNet_v12_t connect @40");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v12_t, reduceSupport) == 48,
                 "ncclCollNet_v12_t reduceSupport @48");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v12_t, regMrDmaBuf) == 64,
                 "ncclCollNet_v12_t regMrDmaBuf @64");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v12_t, iallreduce) == 80,
                 "ncclCollNet_v12_t iallreduce @80");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v12_t, iallgather) == 88,
                 "ncclCollNet_v12_t iallgather @88");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v12_t, ireducescatter) == 96,
                 "ncclCollNet_v12_t ireducescatter @96");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v12_t, iflush) == 104, "ncclCollNet_v12_t iflush @104");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v12_t, test) == 112, "ncclCollNet_v12_t test @112");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v12_t, closeColl) == 120,
                 "ncclCollNet_v12_t closeColl @120");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v12_t, closeListen) == 128,
                 "ncclCollNet_v12_t closeListen @128");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v12_t, makeVDevice) == 136,
                 "ncclCollNet_v12_t makeVDevice @136");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v12_t, finalize) == 144,
                 "ncclCollNet_v12_t finalize @144");

#endif /* TALLY_PLUGIN_ABI_NET_V12_H_ */
