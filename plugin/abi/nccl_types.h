// SPDX-License-Identifier: Apache-2.0
/* Tally's own declaration of the basic NCCL types a net/CollNet plugin sees (NCCL 2.28 ABI).
 *
 * Written from the facts of the ABI (layouts, constants), not from NCCL's headers; every size
 * is asserted. Plain C, self-contained (no other Tally header), usable from C and C++. The names
 * are NCCL's so that code reads like the ABI it implements; the library never includes NCCL
 * itself.
 */
#ifndef TALLY_PLUGIN_ABI_NCCL_TYPES_H_
#define TALLY_PLUGIN_ABI_NCCL_TYPES_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define TALLY_ABI_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define TALLY_ABI_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* ---- Constants ----------------------------------------------------------------------------- */

#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_MAX_DEVS_PER_NIC 4
#define NCCL_NET_MAX_PLUGINS 16
#define NCCL_MAX_NET_SIZE_BYTES (1ull << 40) /* 1 TiB */

#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
#define NCCL_NET_MULTI_REQUEST 0x2

#define NCCL_NET_TRAFFIC_CLASS_UNDEF -1
#define NCCL_NET_ATTR_UNDEF -1
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
#define NCCL_NET_MTU_SIZE 4096
#define NCCL_NET_DEVICE_UNPACK_VERSION 0x7

/* ---- Results (4.1) ----------------------------------------------------------------------- */

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

/* ---- Data types (4.2) -------------------------------------------------------------------- */

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* ---- Reduction operations (4.3) ----------------------------------------------------------- */

typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  /* Values from ncclNumOps up to this one are user-created (PreMulSum) ops. */
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

/* ---- Logging (4.5) ------------------------------------------------------------------------ */

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef enum {
  NCCL_INIT = 0x1,
  NCCL_COLL = 0x2,
  NCCL_P2P = 0x4,
  NCCL_SHM = 0x8,
  NCCL_NET = 0x10,
  NCCL_GRAPH = 0x20,
  NCCL_TUNING = 0x40,
  NCCL_ENV = 0x80,
  NCCL_ALLOC = 0x100,
  NCCL_CALL = 0x200,
  NCCL_PROXY = 0x400,
  NCCL_NVLS = 0x800,
  NCCL_BOOTSTRAP = 0x1000,
  NCCL_REG = 0x2000,
  NCCL_PROFILE = 0x4000,
  NCCL_RAS = 0x8000,
  NCCL_ALL = ~0
} ncclDebugLogSubSys;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                  int line, const char* fmt, ...);

/* ---- Profiler callback (4.6), passed to net init from v10 on ------------------------------ */

typedef enum {
  ncclProfilerNetEventStart = 0,
  ncclProfilerNetEventStop = 1,
  ncclProfilerNetEventUpdate = 2,
  ncclProfilerNetEventUpdateAndStop = 3
} ncclProfilerNetEventType;

typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* pHandle,
                                               int64_t pluginId, void* extData);

/* ---- Device-offload types (4.4, 5) -------------------------------------------------------- */

typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
  NCCL_NET_DEVICE_GIN_PROXY = 2,
  NCCL_NET_DEVICE_GIN_GDAKI = 3
} ncclNetDeviceType;

typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v7_t;

typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v11_t;

/* ---- Sizes -------------------------------------------------------------------------------- */

TALLY_ABI_ASSERT(sizeof(ncclResult_t) == 4, "ncclResult_t is 4 bytes");
TALLY_ABI_ASSERT(sizeof(ncclDataType_t) == 4, "ncclDataType_t is 4 bytes");
TALLY_ABI_ASSERT(sizeof(ncclRedOp_t) == 4, "ncclRedOp_t is 4 bytes");
TALLY_ABI_ASSERT(sizeof(ncclDebugLogLevel) == 4, "ncclDebugLogLevel is 4 bytes");
TALLY_ABI_ASSERT(sizeof(ncclNetDeviceType) == 4, "ncclNetDeviceType is 4 bytes");
TALLY_ABI_ASSERT(sizeof(ncclNetDeviceHandle_v7_t) == 32, "ncclNetDeviceHandle_v7_t is 32 bytes");
TALLY_ABI_ASSERT(offsetof(ncclNetDeviceHandle_v7_t, netDeviceVersion) == 4, "netDeviceVersion @4");
TALLY_ABI_ASSERT(offsetof(ncclNetDeviceHandle_v7_t, handle) == 8, "handle @8");
TALLY_ABI_ASSERT(offsetof(ncclNetDeviceHandle_v7_t, size) == 16, "size @16");
TALLY_ABI_ASSERT(offsetof(ncclNetDeviceHandle_v7_t, needsProxyProgress) == 24,
                 "needsProxyProgress @24");

#endif /* TALLY_PLUGIN_ABI_NCCL_TYPES_H_ */
