// SPDX-License-Identifier: Apache-2.0
#include "plugin/coll_api.h"

#include <climits>
#include <cstring>
#include <memory>
#include <utility>

#include "common/log.h"
#include "plugin/coll_comm.h"
#include "plugin/edge.h"
#include "plugin/net_api.h"
#include "plugin/state.h"

namespace tally::plugin {
namespace {

Status collCommOf(void* comm, CollComm** out) {
  TALLY_RETURN_IF_ERROR(checkPointer(comm, "collComm"));
  auto* c = static_cast<CollComm*>(comm);
  if (!c->valid()) return Status::internal("not a Tally CollNet comm");
  *out = c;
  return Status::ok();
}

Status checkCollDevice(const PluginState& state, int dev) {
  if (dev < 0 || dev >= state.collDeviceCount()) {
    return Status::internal("CollNet device " + std::to_string(dev) + " out of range (" +
                            std::to_string(state.collDeviceCount()) + " devices)");
  }
  return Status::ok();
}

// What every posting entry point starts with: no request until one is posted, and the comm.
Status beginPost(void* coll_comm, void** request, CollComm** comm) {
  TALLY_RETURN_IF_ERROR(checkPointer(request, "request"));
  *request = nullptr;
  return collCommOf(coll_comm, comm);
}

// NCCL's element type and op as Tally's. ncclAvg and PreMulSum arrive as ncclSum (NCCL scales on
// the GPU); anything else was never declared supported.
Status typeAndOp(const char* what, int type, int op, DataType* t, ReduceOp* o) {
  if (!toDataType(type, t)) {
    return Status::internal(std::string(what) + " of unknown type " + std::to_string(type));
  }
  if (!toReduceOp(op, o)) {
    return Status::internal(std::string(what) + " with unsupported op " + std::to_string(op));
  }
  return Status::ok();
}

}  // namespace

int collSupports(int type, int op) {
  DataType t;
  ReduceOp o;
  return toDataType(type, &t) && toReduceOp(op, &o) ? 1 : 0;
}

ncclResult_t collInit(void** ctx, uint64_t comm_id, ncclDebugLogger_t logger) {
  return guard("collInit", [&]() -> Status {
    installNcclLogger(logger);
    PluginState* state = nullptr;
    TALLY_RETURN_IF_ERROR(PluginState::global(&state));
    // "CollNet reducers from <origin>: ..." or why connect will decline; once per process. A
    // malformed CLUSTER_SPEC or TF_CONFIG is a WARN: init still succeeds, so that this host
    // reports the same CollNet device count as the others, and connect declines with the error.
    state->logCollNetOnce();
    if (ctx == nullptr) return Status::ok();
    // TALLY_COLLNET=0: devices() reports 0, NCCL then disables CollNet for this library load,
    // and it calls CollNet finalize only while CollNet is enabled, so a context made here would
    // never be freed. A NULL ctx is safe in every caller: listen treats it as a pre-v11 NULL,
    // and finalize accepts it.
    if (state->collDeviceCount() == 0) {
      *ctx = nullptr;
      return Status::ok();
    }
    *ctx = state->contexts().create(comm_id, NCCL_NET_TRAFFIC_CLASS_UNDEF, /*coll=*/true);
    TALLY_INFO(log::kInit | log::kColl, "CollNet init comm 0x%llx; %s",
               static_cast<unsigned long long>(comm_id), state->contexts().describeOpen().c_str());
    return Status::ok();
  });
}

ncclResult_t collDevices(int* ndev) {
  return guard("collDevices", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(ndev, "ndev"));
    PluginState* state = nullptr;
    TALLY_RETURN_IF_ERROR(PluginState::loaded(&state));
    *ndev = state->collDeviceCount();
    return Status::ok();
  });
}

ncclResult_t collGetProperties(int dev, ncclNetProperties_v11_t* props) {
  PluginState* state = PluginState::globalIfLoaded();
  if (state != nullptr && (dev < 0 || dev >= state->collDeviceCount())) {
    return reportError("collGetProperties", checkCollDevice(*state, dev));
  }
  // CollNet device i is net device i: same name, same everything.
  return fillProperties("collGetProperties", dev, kMaxCollBytes, /*device_memory=*/false, props);
}

