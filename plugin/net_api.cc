// SPDX-License-Identifier: Apache-2.0
#include "plugin/net_api.h"

#include <climits>
#include <cstring>
#include <memory>

#include "common/log.h"
#include "plugin/edge.h"
#include "plugin/net_comm.h"
#include "plugin/state.h"

namespace tally::plugin {
namespace {

Status netCommOf(void* comm, NetComm** out) {
  TALLY_RETURN_IF_ERROR(checkPointer(comm, "comm"));
  auto* c = static_cast<NetComm*>(comm);
  if (!c->valid()) return Status::internal("not a Tally send or receive comm");
  *out = c;
  return Status::ok();
}

}  // namespace

ncclResult_t netInit(void** ctx, uint64_t comm_id, const ncclNetCommConfig_v11_t* config,
                     ncclDebugLogger_t logger) {
  return guard("init", [&]() -> Status {
    installNcclLogger(logger);
    PluginState* state = nullptr;
    TALLY_RETURN_IF_ERROR(PluginState::global(&state));
    if (ctx != nullptr) {
      int traffic_class = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
      *ctx = state->contexts().create(comm_id, traffic_class, /*coll=*/false);
      TALLY_INFO(log::kInit | log::kNet, "init comm 0x%llx: %d device(s); %s",
                 static_cast<unsigned long long>(comm_id), state->netDeviceCount(),
                 state->contexts().describeOpen().c_str());
    }
    return Status::ok();
  });
}

ncclResult_t netDevices(int* ndev) {
  return guard("devices", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(ndev, "ndev"));
    PluginState* state = nullptr;
    TALLY_RETURN_IF_ERROR(PluginState::loaded(&state));
    *ndev = state->netDeviceCount();
    return Status::ok();
  });
}

ncclResult_t fillProperties(const char* fn, int dev, uint64_t max_coll_bytes, bool device_memory,
                            ncclNetProperties_v11_t* props) {
  return guard(fn, [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(props, "props"));
    PluginState* state = nullptr;
    TALLY_RETURN_IF_ERROR(PluginState::loaded(&state));
    transport::Device* device = state->device(dev);
    if (device == nullptr) {
      return Status::internal("device " + std::to_string(dev) + " out of range (" +
                              std::to_string(state->netDeviceCount()) + " devices)");
    }
    const transport::DeviceProperties& dp = device->properties();
    ncclNetProperties_v11_t p;
    std::memset(&p, 0, sizeof(p));
    // The strings live as long as the device, i.e. until the library is unloaded.
    p.name = const_cast<char*>(dp.name.c_str());
    p.pciPath = dp.pci_path.empty() ? nullptr : const_cast<char*>(dp.pci_path.c_str());
    p.guid = dp.guid;
    // CollNet's data passes through host code (checksums, the reducer protocol): host only.
    p.ptrSupport = device_memory ? netPtrSupport(dp) : NCCL_PTR_HOST;
    p.regIsGlobal = 0;
    p.forceFlush = 0;
    p.speed = state->reportedSpeedMbps(dev);
    p.port = 0;
    // One latency for every device, the one the tuner's model uses: NCCL adds it to each step
    // between nodes when it costs rings and trees (docs/nccl.md).
    p.latency = static_cast<float>(state->params().linkLatencyUs);
    p.maxComms = kMaxComms;
    p.maxRecvs = kMaxRecvs;
    p.netDeviceType = NCCL_NET_DEVICE_HOST;
    p.netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
    p.vProps.ndevs = 1;
    p.vProps.devs[0] = dev;
    p.maxP2pBytes = kMaxP2pBytes;
    p.maxCollBytes = max_coll_bytes;
    p.maxMultiRequestSize = 1;
    *props = p;
    return Status::ok();
  });
}

ncclResult_t netGetProperties(int dev, ncclNetProperties_v11_t* props) {
  return fillProperties("getProperties", dev, kMaxCollBytes, /*device_memory=*/true, props);
}

ncclResult_t netListen(void* /*ctx*/, int dev, void* handle, void** listen_comm) {
  return guard("listen", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(handle, "handle"));
    TALLY_RETURN_IF_ERROR(checkPointer(listen_comm, "listenComm"));
    PluginState* state = nullptr;
    TALLY_RETURN_IF_ERROR(PluginState::loaded(&state));
    transport::Device* device = state->device(dev);
    if (device == nullptr)
      return Status::internal("listen on unknown device " + std::to_string(dev));
    std::unique_ptr<transport::Listener> listener;
    TALLY_RETURN_IF_ERROR(device->listen(&listener));
    auto comm = std::make_unique<NetListenComm>(dev, netPtrSupport(device->properties()),
                                                std::move(listener));
    NetHandle h;
    std::memset(&h, 0, sizeof(h));
    h.address = comm->handle();
    std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
    std::memcpy(handle, &h, sizeof(h));
    *listen_comm = comm.release();
    return Status::ok();
  });
}

