// SPDX-License-Identifier: Apache-2.0
// Tally's stand-ins for what NCCL's coll_net.cc and plugin loader call outside the files the proxy
// tests compile: the CUDA runtime calls behind ncclCudaHostCalloc and friends (host memory, since
// a host-memory CollNet gets pinned host buffers whose CPU and GPU addresses coincide), the
// proxy-call plumbing (ncclProxyConnect, ncclProxyCallBlocking: here a direct call of the
// transport's proxy functions, as NCCL's proxy service thread makes it), and the topology queries
// (one CollNet device, no GPUDirect, so no flush).
//
// Nothing here is reached for GPU memory, GDRCopy or DMA-BUF: those paths need useGdr, which the
// topology stub never grants; their symbols fail loudly if they are ever called.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "comm.h"
#include "cudawrap.h"
#include "gdrwrap.h"
#include "graph.h"
#include "proxy.h"
#include "test/nccl_source/proxy/proxy_internal.h"
#include "transport.h"

namespace tally::nccl_source {
namespace {

std::atomic<int64_t> live_host_allocations{0};

}  // namespace

ProxyWorld& proxyWorld() {
  static ProxyWorld world;
  return world;
}

int64_t liveHostAllocations() { return live_host_allocations.load(); }

}  // namespace tally::nccl_source

using tally::nccl_source::proxyWorld;

// ---- CUDA runtime: host memory only ----

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int /*flags*/) {
  // Page-aligned, as pinned memory is.
  void* p = nullptr;
  if (posix_memalign(&p, 4096, size == 0 ? 1 : size) != 0) return cudaErrorMemoryAllocation;
  tally::nccl_source::live_host_allocations++;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (ptr != nullptr) {
    tally::nccl_source::live_host_allocations--;
    free(ptr);
  }
  return cudaSuccess;
}

// Device memory is never asked for (no GPUDirect); freeing NULL is.
cudaError_t cudaMalloc(void** ptr, size_t) {
  *ptr = nullptr;
  return cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* ptr) { return ptr == nullptr ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaMemset(void*, int, size_t) { return cudaErrorInvalidValue; }
cudaError_t cudaMemsetAsync(void*, int, size_t, cudaStream_t) { return cudaErrorInvalidValue; }
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode*) { return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t*, unsigned int) { return cudaErrorNotSupported; }
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t cudaGetLastError() { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t) { return "CUDA call not available in the proxy tests"; }

// ---- CUDA driver entry points NCCL loads at run time: never loaded here ----

int ncclCuMemEnable() { return 0; }
CUmemAllocationHandleType ncclCuMemHandleType = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
decltype(pfn_cuDeviceGet) pfn_cuDeviceGet = nullptr;
decltype(pfn_cuDeviceGetAttribute) pfn_cuDeviceGetAttribute = nullptr;
decltype(pfn_cuGetErrorString) pfn_cuGetErrorString = nullptr;
decltype(pfn_cuMemAddressFree) pfn_cuMemAddressFree = nullptr;
decltype(pfn_cuMemAddressReserve) pfn_cuMemAddressReserve = nullptr;
decltype(pfn_cuMemCreate) pfn_cuMemCreate = nullptr;
decltype(pfn_cuMemGetAddressRange) pfn_cuMemGetAddressRange = nullptr;
decltype(pfn_cuMemGetAllocationGranularity) pfn_cuMemGetAllocationGranularity = nullptr;
decltype(pfn_cuMemGetHandleForAddressRange) pfn_cuMemGetHandleForAddressRange = nullptr;
decltype(pfn_cuMemMap) pfn_cuMemMap = nullptr;
decltype(pfn_cuMemRelease) pfn_cuMemRelease = nullptr;
decltype(pfn_cuMemRetainAllocationHandle) pfn_cuMemRetainAllocationHandle = nullptr;
decltype(pfn_cuMemSetAccess) pfn_cuMemSetAccess = nullptr;
decltype(pfn_cuMemUnmap) pfn_cuMemUnmap = nullptr;

// ---- GDRCopy: absent ----

gdr_t ncclGdrCopy = nullptr;
int64_t ncclParamGdrCopySyncEnable() { return 0; }
int64_t ncclParamGdrCopyFlushEnable() { return 0; }
ncclResult_t wrap_gdr_pin_buffer(gdr_t, unsigned long, size_t, uint64_t, uint32_t, gdr_mh_t*) {
  return ncclSystemError;
}
ncclResult_t wrap_gdr_unpin_buffer(gdr_t, gdr_mh_t) { return ncclSystemError; }
ncclResult_t wrap_gdr_get_info(gdr_t, gdr_mh_t, gdr_info_t*) { return ncclSystemError; }
ncclResult_t wrap_gdr_map(gdr_t, gdr_mh_t, void**, size_t) { return ncclSystemError; }
ncclResult_t wrap_gdr_unmap(gdr_t, gdr_mh_t, void*, size_t) { return ncclSystemError; }
#if NCCL_VERSION_CODE >= 23000
ncclResult_t wrap_gdr_pin_buffer_v2(gdr_t, unsigned long, size_t, uint32_t, gdr_mh_t*) {
  return ncclSystemError;
}
bool ncclGdrPinV2Available() { return false; }
ncclResult_t ncclMemTrack(struct ncclMemManager*, void*, size_t, CUmemGenericAllocationHandle,
                          CUmemAllocationHandleType, ncclMemType_t) {
  return ncclSuccess;
}
ncclResult_t ncclMemUntrack(struct ncclMemManager*, void*, size_t) { return ncclSuccess; }
#endif

