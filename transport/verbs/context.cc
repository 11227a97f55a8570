#include "transport/verbs/context.h"

#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace tally::transport::verbs {

DeviceHandles::~DeviceHandles() {
  if (pd != nullptr) api->dealloc_pd(pd);
  if (context != nullptr) api->close_device(context);
}

// GPU memory: with a peer-memory client loaded (nvidia-peermem, or nv_peer_mem before it), the
// kernel's ibv_reg_mr path resolves a CUDA device pointer to GPU pages itself, so kCuda takes the
// same call as host memory. The alternative, ibv_reg_dmabuf_mr, needs a dma-buf file descriptor
// for the allocation (cuMemGetHandleForAddressRange with CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) and
// the offset of the range in it; transport.h's registerMemory carries only a pointer and CUDA is
// not a dependency below plugin/, so that path needs the fd passed down (NCCL's regMrDmaBuf
// gives one) before it can be used. The loader already looks the symbol up for that.
Status registerRange(const DeviceHandles& handles, uint64_t addr, uint64_t length, MemoryType type,
                     Registered* out) {
  const VerbsApi& api = *handles.api;
  void* start = reinterpret_cast<void*>(static_cast<uintptr_t>(addr));
  ibv_mr* mr = nullptr;
  int err = 0;
  if (api.reg_mr_iova2 != nullptr) {
    // Relaxed ordering lets PCIe reorder the writes, which GPU memory in particular benefits
    // from; providers that do not support it ignore the optional bit.
    mr = api.reg_mr_iova2(
        handles.pd, start, length, addr,
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING);
    err = errno;
  }
  if (mr == nullptr) {
    mr = api.reg_mr(handles.pd, start, length, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
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

namespace {

std::string pciPath(const std::string& device) {
  std::string link = "/sys/class/infiniband/" + device + "/device";
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
  ctx->properties_.pci_path = pciPath(port.device);
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
  TALLY_INFO(log::kNet | log::kInit, "verbs: device %s %s MTU %d speed %d Mbps%s%s",
             where.c_str(), local.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
             128 << local.mtu, port.speed_mbps, ctx->properties_.pci_path.empty() ? "" : " pci ",
             ctx->properties_.pci_path.c_str());
  *out = std::move(ctx);
  return Status::ok();
}

}  // namespace tally::transport::verbs
