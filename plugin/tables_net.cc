// SPDX-License-Identifier: Apache-2.0
// The exported ncclNet tables, v8 to v12: the outer layer of the plugin, which only adapts each
// version's signatures. One adapter per signature change, named for the version that introduced
// it and reused by later tables; slots whose signature never changed point straight at the
// version-free entry points in net_api.h.
#include <climits>
#include <string>

#include "plugin/abi/abi.h"
#include "plugin/edge.h"
#include "plugin/net_api.h"
#include "plugin/state.h"
#include "plugin/tables.h"

namespace tally::plugin {
namespace {

// v8 (and v9): init(logger); NCCL calls it once per process.
ncclResult_t initV8(ncclDebugLogger_t logger) { return netInit(nullptr, 0, nullptr, logger); }
// v10: init gains the profiler callback (Tally emits no profiler events).
ncclResult_t initV10(ncclDebugLogger_t logger, ncclProfilerCallback_t /*prof*/) {
  return netInit(nullptr, 0, nullptr, logger);
}
// v11: init per communicator, returning a ctx.
ncclResult_t initV11(void** ctx, uint64_t comm_id, ncclNetCommConfig_v11_t* config,
                     ncclDebugLogger_t logger, ncclProfilerCallback_t /*prof*/) {
  if (ctx == nullptr) return ncclInternalError;
  return netInit(ctx, comm_id, config, logger);
}

// v8 to v10: listen without ctx.
ncclResult_t listenV8(int dev, void* handle, void** listen_comm) {
  return netListen(nullptr, dev, handle, listen_comm);
}

// v8, v9: connect(dev, handle, ...).
ncclResult_t connectV8(int dev, void* handle, void** send_comm,
                       ncclNetDeviceHandle_v8_t** send_dev_comm) {
  return netConnect(nullptr, dev, handle, send_comm, send_dev_comm);
}
// v10: connect gains the comm config (moved to init in v11).
ncclResult_t connectV10(int dev, ncclNetCommConfig_v10_t* /*config*/, void* handle,
                        void** send_comm, ncclNetDeviceHandle_v10_t** send_dev_comm) {
  return netConnect(nullptr, dev, handle, send_comm, send_dev_comm);
}

// v8: int sizes.
ncclResult_t isendV8(void* send_comm, void* data, int size, int tag, void* mhandle,
                     void** request) {
  if (size < 0) return ncclInternalError;
  return netIsend(send_comm, data, static_cast<size_t>(size), tag, mhandle, request);
}
// A NULL sizes or a count outside 1..maxRecvs is passed on unconverted: netIrecv refuses it with
// the same check and WARN as v9+ (it rejects both before reading any size).
ncclResult_t irecvV8(void* recv_comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                     void** request) {
  size_t wide[kMaxRecvs] = {};
  if (sizes != nullptr && n >= 1 && n <= kMaxRecvs) {
    for (int i = 0; i < n; ++i) {
      if (sizes[i] < 0) {
        return guard("irecv", [&] {
          return Status::internal("irecv of a negative size (" + std::to_string(sizes[i]) +
                                  ") for buffer " + std::to_string(i));
        });
      }
      wide[i] = static_cast<size_t>(sizes[i]);
    }
  }
  return netIrecv(recv_comm, n, data, sizes == nullptr ? nullptr : wide, tags, mhandles, request);
}

// v9: size_t sizes.
ncclResult_t isendV9(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                     void** request) {
  return netIsend(send_comm, data, size, tag, mhandle, request);
}
ncclResult_t irecvV9(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                     void** request) {
  return netIrecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

// v10: profiler handles (ignored).
ncclResult_t isendV10(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                      void* /*phandle*/, void** request) {
  return netIsend(send_comm, data, size, tag, mhandle, request);
}
ncclResult_t irecvV10(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                      void** mhandles, void** /*phandles*/, void** request) {
  return netIrecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

}  // namespace
}  // namespace tally::plugin

namespace tp = tally::plugin;

extern "C" TALLY_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = tp::kPluginName,
    .init = tp::initV8,
    .devices = tp::netDevices,
    .getProperties = tp::getPropertiesV8<tp::netGetProperties>,
    .listen = tp::listenV8,
    .connect = tp::connectV8,
    .accept = tp::netAccept,
    .regMr = tp::netRegMr,
    .regMrDmaBuf = tp::netRegMrDmaBuf,  // called only where NCCL_PTR_DMABUF is advertised
    .deregMr = tp::netDeregMr,
    .isend = tp::isendV8,
    .irecv = tp::irecvV8,
    .iflush = tp::netIflush,
    .test = tp::netTest,
    .closeSend = tp::netCloseSend,
    .closeRecv = tp::netCloseRecv,
    .closeListen = tp::netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
};

extern "C" TALLY_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = tp::kPluginName,
    .init = tp::initV8,
    .devices = tp::netDevices,
    .getProperties = tp::getPropertiesV9<tp::netGetProperties>,
    .listen = tp::listenV8,
    .connect = tp::connectV8,
    .accept = tp::netAccept,
    .regMr = tp::netRegMr,
    .regMrDmaBuf = tp::netRegMrDmaBuf,
    .deregMr = tp::netDeregMr,
    .isend = tp::isendV9,
    .irecv = tp::irecvV9,
    .iflush = tp::netIflush,
    .test = tp::netTest,
    .closeSend = tp::netCloseSend,
    .closeRecv = tp::netCloseRecv,
    .closeListen = tp::netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
};