// ---- topology: one CollNet device (0), no GPUDirect ----

ncclResult_t ncclTopoGetNetDev(struct ncclComm* comm, int rank, struct ncclTopoGraph*, int, int,
                               int64_t* id, int* dev, int* proxyRank) {
  if (id != nullptr) *id = 0;
  *dev = 0;
  if (proxyRank != nullptr) *proxyRank = rank;
  (void)comm;
  return ncclSuccess;
}

#if NCCL_VERSION_CODE >= 22800
ncclResult_t ncclTopoCheckGdr(struct ncclTopoSystem*, int, int64_t, int,
                              enum ncclTopoGdrMode* gdr) {
  *gdr = ncclTopoGdrModeDisable;
  return ncclSuccess;
}
#else
ncclResult_t ncclTopoCheckGdr(struct ncclTopoSystem*, int64_t, int64_t, int, int* gdr) {
  *gdr = 0;
  return ncclSuccess;
}
#endif

#if NCCL_VERSION_CODE >= 23000
ncclResult_t ncclTopoNeedFlush(struct ncclComm*, int64_t, int, int, enum ncclTopoFlushType* flush) {
  *flush = ncclTopoFlushType(0);
  return ncclSuccess;
}
#elif NCCL_VERSION_CODE >= 22800
ncclResult_t ncclTopoNeedFlush(struct ncclComm*, int64_t, int, int, int* flush) {
  *flush = 0;
  return ncclSuccess;
}
#else
ncclResult_t ncclTopoNeedFlush(struct ncclTopoSystem*, int64_t, int* flush) {
  *flush = 0;
  return ncclSuccess;
}
#endif

// ---- proxy plumbing: the proxy lives in this process and this thread ----

// What NCCL's proxy service does when a rank connects to it: a new connection of the transport's
// send or receive kind.
ncclResult_t ncclProxyConnect(struct ncclComm* comm, int transport, int send, int proxyRank,
                              struct ncclProxyConnector* proxyConn) {
  if (transport != TRANSPORT_COLLNET) return ncclInternalError;
  auto* connection = static_cast<ncclProxyConnection*>(calloc(1, sizeof(ncclProxyConnection)));
  if (connection == nullptr) return ncclSystemError;
  connection->send = send;
  connection->transport = transport;
  connection->tpLocalRank = proxyConn->tpLocalRank;
  connection->sameProcess = 1;
  connection->tcomm = send ? &collNetTransport.send : &collNetTransport.recv;
  connection->state = connInitialized;
#if NCCL_VERSION_CODE >= 22800
  proxyConn->initialized = true;
  proxyConn->rank = proxyRank;
#endif
  proxyConn->tpRank = proxyRank;
  proxyConn->sameProcess = 1;
  proxyConn->connection = connection;
  proxyWorld().connections.push_back(connection);
  (void)comm;
  return ncclSuccess;
}

// The proxy service thread's handling of a setup or connect message, called in place: the
// transport's proxySetup or proxyConnect on the connection, until it says done.
ncclResult_t ncclProxyCallBlocking(struct ncclComm*, struct ncclProxyConnector* proxyConn, int type,
                                   void* reqBuff, int reqSize, void* respBuff, int respSize) {
  ncclProxyConnection* connection = proxyConn->connection;
  ncclProxyState* state = proxyWorld().proxy_state;
  if (connection == nullptr || state == nullptr) return ncclInternalError;
  for (int tries = 0; tries < 1000000; tries++) {
    int done = 1;
    ncclResult_t rc;
    if (type == ncclProxyMsgSetup) {
      rc = connection->tcomm->proxySetup(connection, state, reqBuff, reqSize, respBuff, respSize,
                                         &done);
    } else if (type == ncclProxyMsgConnect) {
      rc = connection->tcomm->proxyConnect(connection, state, reqBuff, reqSize, respBuff, respSize,
                                           &done);
      if (rc == ncclSuccess && done) connection->state = connConnected;
    } else {
      return ncclInternalError;
    }
    if (rc != ncclSuccess) return rc;
    if (done) return ncclSuccess;
    usleep(100);
  }
  return ncclInternalError;
}
