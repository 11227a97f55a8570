// SPDX-License-Identifier: Apache-2.0
// Version-free entry points of the CollNet plugin, adapted by tables_coll.cc. Same rules as
// net_api.h: validate, guard (no exception crosses the C ABI), log, map Status to ncclResult_t.
//
// Contracts:
//   devices() is 1 (the device mirrors net device 0) unless TALLY_COLLNET=0 or there is no net
//   device (PluginState::collDeviceCount): the same on every host of a job. listen never blocks;
//   connect blocks until the group has formed (bounded by TALLY_CONNECT_TIMEOUT_MS), and an
//   error declines CollNet (NCCL falls back): without reducers, on a reducer or evaluator
//   replica, or with a malformed cluster variable it declines at once.
//   reduceSupport always succeeds. iallreduce returns a NULL request when there is no room.
//   deregMr is where NCCL hands the memory back (it may free it next, before closeColl): calls
//   still in flight on it abort the communicator, and no Tally thread touches it afterwards.
//   closeColl returns within about 100 ms whatever is in flight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/types.h"
#include "plugin/abi/net_v11.h"

namespace tally::plugin {

// NCCL's element types and reduction operations become Tally's DataType and ReduceOp here, and
// nowhere else: nothing below plugin/ sees an NCCL type. Values are numerically equal, so each
// conversion is a range check and a cast.
static_assert(static_cast<int>(DataType::kFloat8e5m2) == ncclFloat8e5m2);
static_assert(static_cast<int>(DataType::kBfloat16) == ncclBfloat16);
static_assert(kNumDataTypes == ncclNumTypes);
static_assert(static_cast<int>(ReduceOp::kMin) == ncclMin);
static_assert(static_cast<int>(ReduceOp::kProd) == ncclProd);

// The int NCCL passed in an enum argument. NCCL may pass values its enum does not list (a newer
// type, a user-created op), and reading such a value through the enum type is undefined
// (UBSan's enum check): the bytes are read instead, once, in the function the table points to.
template <typename Enum>
int rawValue(const Enum& in) {
  static_assert(sizeof(Enum) == sizeof(int));
  int raw;
  std::memcpy(&raw, &in, sizeof raw);
  return raw;
}

// False for anything Tally does not reduce (ncclAvg, user-defined ops, out of range).
inline bool toDataType(int in, DataType* out) {
  if (!isValidDataType(in)) return false;
  *out = static_cast<DataType>(in);
  return true;
}

inline bool toReduceOp(int in, ReduceOp* out) {
  if (!isValidReduceOp(in)) return false;
  *out = static_cast<ReduceOp>(in);
  return true;
}

ncclResult_t collInit(void** ctx, uint64_t comm_id, ncclDebugLogger_t logger);
ncclResult_t collDevices(int* ndev);
ncclResult_t collGetProperties(int dev, ncclNetProperties_v11_t* props);
ncclResult_t collListen(void* ctx, int dev, void* handle, void** listen_comm);
ncclResult_t collConnect(void* handles[], int nranks, int rank, void* listen_comm,
                         void** coll_comm);
// Element type and op as the ints NCCL passed (rawValue): any value may arrive.
ncclResult_t collReduceSupport(int type, int op, int* supported);
ncclResult_t collRegMr(void* coll_comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t collDeregMr(void* coll_comm, void* mhandle);
ncclResult_t collIallreduce(void* coll_comm, void* send, void* recv, size_t count, int type,
                            int op, void* send_mhandle,
                            void* recv_mhandle, void** request);
// One entry of NCCL's scatter-gather list (ncclNetSGE_vN_t without its registration).
struct CollPart {
  void* address = nullptr;
  size_t size = 0;
};
// NCCL's CollNet all-gather and reduce-scatter: the window
// [window_offset, window_offset + window_bytes) of a vector of nranks x bytes_per_rank bytes.
// All-gather: send holds this rank's part of the window, parts[0] receives the whole window.
// Reduce-scatter: parts[0] holds this rank's input for the whole window, recv receives the
// reduction of this rank's part of it. NCCL always passes one part of window_bytes.
ncclResult_t collIallgather(void* coll_comm, void* send, int nparts, const CollPart* parts,
                            size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
                            void** request);
ncclResult_t collIreducescatter(void* coll_comm, int nparts, const CollPart* parts, void* recv,
                                size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
                                int type, int op, void** request);
// Host memory needs no flush: always a NULL request.
ncclResult_t collIflush(void* coll_comm, void* data, int size, void* mhandle, void** request);
// size may be NULL; once done it gets count x element size.
ncclResult_t collTest(void* request, int* done, int* size);
ncclResult_t collCloseColl(void* coll_comm);
ncclResult_t collCloseListen(void* listen_comm);
ncclResult_t collFinalize(void* ctx);

// The support answer, separate for tests: 1 for the 12 types x Sum, Prod, Max, Min.
int collSupports(int type, int op);

}  // namespace tally::plugin
