// SPDX-License-Identifier: Apache-2.0
/* Version 10 of NCCL's net and CollNet plugin tables, Tally's own declaration. v10 changes no
 * struct layout: the v10 property, vProps and SGE types are the v9 ones under new names (so an
 * adapter written for v9 fits a v10 slot unchanged). Net init gains the profiler callback, net
 * connect gains a config, isend/irecv gain profiler handles. The CollNet table is the v9 one with
 * the new type names.
 */
#ifndef TALLY_PLUGIN_ABI_NET_V10_H_
#define TALLY_PLUGIN_ABI_NET_V10_H_

#include "plugin/abi/net_v9.h"

typedef ncclNetVDeviceProps_v9_t ncclNetVDeviceProps_v10_t;
typedef ncclNetProperties_v9_t ncclNetProperties_v10_t;
typedef ncclNetSGE_v9_t ncclNetSGE_v10_t;

typedef struct {
  int trafficClass; /* NCCL_NET_TRAFFIC_CLASS_UNDEF unless the application set one */
} ncclNetCommConfig_v10_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t* config, void* handle,
                          void** sendComm, ncclNetDeviceHandle_v10_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v10_t** recvDevComm);
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
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v10_t* props);
} ncclNet_v10_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t* props);
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
                             ncclNetSGE_v10_t* recvParts, size_t bytesPerRank,
                             size_t windowOffset, size_t windowBytes, void* sendMhandle,
                             void** request);
  ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_v10_t* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                 void* recvMhandle, void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v10_t* props);
} ncclCollNet_v10_t;

TALLY_ABI_ASSERT(sizeof(ncclNetProperties_v10_t) == 104, "ncclNetProperties_v10_t is 104 bytes");
TALLY_ABI_ASSERT(sizeof(ncclNetCommConfig_v10_t) == 4, "ncclNetCommConfig_v10_t is 4 bytes");

TALLY_ABI_ASSERT(sizeof(ncclNet_v10_t) == 160, "ncclNet_v10_t is 20 slots");
TALLY_ABI_ASSERT(offsetof(ncclNet_v10_t, init) == 8, "ncclNet_v10_t init @8");
TALLY_ABI_ASSERT(offsetof(ncclNet_v10_t, connect) == 40, "ncclNet_v10_t connect @40");
TALLY_ABI_ASSERT(offsetof(ncclNet_v10_t, isend) == 80, "ncclNet_v10_t isend @80");
TALLY_ABI_ASSERT(offsetof(ncclNet_v10_t, irecv) == 88, "ncclNet_v10_t irecv @88");
TALLY_ABI_ASSERT(offsetof(ncclNet_v10_t, makeVDevice) == 152, "ncclNet_v10_t makeVDevice @152");

TALLY_ABI_ASSERT(sizeof(ncclCollNet_v10_t) == 144, "ncclCollNet_v10_t is 18 slots");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v10_t, iallreduce) == 80,
                 "ncclCollNet_v10_t iallreduce @80");
TALLY_ABI_ASSERT(offsetof(ncclCollNet_v10_t, makeVDevice) == 136,
                 "ncclCollNet_v10_t makeVDevice @136");

#endif /* TALLY_PLUGIN_ABI_NET_V10_H_ */
