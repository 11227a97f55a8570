// SPDX-License-Identifier: Apache-2.0
// One opened RDMA port: the device context, its protection domain, what the port is, and the
// registration cache every connection on it shares. Made by DeviceContext::open, shared by the
// Device, its listeners and connections (shared_ptr), destroyed with the last of them.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "transport/transport.h"
#include "transport/verbs/loader.h"
#include "transport/verbs/ports.h"
#include "transport/verbs/qp_state.h"
#include "transport/verbs/reg_cache.h"
#include "transport/verbs/verbs.h"

namespace tally::transport::verbs {

// The ibv_context and protection domain, closed when the last owner goes. Memory registrations
// (in the cache) and connections hold it, so it outlives every object made from it.
struct DeviceHandles {
  const VerbsApi* api = nullptr;
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  ~DeviceHandles();
};

// Registers [addr, addr+length) for local and remote write (kCuda: and remote read, which the
// flush needs). kCuda memory goes through plain ibv_reg_mr, which works when a peer-memory client
// (nvidia-peermem) is loaded; see context.cc.
Status registerRange(const DeviceHandles& handles, uint64_t addr, uint64_t length, MemoryType type,
                     Registered* out);

// The access rights of every GPU memory registration: the data path writes into it, the flush
// reads from it.
inline constexpr int kCudaAccessFlags =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

// Registers `length` bytes of the dma-buf `fd` from `offset`, addressed by the device as
// [iova, iova+length), with kCudaAccessFlags. Fails with kInvalidUsage when libibverbs has no
// ibv_reg_dmabuf_mr, else with the errno of the call (kSystem); *out is untouched then.
Status registerDmaBufRange(const DeviceHandles& handles, uint64_t iova, uint64_t length, int fd,
                           uint64_t offset, ibv_mr** out);

// Whether a GPU peer-memory kernel client is loaded: nvidia-peermem (or nv_peer_mem before it)
// shows in <sysfs_root>/kernel/mm/memory_peers/nv_mem/version, /module/nvidia_peermem or
// /module/nv_peer_mem.
bool peerMemoryLoaded(const std::string& sysfs_root);

// Whether ibv_reg_dmabuf_mr works on `pd`: the loader found it and a registration of fd -1 is
// refused for the fd (EBADF) rather than as unsupported (EOPNOTSUPP, EPROTONOSUPPORT) by the
// provider or the kernel.
bool dmabufSupported(const VerbsApi& api, ibv_pd* pd);

class DeviceContext {
 public:
  static Status open(const VerbsApi* api, const PortRecord& port, const VerbsOptions& options,
                     std::shared_ptr<DeviceContext>* out);

  const VerbsApi& api() const { return *handles_->api; }
  const std::shared_ptr<DeviceHandles>& handles() const { return handles_; }
  ibv_context* context() const { return handles_->context; }
  ibv_pd* pd() const { return handles_->pd; }
  const ibv_device_attr& deviceAttr() const { return device_attr_; }
  const ibv_port_attr& portAttr() const { return port_attr_; }
  // This port as a queue-pair endpoint, qp_num and psn left 0.
  const QpEndpoint& endpoint() const { return endpoint_; }
  const QpSettings& qpSettings() const { return qp_settings_; }
  const DeviceProperties& properties() const { return properties_; }
  const VerbsOptions& options() const { return options_; }
  RegistrationCache& cache() const { return *cache_; }

 private:
  DeviceContext() = default;

  std::shared_ptr<DeviceHandles> handles_;
  ibv_device_attr device_attr_{};
  ibv_port_attr port_attr_{};
  QpEndpoint endpoint_;
  QpSettings qp_settings_;
  DeviceProperties properties_;
  VerbsOptions options_;
  std::shared_ptr<RegistrationCache> cache_;
};

}  // namespace tally::transport::verbs