ncclResult_t collListen(void* ctx, int dev, void* handle, void** listen_comm) {
  return guard("collListen", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(handle, "handle"));
    TALLY_RETURN_IF_ERROR(checkPointer(listen_comm, "listenComm"));
    PluginState* state = nullptr;
    TALLY_RETURN_IF_ERROR(PluginState::loaded(&state));
    TALLY_RETURN_IF_ERROR(checkCollDevice(*state, dev));
    unsigned char bytes[NCCL_NET_HANDLE_MAXSIZE] = {};
    // NCCL listens before it connects: a host whose connect will decline (no reducers, a
    // malformed cluster variable, a pool that does not join) listens with an empty handle.
    if (state->collEnabled()) {
      TALLY_RETURN_IF_ERROR(worker_client::CollClient::makeHandle(state->collOptions(), bytes));
    }
    auto comm = std::make_unique<CollListenComm>();
    comm->dev = dev;
    // Only a context init made is read: pre-v11 adapters pass NULL.
    if (ctx != nullptr && state->contexts().contains(ctx)) {
      comm->has_comm_id = true;
      comm->comm_id = static_cast<const CommContext*>(ctx)->comm_id;
    }
    std::memcpy(handle, bytes, sizeof(bytes));
    *listen_comm = comm.release();
    return Status::ok();
  });
}

ncclResult_t collConnect(void* handles[], int nranks, int rank, void* listen_comm,
                         void** coll_comm) {
  return guard("collConnect", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(coll_comm, "collComm"));
    *coll_comm = nullptr;
    TALLY_RETURN_IF_ERROR(checkPointer(handles, "handles"));
    TALLY_RETURN_IF_ERROR(checkPointer(listen_comm, "listenComm"));
    auto* listener = static_cast<CollListenComm*>(listen_comm);
    if (listener->magic != kCollListenMagic)
      return Status::internal("not a Tally CollNet listen comm");
    if (nranks < 1 || rank < 0 || rank >= nranks) {
      return Status::internal("rank " + std::to_string(rank) + " of " + std::to_string(nranks));
    }
    for (int i = 0; i < nranks; ++i) {
      if (handles[i] == nullptr)
        return Status::internal("handle " + std::to_string(i) + " is NULL");
    }
    PluginState* state = nullptr;
    TALLY_RETURN_IF_ERROR(PluginState::loaded(&state));
    // No reducers, a pool that does not join, or a malformed cluster variable (its error).
    if (!state->collEnabled()) {
      return Status::invalidUsage("declining CollNet, NCCL falls back to point-to-point: " +
                                  state->collOffReason());
    }
    CollCommInfo info;
    info.has_comm_id = listener->has_comm_id;
    info.comm_id = listener->comm_id;
    info.reducer_origin = state->reducers().origin;
    std::unique_ptr<CollComm> comm;
    Status st = CollComm::connect(state->collOptions(), listener->dev, handles, nranks, rank,
                                  std::move(info), &comm);
    if (!st) {
      // An error is NCCL's sanctioned "no": it falls back to point-to-point.
      return Status(st.code(),
                    "declining CollNet, NCCL falls back to point-to-point: " + st.message());
    }
    *coll_comm = comm.release();
    return Status::ok();
  });
}

ncclResult_t collReduceSupport(int type, int op, int* supported) {
  return guard("reduceSupport", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(supported, "supported"));
    *supported = collSupports(type, op);
    return Status::ok();
  });
}

ncclResult_t collRegMr(void* coll_comm, void* data, size_t size, int type, void** mhandle) {
  return guard("collRegMr", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(mhandle, "mhandle"));
    CollComm* c = nullptr;
    TALLY_RETURN_IF_ERROR(collCommOf(coll_comm, &c));
    if (type != NCCL_PTR_HOST) {
      return Status::internal("regMr: memory type " + std::to_string(type) +
                              " was not advertised (ptrSupport is NCCL_PTR_HOST)");
    }
    auto mr = std::make_unique<CollMr>();
    mr->data = data;
    mr->size = size;
    *mhandle = mr.release();
    return Status::ok();
  });
}

