// SPDX-License-Identifier: Apache-2.0
#include "transport/verbs/context.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace tally::transport::verbs {

DeviceHandles::~DeviceHandles() {
  if (pd != nullptr) api->dealloc_pd(pd);
  if (context != nullptr) api->close_device(context);
}

// GPU memory, two ways. With a peer-memory client loaded (nvidia-peermem, or nv_peer_mem before
// it), the kernel's ibv_reg_mr path resolves a CUDA device pointer to GPU pages itself, so kCuda
// takes the same call as host memory (registerRange). Without one, the GPU memory is exported as
// a dma-buf file descriptor (cuMemGetHandleForAddressRange, done above transport/, which knows no
// CUDA) and registered by fd and offset with ibv_reg_dmabuf_mr (registerDmaBufRange).
Status registerRange(const DeviceHandles& handles, uint64_t addr, uint64_t length, MemoryType type,
                     Registered* out) {
  const VerbsApi& api = *handles.api;
  void* start = reinterpret_cast<void*>(static_cast<uintptr_t>(addr));
  const int access = type == MemoryType::kCuda ? kCudaAccessFlags
                                               : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  ibv_mr* mr = nullptr;
  int err = 0;
  if (api.reg_mr_iova2 != nullptr) {
    // Relaxed ordering lets PCIe reorder the writes, which GPU memory in particular benefits
    // from; providers that do not support it ignore the optional bit.
    mr = api.reg_mr_iova2(handles.pd, start, length, addr,
                          static_cast<unsigned>(access | IBV_ACCESS_RELAXED_ORDERING));
    err = errno;
  }
  if (mr == nullptr) {
    mr = api.reg_mr(handles.pd, start, length, access);
    err = errno;
  }
  if (mr == nullptr) {
    std::string what = "ibv_reg_mr of " + std::to_string(length) + " bytes of " +
                       (type == MemoryType::kCuda ? "GPU" : "host") + " memory";
    if (type == MemoryType::kCuda) {
      what += " (GPU memory needs the nvidia-peermem kernel module loaded)";
    }
    return Status::fromErrno(what, err != 0 ? err : EINVAL);
  }
  out->handle = mr;
  out->lkey = mr->lkey;
  out->rkey = mr->rkey;
  return Status::ok();
}

Status registerDmaBufRange(const DeviceHandles& handles, uint64_t iova, uint64_t length, int fd,
                           uint64_t offset, ibv_mr** out) {
  const VerbsApi& api = *handles.api;
  const std::string what = "ibv_reg_dmabuf_mr of " + std::to_string(length) +
                           " bytes of dma-buf fd " + std::to_string(fd) + " at offset " +
                           std::to_string(offset);
  if (api.reg_dmabuf_mr == nullptr) {
    return Status::invalidUsage(what + ": libibverbs has no ibv_reg_dmabuf_mr (rdma-core 34+)");
  }
  errno = 0;
  ibv_mr* mr = api.reg_dmabuf_mr(handles.pd, offset, length, iova, fd,
                                 kCudaAccessFlags | IBV_ACCESS_RELAXED_ORDERING);
  if (mr == nullptr) return Status::fromErrno(what, errno != 0 ? errno : EINVAL);
  *out = mr;
  return Status::ok();
}

bool peerMemoryLoaded(const std::string& sysfs_root) {
  for (const char* path : {"/kernel/mm/memory_peers/nv_mem/version", "/module/nvidia_peermem",
                           "/module/nv_peer_mem"}) {
    if (access((sysfs_root + path).c_str(), F_OK) == 0) return true;
  }
  return false;
}

bool dmabufSupported(const VerbsApi& api, ibv_pd* pd) {
  if (api.reg_dmabuf_mr == nullptr) return false;
  // fd -1 is never a dma-buf: a provider and kernel that support the call fail it for the fd
  // (EBADF); one that does not says so before looking at the fd.
  errno = 0;
  ibv_mr* mr = api.reg_dmabuf_mr(pd, 0, 4096, 0, -1, kCudaAccessFlags);
  if (mr != nullptr) {
    api.dereg_mr(mr);
    return true;
  }
  return errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
}

namespace {

std::string pciPath(const std::string& sysfs_root, const std::string& device) {
  std::string link = sysfs_root + "/class/infiniband/" + device + "/device";
  char resolved[PATH_MAX];
  if (realpath(link.c_str(), resolved) == nullptr) return "";
  return resolved;
}

Status openByName(const VerbsApi& api, const std::string& name, ibv_context** out) {
  int count = 0;
  ibv_device** list = api.get_device_list(&count);
  if (list == nullptr) return Status::fromErrno("ibv_get_device_list", errno);
  ibv_context* context = nullptr;
  int err = ENODEV;
  for (int i = 0; i < count && context == nullptr; ++i) {
    if (name != api.get_device_name(list[i])) continue;
    context = api.open_device(list[i]);
    if (context == nullptr) err = errno;
  }
  api.free_device_list(list);
  if (context == nullptr) return Status::fromErrno("open RDMA device " + name, err);
  *out = context;
  return Status::ok();
}

}  // namespace

