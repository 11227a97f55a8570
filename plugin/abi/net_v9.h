// SPDX-License-Identifier: Apache-2.0
/* Version 9 of NCCL's net and CollNet plugin tables, Tally's own declaration. v9 adds forceFlush,
 * vProps, maxP2pBytes and maxCollBytes to the properties, size_t sizes for isend/irecv, a size_t
 * all-reduce count and SGE size, and makeVDevice.
 */
#ifndef TALLY_PLUGIN_ABI_NET_V9_H_
#define TALLY_PLUGIN_ABI_NET_V9_H_

#include "plugin/abi/nccl_types.h"

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_v9_t;

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
  ncclNetVDeviceProps_v9_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} ncclNetProperties_v9_t;

typedef struct {
  void* mhandle;
  void* address;
  size_t size;
} ncclNetSGE_v9_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v9_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v9_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v9_t* props);
} ncclNet_v9_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
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
                             ncclNetSGE_v9_t* recvParts, size_t bytesPerRank,
                             size_t windowOffset, size_t windowBytes, void* sendMhandle,
                             void** request);
  ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_v9_t* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                 void* recvMhandle, void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v9_t* props);
} ncclCollNet_v9_t;

TALLY_ABI_ASSERT(sizeof(ncclNetVDeviceProps_v9_t) == 20, "ncclNetVDeviceProps_v9_t is 20 bytes");
TALLY_ABI_ASSERT(offsetof(ncclNetVDeviceProps_v9_t, devs) == 4, "vProps devs @4");

TALLY_ABI_ASSERT(sizeof(ncclNetProperties_v9_t) == 104, "ncclNetProperties_v9_t is 104 bytes");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, guid) == 16, "v9 guid @16");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, ptrSupport) == 24, "v9 ptrSupport @24");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, regIsGlobal) == 28, "v9 regIsGlobal @28");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, forceFlush) == 32, "v9 forceFlush @32");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, speed) == 36, "v9 speed @36");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, port) == 40, "v9 port @40");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, latency) == 44, "v9 latency @44");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, maxComms) == 48, "v9 maxComms @48");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, maxRecvs) == 52, "v9 maxRecvs @52");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, netDeviceType) == 56, "v9 netDeviceType @56");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, netDeviceVersion) == 60,
                 "v9 netDeviceVersion @60");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, vProps) == 64, "v9 vProps @64");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88, "v9 maxP2pBytes @88");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, maxCollBytes) == 96, "v9 maxCollBytes @96");

TALLY_ABI_ASSERT(sizeof(ncclNetSGE_v9_t) == 24, "ncclNetSGE_v9_t is 24 bytes");
TALLY_ABI_ASSERT(offsetof(ncclNetSGE_v9_t, size) == 16, "v9 SGE size @16");

TALLY_ABI_ASSERT(sizeof(ncclNet_v9_t) == 160, "ncclNet_v9_t is 20 slots");
TALLY_ABI_ASSERT(offsetof(ncclNet_v9_t, isend) == 80, "ncclNet_v9_t isend @80");
TALLY_ABI_ASSERT(offsetof(ncclNet_v9_t, irecv) == 88, "ncclNet_v9_t irecv @88");
TALLY_ABI_ASSERT(offsetof(ncclNet_v9_t, test) == 104, "ncclNet_v9_t test @104");
TALLY_ABI_ASSERT(offsetof(ncclNet_v9_t, makeVDevice) == 152, "ncclNet_v9_t makeVDevice @152");

TALLY_ABI_ASSERT(sizeof(ncclCollNet_v9_t) == 144, "ncclCollNet_v9_t is 18 slots");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v9_t, iallreduce) == 80,
                 "ncclCollNet_v9_t iallreduce @80");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v9_t, closeListen) == 128,
                 "ncclCollNet_v9_t closeListen @128");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v9_t, makeVDevice) == 136,
                 "ncclCollNet_v9_t makeVDevice @136");

#endif /* TALLY_PLUGIN_ABI_NET_V9_H_ */
