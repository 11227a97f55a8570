// SPDX-License-Identifier: Apache-2.0
// CUDA 13's cudaTypedefs.h declares each driver-API pointer type only with its version suffix
// (PFN_cuMemCreate_v10020); NCCL before 2.23 names them without one (PFN_cuMemCreate). Forced
// into those NCCL files by the nccl-source build, this maps each name NCCL uses to the version of
// the call NCCL loads. The tests never call through these pointers: the files only need to
// compile.
#pragma once

#include <cuda.h>
#if CUDA_VERSION >= 13000
#include <cudaTypedefs.h>

#define PFN_cuCtxCreate PFN_cuCtxCreate_v3020
#define PFN_cuCtxDestroy PFN_cuCtxDestroy_v4000
#define PFN_cuCtxGetCurrent PFN_cuCtxGetCurrent_v4000
#define PFN_cuCtxGetDevice PFN_cuCtxGetDevice_v2000
#define PFN_cuCtxSetCurrent PFN_cuCtxSetCurrent_v4000
#define PFN_cuDeviceGet PFN_cuDeviceGet_v2000
#define PFN_cuDeviceGetAttribute PFN_cuDeviceGetAttribute_v2000
#define PFN_cuGetErrorName PFN_cuGetErrorName_v6000
#define PFN_cuGetErrorString PFN_cuGetErrorString_v6000
#define PFN_cuMemAddressFree PFN_cuMemAddressFree_v10020
#define PFN_cuMemAddressReserve PFN_cuMemAddressReserve_v10020
#define PFN_cuMemCreate PFN_cuMemCreate_v10020
#define PFN_cuMemExportToShareableHandle PFN_cuMemExportToShareableHandle_v10020
#define PFN_cuMemGetAddressRange PFN_cuMemGetAddressRange_v3020
#define PFN_cuMemGetAllocationGranularity PFN_cuMemGetAllocationGranularity_v10020
#define PFN_cuMemGetHandleForAddressRange PFN_cuMemGetHandleForAddressRange_v11070
#define PFN_cuMemImportFromShareableHandle PFN_cuMemImportFromShareableHandle_v10020
#define PFN_cuMemMap PFN_cuMemMap_v10020
#define PFN_cuMemRelease PFN_cuMemRelease_v10020
#define PFN_cuMemRetainAllocationHandle PFN_cuMemRetainAllocationHandle_v11000
#define PFN_cuMemSetAccess PFN_cuMemSetAccess_v10020
#define PFN_cuMemUnmap PFN_cuMemUnmap_v10020
#define PFN_cuMulticastAddDevice PFN_cuMulticastAddDevice_v12010
#define PFN_cuMulticastBindAddr PFN_cuMulticastBindAddr_v12010
#define PFN_cuMulticastBindMem PFN_cuMulticastBindMem_v12010
#define PFN_cuMulticastCreate PFN_cuMulticastCreate_v12010
#define PFN_cuMulticastGetGranularity PFN_cuMulticastGetGranularity_v12010
#define PFN_cuMulticastUnbind PFN_cuMulticastUnbind_v12010
#define PFN_cuPointerGetAttribute PFN_cuPointerGetAttribute_v4000

#endif
