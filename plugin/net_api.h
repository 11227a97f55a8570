// SPDX-License-Identifier: Apache-2.0
// Version-free entry points of the net (point-to-point) plugin. The tables in tables_net.cc adapt
// each NCCL version's signatures to these. Each validates its arguments, runs behind guard()
// (edge.h: no exception crosses the C ABI, failures are logged and mapped), and forwards to the
// plain C++ objects in net_comm.h. Signatures use the newest (v11) ABI types; `ctx` is nullptr for
// versions before v11.
//
// Contracts:
//   listen never blocks; connect and accept are resumable and return ncclSuccess with a NULL
//   comm until the connection is complete (see NetHandle in net_comm.h for connect's state);
//   isend/irecv return ncclSuccess with a NULL request when no slot is free; test frees a request
//   once it reports done. All are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/net_v11.h"

namespace tally::plugin {

// Loads parameters and devices on the first call, installs the NCCL logger, and returns a fresh
// per-communicator context in *ctx when ctx is non-null (v11).
ncclResult_t netInit(void** ctx, uint64_t comm_id, const ncclNetCommConfig_v11_t* config,
                     ncclDebugLogger_t logger);
ncclResult_t netDevices(int* ndev);
ncclResult_t netGetProperties(int dev, ncclNetProperties_v11_t* props);
ncclResult_t netListen(void* ctx, int dev, void* handle, void** listen_comm);
ncclResult_t netConnect(void* ctx, int dev, void* handle, void** send_comm,
                        ncclNetDeviceHandle_v11_t** send_dev_comm);
ncclResult_t netAccept(void* listen_comm, void** recv_comm,
                       ncclNetDeviceHandle_v11_t** recv_dev_comm);
ncclResult_t netRegMr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t netDeregMr(void* comm, void* mhandle);
ncclResult_t netIsend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                      void** request);
ncclResult_t netIrecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                      void** mhandles, void** request);
// Only where NCCL_PTR_DMABUF is advertised (verbs with ibv_reg_dmabuf_mr).
ncclResult_t netRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                            int fd, void** mhandle);
// A NULL request (done) unless a buffer was registered as CUDA memory and the transport must
// read it back through the NIC.
ncclResult_t netIflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                       void** request);
// sizes (may be NULL) gets one entry per buffer of the request once done. test() has kept int
// sizes in every version, so this one signature serves all tables.
ncclResult_t netTest(void* request, int* done, int* sizes);
ncclResult_t netCloseSend(void* send_comm);
ncclResult_t netCloseRecv(void* recv_comm);
ncclResult_t netCloseListen(void* listen_comm);
// Accepts any ctx, including NULL and one init never set.
ncclResult_t netFinalize(void* ctx);
// Accepted and ignored.
ncclResult_t netSetNetAttr(void* ctx, ncclNetAttr_v11_t* attr);

// Fills every field of a v11 property struct for net device `dev` (CollNet reuses it with
// device_memory false: host pointers only).
ncclResult_t fillProperties(const char* fn, int dev, uint64_t max_coll_bytes, bool device_memory,
                            ncclNetProperties_v11_t* props);

}  // namespace tally::plugin