extern "C" TALLY_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = tp::kPluginName,
    .init = tp::initV10,
    .devices = tp::netDevices,
    .getProperties = tp::getPropertiesV9<tp::netGetProperties>,  // v10 layout = v9
    .listen = tp::listenV8,
    .connect = tp::connectV10,
    .accept = tp::netAccept,
    .regMr = tp::netRegMr,
    .regMrDmaBuf = tp::netRegMrDmaBuf,
    .deregMr = tp::netDeregMr,
    .isend = tp::isendV10,
    .irecv = tp::irecvV10,
    .iflush = tp::netIflush,
    .test = tp::netTest,
    .closeSend = tp::netCloseSend,
    .closeRecv = tp::netCloseRecv,
    .closeListen = tp::netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
};

extern "C" TALLY_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = tp::kPluginName,
    .init = tp::initV11,
    .devices = tp::netDevices,
    .getProperties = tp::netGetProperties,
    .listen = tp::netListen,
    .connect = tp::netConnect,
    .accept = tp::netAccept,
    .regMr = tp::netRegMr,
    .regMrDmaBuf = tp::netRegMrDmaBuf,
    .deregMr = tp::netDeregMr,
    .isend = tp::isendV10,
    .irecv = tp::irecvV10,
    .iflush = tp::netIflush,
    .test = tp::netTest,
    .closeSend = tp::netCloseSend,
    .closeRecv = tp::netCloseRecv,
    .closeListen = tp::netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
    .finalize = tp::netFinalize,
    .setNetAttr = tp::netSetNetAttr,
};

// v12 changes only the property layout; every other slot is v11's. makeVDevice stays NULL (NCCL
// then merges no NICs) and setNetAttr accepts any op, algo and proto bits.
extern "C" TALLY_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = tp::kPluginName,
    .init = tp::initV11,
    .devices = tp::netDevices,
    .getProperties = tp::getPropertiesV12<tp::netGetProperties>,
    .listen = tp::netListen,
    .connect = tp::netConnect,
    .accept = tp::netAccept,
    .regMr = tp::netRegMr,
    .regMrDmaBuf = tp::netRegMrDmaBuf,
    .deregMr = tp::netDeregMr,
    .isend = tp::isendV10,
    .irecv = tp::irecvV10,
    .iflush = tp::netIflush,
    .test = tp::netTest,
    .closeSend = tp::netCloseSend,
    .closeRecv = tp::netCloseRecv,
    .closeListen = tp::netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
    .finalize = tp::netFinalize,
    .setNetAttr = tp::netSetNetAttr,
};