ncclResult_t collDeregMr(void* coll_comm, void* mhandle) {
  return guard("collDeregMr", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(mhandle, "mhandle"));
    auto* mr = static_cast<CollMr*>(mhandle);
    if (mr->magic != kCollMrMagic) return Status::internal("not a Tally CollNet memory handle");
    CollComm* c = nullptr;
    TALLY_RETURN_IF_ERROR(collCommOf(coll_comm, &c));
    // NCCL frees the memory next (before closeColl, on an abort): calls still using it abort
    // the communicator, and nothing of Tally's touches the memory once this returns.
    c->releaseMemory(mr->data, mr->size);
    mr->magic = 0;
    delete mr;
    return Status::ok();
  });
}

ncclResult_t collIallreduce(void* coll_comm, void* send, void* recv, size_t count, int type,
                            int op, void* /*send_mhandle*/,
                            void* /*recv_mhandle*/, void** request) {
  return guard("iallreduce", [&]() -> Status {
    CollComm* c = nullptr;
    TALLY_RETURN_IF_ERROR(beginPost(coll_comm, request, &c));
    DataType t;
    ReduceOp o;
    TALLY_RETURN_IF_ERROR(typeAndOp("iallreduce", type, op, &t, &o));
    if (count > 0 && (send == nullptr || recv == nullptr)) {
      return Status::internal("iallreduce with a NULL buffer");
    }
    CollReq* req = nullptr;
    TALLY_RETURN_IF_ERROR(c->iallreduce(send, recv, count, t, o, &req));
    *request = req;
    return Status::ok();
  });
}

namespace {

// The one part NCCL passes, checked against the window.
Status onePart(const char* what, int nparts, const CollPart* parts, size_t window_bytes,
               void** address) {
  if (nparts != 1) {
    return Status::internal(std::string(what) + " with " + std::to_string(nparts) +
                            " scatter-gather parts; Tally takes exactly one, as NCCL passes");
  }
  if (parts == nullptr) return Status::internal(std::string(what) + " with a NULL part list");
  if (parts[0].size != window_bytes || parts[0].address == nullptr) {
    return Status::internal(std::string(what) + ": part of " + std::to_string(parts[0].size) +
                            " bytes for a window of " + std::to_string(window_bytes));
  }
  *address = parts[0].address;
  return Status::ok();
}

// NCCL's byte window in elements of `elt` bytes; every size must be whole elements.
Status windowOf(const char* what, size_t elt, size_t bytes_per_rank, size_t window_offset,
                size_t window_bytes, worker_client::CollWindow* out) {
  if (bytes_per_rank % elt != 0 || window_offset % elt != 0 || window_bytes % elt != 0) {
    return Status::internal(std::string(what) + ": window (offset " +
                            std::to_string(window_offset) + ", " + std::to_string(window_bytes) +
                            " bytes, " + std::to_string(bytes_per_rank) +
                            " per rank) is not whole " + std::to_string(elt) + "-byte elements");
  }
  out->rank_count = bytes_per_rank / elt;
  out->offset = window_offset / elt;
  out->count = window_bytes / elt;
  return Status::ok();
}

}  // namespace

ncclResult_t collIallgather(void* coll_comm, void* send, int nparts, const CollPart* parts,
                            size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
                            void** request) {
  return guard("iallgather", [&]() -> Status {
    CollComm* c = nullptr;
    TALLY_RETURN_IF_ERROR(beginPost(coll_comm, request, &c));
    void* recv = nullptr;
    TALLY_RETURN_IF_ERROR(onePart("iallgather", nparts, parts, window_bytes, &recv));
    worker_client::CollWindow window;
    TALLY_RETURN_IF_ERROR(
        windowOf("iallgather", 1, bytes_per_rank, window_offset, window_bytes, &window));
    CollReq* req = nullptr;
    TALLY_RETURN_IF_ERROR(c->iallgather(send, recv, window, &req));
    *request = req;
    return Status::ok();
  });
}