ncclResult_t netConnect(void* /*ctx*/, int dev, void* handle, void** send_comm,
                        ncclNetDeviceHandle_v11_t** /*send_dev_comm*/) {
  return guard("connect", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(handle, "handle"));
    TALLY_RETURN_IF_ERROR(checkPointer(send_comm, "sendComm"));
    *send_comm = nullptr;
    PluginState* state = nullptr;
    TALLY_RETURN_IF_ERROR(PluginState::loaded(&state));
    transport::Device* device = state->device(dev);
    if (device == nullptr)
      return Status::internal("connect on unknown device " + std::to_string(dev));
    std::unique_ptr<NetComm> comm;
    TALLY_RETURN_IF_ERROR(connectStep(device, state->connectionOptions(), &state->pendingConnects(),
                                      dev, handle, &comm));
    *send_comm = comm.release();
    return Status::ok();
  });
}

ncclResult_t netAccept(void* listen_comm, void** recv_comm,
                       ncclNetDeviceHandle_v11_t** /*recv_dev_comm*/) {
  return guard("accept", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(listen_comm, "listenComm"));
    TALLY_RETURN_IF_ERROR(checkPointer(recv_comm, "recvComm"));
    *recv_comm = nullptr;
    auto* listener = static_cast<NetListenComm*>(listen_comm);
    if (!listener->valid()) return Status::internal("not a Tally listen comm");
    std::unique_ptr<NetComm> comm;
    TALLY_RETURN_IF_ERROR(listener->accept(&comm));
    *recv_comm = comm.release();
    return Status::ok();
  });
}

ncclResult_t netRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return guard("regMr", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(mhandle, "mhandle"));
    NetComm* c = nullptr;
    TALLY_RETURN_IF_ERROR(netCommOf(comm, &c));
    NetMr* mr = nullptr;
    TALLY_RETURN_IF_ERROR(c->registerMemory(data, size, type, &mr));
    *mhandle = mr;
    return Status::ok();
  });
}

ncclResult_t netDeregMr(void* comm, void* mhandle) {
  return guard("deregMr", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(mhandle, "mhandle"));
    auto* mr = static_cast<NetMr*>(mhandle);
    if (mr->magic != kNetMrMagic) return Status::internal("deregMr: not a Tally memory handle");
    // NCCL frees the memory next: requests still using it must stop first (the comm is NCCL's
    // own, the one the memory was registered with; a NULL or foreign one is skipped).
    NetComm* c = nullptr;
    if (comm != nullptr && netCommOf(comm, &c).isOk()) c->releaseMemory(mr->range);
    return NetComm::deregister(mhandle);
  });
}

ncclResult_t netIsend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                      void** request) {
  return guard("isend", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(request, "request"));
    *request = nullptr;
    NetComm* c = nullptr;
    TALLY_RETURN_IF_ERROR(netCommOf(send_comm, &c));
    if (data == nullptr && size > 0) return Status::internal("isend of NULL data");
    NetRequest* req = nullptr;
    TALLY_RETURN_IF_ERROR(c->isend(data, size, tag, mhandle, &req));
    *request = req;
    return Status::ok();
  });
}

ncclResult_t netIrecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                      void** mhandles, void** request) {
  return guard("irecv", [&]() -> Status {
    // NCCL may pre-set *request to NCCL_NET_OPTIONAL_RECV_COMPLETION (LL/LL128); Tally completes
    // such receives like any other, so the hint is simply overwritten.
    TALLY_RETURN_IF_ERROR(checkPointer(request, "request"));
    *request = nullptr;
    TALLY_RETURN_IF_ERROR(checkPointer(data, "data"));
    TALLY_RETURN_IF_ERROR(checkPointer(sizes, "sizes"));
    TALLY_RETURN_IF_ERROR(checkPointer(tags, "tags"));
    NetComm* c = nullptr;
    TALLY_RETURN_IF_ERROR(netCommOf(recv_comm, &c));
    NetRequest* req = nullptr;
    TALLY_RETURN_IF_ERROR(c->irecv(n, data, sizes, tags, mhandles, &req));
    *request = req;
    return Status::ok();
  });
}

