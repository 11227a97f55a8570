// The exported ncclCollNet tables, v8 to v12 (STYLE 2, layer a). Same scheme as tables_net.cc.
// iallgather and ireducescatter stay NULL: CollNet then serves AllReduce only (reference 14.4).
#include "plugin/abi/abi.h"
#include "plugin/coll_api.h"
#include "plugin/convert.h"
#include "plugin/export.h"
#include "plugin/props_convert.h"

namespace tally::plugin {
namespace {

constexpr const char* kPluginName = "Tally";

// v8 to v10: init(logger), once per process.
ncclResult_t collInitV8(ncclDebugLogger_t logger) { return collInit(nullptr, 0, logger); }
// v11: init per communicator, returning a ctx.
ncclResult_t collInitV11(void** ctx, uint64_t comm_id, ncclDebugLogger_t logger) {
  if (ctx == nullptr) return ncclInternalError;
  return collInit(ctx, comm_id, logger);
}

// v8 to v10: listen without ctx.
ncclResult_t collListenV8(int dev, void* handle, void** listen_comm) {
  return collListen(nullptr, dev, handle, listen_comm);
}

// Every version: the element type and op reach coll_api as the ints NCCL passed (rawValue).
ncclResult_t reduceSupport(ncclDataType_t type, ncclRedOp_t op, int* supported) {
  return collReduceSupport(rawValue(type), rawValue(op), supported);
}

ncclResult_t iallreduce(void* coll_comm, void* send, void* recv, size_t count, ncclDataType_t type,
                        ncclRedOp_t op, void* send_mhandle, void* recv_mhandle, void** request) {
  return collIallreduce(coll_comm, send, recv, count, rawValue(type), rawValue(op), send_mhandle,
                        recv_mhandle, request);
}

// v8: int count.
ncclResult_t iallreduceV8(void* coll_comm, void* send, void* recv, int count, ncclDataType_t type,
                          ncclRedOp_t op, void* send_mhandle, void* recv_mhandle, void** request) {
  if (count < 0) return ncclInternalError;
  return collIallreduce(coll_comm, send, recv, static_cast<size_t>(count), rawValue(type),
                        rawValue(op), send_mhandle, recv_mhandle, request);
}

}  // namespace
}  // namespace tally::plugin

namespace tp = tally::plugin;

extern "C" TALLY_EXPORT const ncclCollNet_v8_t ncclCollNetPlugin_v8 = {
    .name = tp::kPluginName,
    .init = tp::collInitV8,
    .devices = tp::collDevices,
    .getProperties = tp::getPropertiesV8<tp::collGetProperties>,
    .listen = tp::collListenV8,
    .connect = tp::collConnect,
    .reduceSupport = tp::reduceSupport,
    .regMr = tp::collRegMr,
    .regMrDmaBuf = nullptr,
    .deregMr = tp::collDeregMr,
    .iallreduce = tp::iallreduceV8,
    .iallgather = nullptr,
    .ireducescatter = nullptr,
    .iflush = tp::collIflush,
    .test = tp::collTest,
    .closeColl = tp::collCloseColl,
    .closeListen = tp::collCloseListen,
};

extern "C" TALLY_EXPORT const ncclCollNet_v9_t ncclCollNetPlugin_v9 = {
    .name = tp::kPluginName,
    .init = tp::collInitV8,
    .devices = tp::collDevices,
    .getProperties = tp::getPropertiesV9<tp::collGetProperties>,
    .listen = tp::collListenV8,
    .connect = tp::collConnect,
    .reduceSupport = tp::reduceSupport,
    .regMr = tp::collRegMr,
    .regMrDmaBuf = nullptr,
    .deregMr = tp::collDeregMr,
    .iallreduce = tp::iallreduce,
    .iallgather = nullptr,
    .ireducescatter = nullptr,
    .iflush = tp::collIflush,
    .test = tp::collTest,
    .closeColl = tp::collCloseColl,
    .closeListen = tp::collCloseListen,
    .makeVDevice = nullptr,
};

extern "C" TALLY_EXPORT const ncclCollNet_v10_t ncclCollNetPlugin_v10 = {
    .name = tp::kPluginName,
    .init = tp::collInitV8,
    .devices = tp::collDevices,
    .getProperties = tp::getPropertiesV9<tp::collGetProperties>,  // v10 layout = v9
    .listen = tp::collListenV8,
    .connect = tp::collConnect,
    .reduceSupport = tp::reduceSupport,
    .regMr = tp::collRegMr,
    .regMrDmaBuf = nullptr,
    .deregMr = tp::collDeregMr,
    .iallreduce = tp::iallreduce,
    .iallgather = nullptr,
    .ireducescatter = nullptr,
    .iflush = tp::collIflush,
    .test = tp::collTest,
    .closeColl = tp::collCloseColl,
    .closeListen = tp::collCloseListen,
    .makeVDevice = nullptr,
};

extern "C" TALLY_EXPORT const ncclCollNet_v11_t ncclCollNetPlugin_v11 = {
    .name = tp::kPluginName,
    .init = tp::collInitV11,
    .devices = tp::collDevices,
    .getProperties = tp::collGetProperties,
    .listen = tp::collListen,
    .connect = tp::collConnect,
    .reduceSupport = tp::reduceSupport,
    .regMr = tp::collRegMr,
    .regMrDmaBuf = nullptr,
    .deregMr = tp::collDeregMr,
    .iallreduce = tp::iallreduce,
    .iallgather = nullptr,
    .ireducescatter = nullptr,
    .iflush = tp::collIflush,
    .test = tp::collTest,
    .closeColl = tp::collCloseColl,
    .closeListen = tp::collCloseListen,
    .makeVDevice = nullptr,
    .finalize = tp::collFinalize,
};

// v12 changes only the property layout; every other slot is v11's.
extern "C" TALLY_EXPORT const ncclCollNet_v12_t ncclCollNetPlugin_v12 = {
    .name = tp::kPluginName,
    .init = tp::collInitV11,
    .devices = tp::collDevices,
    .getProperties = tp::getPropertiesV12<tp::collGetProperties>,
    .listen = tp::collListen,
    .connect = tp::collConnect,
    .reduceSupport = tp::reduceSupport,
    .regMr = tp::collRegMr,
    .regMrDmaBuf = nullptr,
    .deregMr = tp::collDeregMr,
    .iallreduce = tp::iallreduce,
    .iallgather = nullptr,      // set by the all-gather / reduce-scatter change
    .ireducescatter = nullptr,  // set by the all-gather / reduce-scatter change
    .iflush = tp::collIflush,
    .test = tp::collTest,
    .closeColl = tp::collCloseColl,
    .closeListen = tp::collCloseListen,
    .makeVDevice = nullptr,
    .finalize = tp::collFinalize,
};
