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

// Registers [addr, addr+length) for local and remote write. kCuda memory goes through plain
// ibv_reg_mr, which works when a peer-memory client (nvidia-peermem) is loaded; see context.cc.
Status registerRange(const DeviceHandles& handles, uint64_t addr, uint64_t length, MemoryType type,
                     Registered* out);

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