ncclResult_t collIreducescatter(void* coll_comm, int nparts, const CollPart* parts, void* recv,
                                size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
                                int type, int op, void** request) {
  return guard("ireducescatter", [&]() -> Status {
    CollComm* c = nullptr;
    TALLY_RETURN_IF_ERROR(beginPost(coll_comm, request, &c));
    DataType t;
    ReduceOp o;
    TALLY_RETURN_IF_ERROR(typeAndOp("ireducescatter", type, op, &t, &o));
    void* send = nullptr;
    TALLY_RETURN_IF_ERROR(onePart("ireducescatter", nparts, parts, window_bytes, &send));
    worker_client::CollWindow window;
    TALLY_RETURN_IF_ERROR(windowOf("ireducescatter", dataTypeSize(t), bytes_per_rank,
                                   window_offset, window_bytes, &window));
    CollReq* req = nullptr;
    TALLY_RETURN_IF_ERROR(c->ireducescatter(send, recv, window, t, o, &req));
    *request = req;
    return Status::ok();
  });
}

ncclResult_t collIflush(void* /*coll_comm*/, void* /*data*/, int /*size*/, void* /*mhandle*/,
                        void** request) {
  return guard("collIflush", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(request, "request"));
    *request = nullptr;
    return Status::ok();
  });
}

ncclResult_t collTest(void* request, int* done, int* size) {
  return guard("collTest", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(request, "request"));
    TALLY_RETURN_IF_ERROR(checkPointer(done, "done"));
    auto* req = static_cast<CollReq*>(request);
    if (req->magic != kCollRequestMagic || req->owner == nullptr || !req->owner->valid() ||
        !req->owner->ownsRequest(req)) {
      return Status::internal("test of an unknown or finished CollNet request");
    }
    bool finished = false;
    size_t bytes = 0;
    TALLY_RETURN_IF_ERROR(req->owner->test(req, &finished, &bytes));
    if (finished && size != nullptr) {
      if (bytes > static_cast<size_t>(INT_MAX)) {
        return Status::internal("collective of " + std::to_string(bytes) +
                                " bytes does not fit test()'s int size");
      }
      *size = static_cast<int>(bytes);
    }
    *done = finished ? 1 : 0;
    return Status::ok();
  });
}

ncclResult_t collCloseColl(void* coll_comm) {
  return guard("closeColl", [&]() -> Status {
    if (coll_comm == nullptr) return Status::ok();
    CollComm* c = nullptr;
    TALLY_RETURN_IF_ERROR(collCommOf(coll_comm, &c));
    c->close();  // logs the communicator's summary
    delete c;
    return Status::ok();
  });
}

ncclResult_t collCloseListen(void* listen_comm) {
  return guard("collCloseListen", [&]() -> Status {
    if (listen_comm == nullptr) return Status::ok();
    auto* listener = static_cast<CollListenComm*>(listen_comm);
    if (listener->magic != kCollListenMagic)
      return Status::internal("not a Tally CollNet listen comm");
    listener->magic = 0;
    delete listener;
    return Status::ok();
  });
}

ncclResult_t collFinalize(void* ctx) {
  return guard("collFinalize", [&]() -> Status {
    // No state: no init succeeded, so no context was ever made.
    PluginState* state = PluginState::globalIfLoaded();
    if (ctx == nullptr) return Status::ok();
    uint64_t comm_id = 0;
    if (state == nullptr || !state->contexts().destroy(ctx, &comm_id)) {
      TALLY_INFO(log::kInit | log::kColl,
                 "CollNet finalize of a context init did not create: ignored");
      return Status::ok();
    }
    TALLY_INFO(log::kInit | log::kColl, "CollNet finalize comm 0x%llx; %s",
               static_cast<unsigned long long>(comm_id), state->contexts().describeOpen().c_str());
    return Status::ok();
  });
}

}  // namespace tally::plugin