ncclResult_t netRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                            int fd, void** mhandle) {
  return guard("regMrDmaBuf", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(mhandle, "mhandle"));
    NetComm* c = nullptr;
    TALLY_RETURN_IF_ERROR(netCommOf(comm, &c));
    NetMr* mr = nullptr;
    TALLY_RETURN_IF_ERROR(c->registerDmaBuf(data, size, type, offset, fd, &mr));
    *mhandle = mr;
    return Status::ok();
  });
}

ncclResult_t netIflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                       void** request) {
  return guard("iflush", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(request, "request"));
    *request = nullptr;
    TALLY_RETURN_IF_ERROR(checkPointer(data, "data"));
    TALLY_RETURN_IF_ERROR(checkPointer(sizes, "sizes"));
    NetComm* c = nullptr;
    TALLY_RETURN_IF_ERROR(netCommOf(recv_comm, &c));
    NetRequest* req = nullptr;
    TALLY_RETURN_IF_ERROR(c->iflush(n, data, sizes, mhandles, &req));
    *request = req;
    return Status::ok();
  });
}

ncclResult_t netTest(void* request, int* done, int* sizes) {
  return guard("test", [&]() -> Status {
    TALLY_RETURN_IF_ERROR(checkPointer(request, "request"));
    TALLY_RETURN_IF_ERROR(checkPointer(done, "done"));
    auto* req = static_cast<NetRequest*>(request);
    if (req->magic != kNetRequestMagic || req->owner == nullptr || !req->owner->valid() ||
        !req->owner->ownsRequest(req)) {
      return Status::internal("test of an unknown or finished request");
    }
    const int n = req->n;  // the slot is recycled once done
    bool finished = false;
    size_t got[kMaxRecvs] = {};
    TALLY_RETURN_IF_ERROR(req->owner->test(req, &finished, got));
    if (finished && sizes != nullptr) {
      for (int i = 0; i < n; ++i) {
        if (got[i] > static_cast<size_t>(INT_MAX)) {
          return Status::internal("transfer of " + std::to_string(got[i]) +
                                  " bytes does not fit test()'s int size");
        }
        sizes[i] = static_cast<int>(got[i]);
      }
    }
    *done = finished ? 1 : 0;
    return Status::ok();
  });
}

ncclResult_t netCloseSend(void* send_comm) {
  return guard("closeSend", [&]() -> Status {
    if (send_comm == nullptr) return Status::ok();
    NetComm* c = nullptr;
    TALLY_RETURN_IF_ERROR(netCommOf(send_comm, &c));
    if (c->kind() != NetComm::Kind::kSend) return Status::internal("closeSend of a receive comm");
    delete c;
    return Status::ok();
  });
}

ncclResult_t netCloseRecv(void* recv_comm) {
  return guard("closeRecv", [&]() -> Status {
    if (recv_comm == nullptr) return Status::ok();
    NetComm* c = nullptr;
    TALLY_RETURN_IF_ERROR(netCommOf(recv_comm, &c));
    if (c->kind() != NetComm::Kind::kRecv) return Status::internal("closeRecv of a send comm");
    delete c;
    return Status::ok();
  });
}

ncclResult_t netCloseListen(void* listen_comm) {
  return guard("closeListen", [&]() -> Status {
    if (listen_comm == nullptr) return Status::ok();
    auto* listener = static_cast<NetListenComm*>(listen_comm);
    if (!listener->valid()) return Status::internal("not a Tally listen comm");
    delete listener;
    return Status::ok();
  });
}

ncclResult_t netFinalize(void* ctx) {
  return guard("finalize", [&]() -> Status {
    // No state: no init succeeded, so no context was ever made.
    PluginState* state = PluginState::globalIfLoaded();
    if (ctx == nullptr) return Status::ok();
    uint64_t comm_id = 0;
    if (state == nullptr || !state->contexts().destroy(ctx, &comm_id)) {
      TALLY_INFO(log::kInit | log::kNet, "finalize of a context init did not create: ignored");
      return Status::ok();
    }
    TALLY_INFO(log::kInit | log::kNet, "finalize comm 0x%llx; %s",
               static_cast<unsigned long long>(comm_id), state->contexts().describeOpen().c_str());
    return Status::ok();
  });
}

ncclResult_t netSetNetAttr(void* /*ctx*/, ncclNetAttr_v11_t* /*attr*/) { return ncclSuccess; }

}  // namespace tally::plugin
