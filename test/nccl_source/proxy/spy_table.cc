// SPDX-License-Identifier: Apache-2.0
// A CollNet table between NCCL's proxy and Tally's: every slot the proxy uses forwards to the
// table NCCL's loader picked (Tally's own, or NCCL's adapter in front of it) and counts what it
// saw, so the tests can say what NCCL asked of Tally (the op an average arrives as, NULL
// requests, whether every registration was released before closeColl) without trusting either
// side's logs.
//
// The counters are guarded by one mutex: NCCL calls the table from the test's proxy thread only,
// but the lock keeps the reader on another thread honest.
#include <mutex>
#include <set>
#include <string>

#include "comm.h"
#include "test/nccl_source/proxy/proxy_internal.h"

namespace tally::nccl_source {
namespace {

ncclCollNet_t inner;  // the table NCCL's loader gave the communicator
ncclCollNet_t spy;

std::mutex mu;
ProxyCalls counts;
std::set<void*> live;  // registrations not yet deregistered

void noteResult(const char* fn, ncclResult_t rc) {
  if (rc == ncclSuccess || !counts.first_error.empty()) return;
  counts.first_error = std::string(fn) + " rc=" + std::to_string(static_cast<int>(rc));
}

void noteCall(ncclResult_t rc, void** request) {
  std::lock_guard<std::mutex> lock(mu);
  counts.calls++;
  if (rc == ncclSuccess && *request == nullptr) counts.null_requests++;
}

}  // namespace

void installSpy(ncclComm* comm, ncclProxyState* proxy_state) {
  inner = *comm->ncclCollNet;
  spy = inner;
  // Slots whose parameter types differ between table versions take `auto`.
  spy.listen = [](auto... args) {
    const ncclResult_t rc = inner.listen(args...);
    std::lock_guard<std::mutex> lock(mu);
    counts.listen++;
    noteResult("listen", rc);
    return rc;
  };
  spy.connect = [](void* handles[], int nranks, int rank, void* listen_comm, void** coll_comm) {
    const ncclResult_t rc = inner.connect(handles, nranks, rank, listen_comm, coll_comm);
    std::lock_guard<std::mutex> lock(mu);
    counts.connect++;
    noteResult("connect", rc);
    return rc;
  };
  spy.closeListen = [](void* listen_comm) {
    const ncclResult_t rc = inner.closeListen(listen_comm);
    std::lock_guard<std::mutex> lock(mu);
    counts.close_listen++;
    noteResult("closeListen", rc);
    return rc;
  };
  spy.regMr = [](void* coll_comm, void* data, auto size, int type, void** mhandle) {
    const ncclResult_t rc = inner.regMr(coll_comm, data, size, type, mhandle);
    std::lock_guard<std::mutex> lock(mu);
    counts.reg_mr++;
    if (rc == ncclSuccess) live.insert(*mhandle);
    noteResult("regMr", rc);
    return rc;
  };
  spy.deregMr = [](void* coll_comm, void* mhandle) {
    const ncclResult_t rc = inner.deregMr(coll_comm, mhandle);
    std::lock_guard<std::mutex> lock(mu);
    counts.dereg_mr++;
    live.erase(mhandle);
    noteResult("deregMr", rc);
    return rc;
  };
  spy.closeColl = [](void* coll_comm) {
    {
      std::lock_guard<std::mutex> lock(mu);
      counts.live_mhandles_at_close = static_cast<int>(live.size());
    }
    const ncclResult_t rc = inner.closeColl(coll_comm);
    std::lock_guard<std::mutex> lock(mu);
    counts.close_coll++;
    noteResult("closeColl", rc);
    return rc;
  };
  spy.iallreduce = [](void* coll_comm, void* send, void* recv, auto count, ncclDataType_t dtype,
                      ncclRedOp_t op, void* send_mh, void* recv_mh, void** request) {
    const ncclResult_t rc =
        inner.iallreduce(coll_comm, send, recv, count, dtype, op, send_mh, recv_mh, request);
    noteCall(rc, request);
    std::lock_guard<std::mutex> lock(mu);
    counts.last_red_op = op;
    counts.last_dtype = dtype;
    noteResult("iallreduce", rc);
    return rc;
  };
  if (inner.iallgather != nullptr) {
    spy.iallgather = [](void* coll_comm, void* send, int nparts, auto parts, auto bytes_per_rank,
                        auto window_offset, auto window_bytes, void* send_mh, void** request) {
      const ncclResult_t rc = inner.iallgather(coll_comm, send, nparts, parts, bytes_per_rank,
                                               window_offset, window_bytes, send_mh, request);
      noteCall(rc, request);
      std::lock_guard<std::mutex> lock(mu);
      noteResult("iallgather", rc);
      return rc;
    };
  }
  if (inner.ireducescatter != nullptr) {
    spy.ireducescatter = [](void* coll_comm, int nparts, auto parts, void* recv,
                            auto bytes_per_rank, auto window_offset, auto window_bytes,
                            ncclDataType_t dtype, ncclRedOp_t op, void* recv_mh, void** request) {
      const ncclResult_t rc =
          inner.ireducescatter(coll_comm, nparts, parts, recv, bytes_per_rank, window_offset,
                               window_bytes, dtype, op, recv_mh, request);
      noteCall(rc, request);
      std::lock_guard<std::mutex> lock(mu);
      counts.last_red_op = op;
      counts.last_dtype = dtype;
      noteResult("ireducescatter", rc);
      return rc;
    };
  }
  spy.test = [](void* request, int* done, int* size) {
    const ncclResult_t rc = inner.test(request, done, size);
    std::lock_guard<std::mutex> lock(mu);
    counts.tests++;
    noteResult("test", rc);
    return rc;
  };
  proxy_state->ncclCollNet = &spy;
}

ProxyCalls spyCalls() {
  std::lock_guard<std::mutex> lock(mu);
  return counts;
}

}  // namespace tally::nccl_source