Status DeviceContext::open(const VerbsApi* api, const PortRecord& port, const VerbsOptions& options,
                           std::shared_ptr<DeviceContext>* out) {
  auto handles = std::make_shared<DeviceHandles>();
  handles->api = api;
  TALLY_RETURN_IF_ERROR(openByName(*api, port.device, &handles->context));
  std::shared_ptr<DeviceContext> ctx(new DeviceContext());
  const std::string where = port.device + ":" + std::to_string(port.port);
  if (api->query_device(handles->context, &ctx->device_attr_) != 0) {
    return Status::fromErrno("ibv_query_device " + where, errno);
  }
  if (api->queryPort(handles->context, static_cast<uint8_t>(port.port), &ctx->port_attr_) != 0) {
    return Status::fromErrno("ibv_query_port " + where, errno);
  }
  if (ctx->port_attr_.state != IBV_PORT_ACTIVE) {
    return Status::invalidUsage("RDMA port " + where + " is not active");
  }
  QpEndpoint& local = ctx->endpoint_;
  local.port = static_cast<uint8_t>(port.port);
  local.link_layer = ctx->port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET
                         ? IBV_LINK_LAYER_ETHERNET
                         : IBV_LINK_LAYER_INFINIBAND;
  local.lid = ctx->port_attr_.lid;
  local.mtu = ctx->port_attr_.active_mtu;
  int gid_index = options.gid_index;
  if (gid_index < 0 && local.link_layer == IBV_LINK_LAYER_ETHERNET) {
    std::vector<GidEntry> gids;
    TALLY_RETURN_IF_ERROR(readGidEntries(*api, handles->context, port.device, port.port,
                                         ctx->port_attr_.gid_tbl_len, &gids));
    gid_index = chooseGidIndex(gids);
    if (gid_index < 0) {
      return Status::invalidUsage("RoCE port " + where +
                                  " has no usable GID (is an IP address configured on it?)");
    }
  }
  if (gid_index >= 0) {
    ibv_gid gid{};
    if (api->query_gid(handles->context, local.port, gid_index, &gid) != 0) {
      return Status::fromErrno("ibv_query_gid " + where + " index " + std::to_string(gid_index),
                               errno);
    }
    std::memcpy(local.gid, gid.raw, sizeof(local.gid));
    local.gid_index = gid_index;
  }
  handles->pd = api->alloc_pd(handles->context);
  if (handles->pd == nullptr) return Status::fromErrno("ibv_alloc_pd " + where, errno);

  ctx->qp_settings_.service_level = options.service_level;
  ctx->qp_settings_.traffic_class = options.traffic_class;
  ctx->qp_settings_.ack_timeout = options.ack_timeout;
  ctx->qp_settings_.retry_count = options.retry_count;
  ctx->properties_.name = where;
  ctx->properties_.pci_path = pciPath(options.sysfs_root, port.device);
  const bool peer_memory = peerMemoryLoaded(options.sysfs_root);
  ctx->properties_.dmabuf = dmabufSupported(*api, handles->pd);
  // NCCL_PTR_CUDA means regMr of a device pointer works, which needs peer memory; dma-buf is
  // its own bit (NCCL uses it only where it can export dma-bufs itself).
  ctx->properties_.cuda_memory = peer_memory;
  TALLY_INFO(log::kNet | log::kInit,
             "verbs: device %s GPU memory: %s (peer-memory client %s, dma-buf %s)", where.c_str(),
             ctx->properties_.cuda_memory || ctx->properties_.dmabuf ? "yes" : "no", peer_memory ? "loaded" : "not loaded",
             ctx->properties_.dmabuf ? "supported" : "not supported");
  ctx->properties_.speed_mbps = port.speed_mbps;
  ctx->properties_.guid = ctx->device_attr_.node_guid;
  ctx->options_ = options;
  RegCacheLimits limits;
  limits.max_unpinned_entries = options.reg_cache_entries;
  limits.max_unpinned_bytes = options.reg_cache_bytes;
  std::shared_ptr<DeviceHandles> for_cache = handles;
  ctx->cache_ = RegistrationCache::create(
      [for_cache](uint64_t addr, uint64_t length, MemoryType type, Registered* reg) {
        return registerRange(*for_cache, addr, length, type, reg);
      },
      [for_cache](const Registered& reg) {
        for_cache->api->dereg_mr(static_cast<ibv_mr*>(reg.handle));
      },
      limits);
  ctx->handles_ = std::move(handles);
  TALLY_INFO(log::kNet | log::kInit, "verbs: device %s %s MTU %d speed %d Mbps%s%s", where.c_str(),
             local.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", 128 << local.mtu,
             port.speed_mbps, ctx->properties_.pci_path.empty() ? "" : " pci ",
             ctx->properties_.pci_path.c_str());
  *out = std::move(ctx);
  return Status::ok();
}

}  // namespace tally::transport::verbs
