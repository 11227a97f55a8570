// SPDX-License-Identifier: Apache-2.0
/* Version 8 of NCCL's net and CollNet plugin tables, Tally's own declaration. Every size and slot
 * offset is asserted below.
 */
#ifndef TALLY_PLUGIN_ABI_NET_V8_H_
#define TALLY_PLUGIN_ABI_NET_V8_H_

#include "plugin/abi/nccl_types.h"

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed; /* Mbps */
  int port;
  float latency; /* microseconds */
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
  void* mhandle;
  void* address;
  uint32_t size;
} ncclNetSGE_v8_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v8_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v8_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags,
                        void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v8_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm,
                          void** collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
  ncclResult_t (*regMr)(void* collComm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* collComm, void* mhandle);
  ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, int count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                             void* recvMhandle, void** request);
  ncclResult_t (*iallgather)(void* collComm, void* sendData, int nRecvParts,
                             ncclNetSGE_v8_t* recvParts, size_t bytesPerRank,
                             size_t windowOffset, size_t windowBytes, void* sendMhandle,
                             void** request);
  ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_v8_t* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                 void* recvMhandle, void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
} ncclCollNet_v8_t;

TALLY_ABI_ASSERT(sizeof(ncclNetProperties_v8_t) == 64, "ncclNetProperties_v8_t is 64 bytes");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, guid) == 16, "v8 guid @16");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, ptrSupport) == 24, "v8 ptrSupport @24");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, regIsGlobal) == 28, "v8 regIsGlobal @28");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, speed) == 32, "v8 speed @32");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, port) == 36, "v8 port @36");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, latency) == 40, "v8 latency @40");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, maxComms) == 44, "v8 maxComms @44");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, maxRecvs) == 48, "v8 maxRecvs @48");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, netDeviceType) == 52, "v8 netDeviceType @52");
TALLY_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56,
                 "v8 netDeviceVersion @56");

TALLY_ABI_ASSERT(sizeof(ncclNetSGE_v8_t) == 24, "ncclNetSGE_v8_t is 24 bytes");
TALLY_ABI_ASSERT(offsetof(ncclNetSGE_v8_t, address) == 8, "v8 SGE address @8");
TALLY_ABI_ASSERT(offsetof(ncclNetSGE_v8_t, size) == 16, "v8 SGE size @16");

TALLY_ABI_ASSERT(sizeof(ncclNet_v8_t) == 152, "ncclNet_v8_t is 19 slots");
TALLY_ABI_ASSERT(offsetof(ncclNet_v8_t, init) == 8, "ncclNet_v8_t init @8");
TALLY_ABI_ASSERT(offsetof(ncclNet_v8_t, connect) == 40, "ncclNet_v8_t connect @40");
TALLY_ABI_ASSERT(offsetof(ncclNet_v8_t, isend) == 80, "ncclNet_v8_t isend @80");
TALLY_ABI_ASSERT(offsetof(ncclNet_v8_t, test) == 104, "ncclNet_v8_t test @104");
TALLY_ABI_ASSERT(offsetof(ncclNet_v8_t, closeListen) == 128, "ncclNet_v8_t closeListen @128");
TALLY_ABI_ASSERT(offsetof(ncclNet_v8_t, irecvConsumed) == 144,
                 "ncclNet_v8_t irecvConsumed @144");

TALLY_ABI_ASSERT(sizeof(ncclCollNet_v8_t) == 136, "ncclCollNet_v8_t is 17 slots");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v8_t, connect) == 40, "ncclCollNet_v8_t connect @40");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v8_t, reduceSupport) == 48,
                 "ncclCollNet_v8_t reduceSupport @48");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v8_t, iallreduce) == 80,
                 "ncclCollNet_v8_t iallreduce @80");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v8_t, iflush) == 104, "ncclCollNet_v8_t iflush @104");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v8_t, test) == 112, "ncclCollNet_v8_t test @112");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v8_t, closeListen) == 128,
                 "ncclCollNet_v8_t closeListen @128");

#endif /* TALLY_PLUGIN_ABI_NET_V8_H_ */
