// SPDX-License-Identifier: Apache-2.0
// The exported ncclCollNet tables, v8 to v12: signature adapters over the version-free entry
// points in coll_api.h, on the same scheme as tables_net.cc. iallgather and ireducescatter are
// set in every table: NCCL 2.30 wraps a v8 to v11 table in adapters that call these two slots
// without checking them for NULL, and uses a v12 table's slots as they are.
#include "plugin/abi/abi.h"
#include "plugin/coll_api.h"
#include "plugin/tables.h"

namespace tally::plugin {
namespace {

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

// NCCL's scatter-gather list, any version (v8's size is 32 bits), as CollParts. More parts than
// this are refused by coll_api all the same; the count passes through for its message.
constexpr int kMaxParts = 8;
template <typename Sge>
bool toParts(int n, const Sge* sges, CollPart* parts) {
  if (n < 0 || n > kMaxParts || (n > 0 && sges == nullptr)) return false;
  for (int i = 0; i < n; ++i) {
    parts[i].address = sges[i].address;
    parts[i].size = sges[i].size;
  }
  return true;
}

template <typename Sge>
ncclResult_t iallgather(void* coll_comm, void* send, int n_recv_parts, Sge* recv_parts,
                        size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
                        void* /*send_mhandle*/, void** request) {
  CollPart parts[kMaxParts];
  const bool ok = toParts(n_recv_parts, recv_parts, parts);
  return collIallgather(coll_comm, send, n_recv_parts, ok ? parts : nullptr, bytes_per_rank,
                        window_offset, window_bytes, request);
}

template <typename Sge>
ncclResult_t ireducescatter(void* coll_comm, int n_send_parts, Sge* send_parts, void* recv,
                            size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
                            ncclDataType_t type, ncclRedOp_t op, void* /*recv_mhandle*/,
                            void** request) {
  CollPart parts[kMaxParts];
  const bool ok = toParts(n_send_parts, send_parts, parts);
  return collIreducescatter(coll_comm, n_send_parts, ok ? parts : nullptr, recv, bytes_per_rank,
                            window_offset, window_bytes, rawValue(type), rawValue(op), request);
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
    .iallgather = tp::iallgather<ncclNetSGE_v8_t>,
    .ireducescatter = tp::ireducescatter<ncclNetSGE_v8_t>,
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
    .iallgather = tp::iallgather<ncclNetSGE_v9_t>,
    .ireducescatter = tp::ireducescatter<ncclNetSGE_v9_t>,
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
    .iallgather = tp::iallgather<ncclNetSGE_v10_t>,
    .ireducescatter = tp::ireducescatter<ncclNetSGE_v10_t>,
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
    .iallgather = tp::iallgather<ncclNetSGE_v11_t>,
    .ireducescatter = tp::ireducescatter<ncclNetSGE_v11_t>,
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
    .iallgather = tp::iallgather<ncclNetSGE_v12_t>,
    .ireducescatter = tp::ireducescatter<ncclNetSGE_v12_t>,
    .iflush = tp::collIflush,
    .test = tp::collTest,
    .closeColl = tp::collCloseColl,
    .closeListen = tp::collCloseListen,
    .makeVDevice = nullptr,
    .finalize = tp::collFinalize,
};
