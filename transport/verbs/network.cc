// SPDX-License-Identifier: Apache-2.0
// The verbs Devices and Network, and createNetwork.
#include <algorithm>

#include "common/log.h"
#include "common/strings.h"
#include "transport/side_channel.h"
#include "transport/tcp/tcp.h"
#include "transport/verbs/context.h"
#include "transport/verbs/internal.h"
#include "transport/verbs/verbs.h"

namespace tally::transport::verbs {
namespace {

class VerbsDevice final : public Device {
 public:
  VerbsDevice(std::shared_ptr<DeviceContext> context, const std::string& side_address)
      : context_(std::move(context)), properties_(context_->properties()) {
    properties_.address = side_address;
  }

  const DeviceProperties& properties() const override { return properties_; }

  Status listen(std::unique_ptr<Listener>* listener) override {
    return makeListener(context_, joinHostPort(properties_.address, 0), listener);
  }

  Status connect(const ConnectHandle& handle, const ConnectionOptions& options,
                 std::unique_ptr<PendingConnection>* pending) override {
    std::string address;
    TALLY_RETURN_IF_ERROR(side::decodeHandle(kHandleMagic, handle, &address));
    return makePendingConnection(context_, address, options, pending);
  }

  const std::shared_ptr<DeviceContext>& context() const { return context_; }

 private:
  const std::shared_ptr<DeviceContext> context_;
  DeviceProperties properties_;
};

class VerbsNetwork final : public Network {
 public:
  VerbsNetwork(std::vector<std::shared_ptr<Device>> devices, std::string description,
               std::shared_ptr<DeviceContext> first)
      : devices_(std::move(devices)),
        description_(std::move(description)),
        first_(std::move(first)) {}

  const char* name() const override { return "verbs"; }
  std::string description() const override { return description_; }
  const std::vector<std::shared_ptr<Device>>& devices() const override { return devices_; }

  Status listenAt(const std::string& host_port, std::unique_ptr<Listener>* out) override {
    return makeListener(first_, host_port, out);
  }

  Status connectTo(const std::string& host_port, const ConnectionOptions& options,
                   std::unique_ptr<PendingConnection>* out) override {
    return makePendingConnection(first_, host_port, options, out);
  }

 private:
  const std::vector<std::shared_ptr<Device>> devices_;
  const std::string description_;
  const std::shared_ptr<DeviceContext> first_;
};

Status checkOptions(const VerbsOptions& options) {
  if (options.qps_per_connection < 1 || options.qps_per_connection > 15) {
    return Status::invalidUsage("TALLY_IB_QPS_PER_CONNECTION is " +
                                std::to_string(options.qps_per_connection) + ", expected 1 to 15");
  }
  if (options.max_requests < 1 || options.max_requests > 65536) {
    return Status::invalidUsage("verbs max requests is " + std::to_string(options.max_requests) +
                                ", expected 1 to 65536");
  }
  if (options.min_stripe == 0) return Status::invalidUsage("verbs min_stripe must not be 0");
  return Status::ok();
}

}  // namespace

Status createNetwork(const VerbsOptions& options, std::shared_ptr<Network>* out) {
  TALLY_RETURN_IF_ERROR(checkOptions(options));
  const VerbsApi* api = nullptr;
  TALLY_RETURN_IF_ERROR(loadVerbs(&api));
  return createNetworkWith(api, options, out);
}

Status createNetworkWith(const VerbsApi* api, const VerbsOptions& options,
                         std::shared_ptr<Network>* out) {
  TALLY_RETURN_IF_ERROR(checkOptions(options));
  std::vector<PortRecord> ports;
  TALLY_RETURN_IF_ERROR(listPorts(*api, &ports));
  std::vector<PortRecord> chosen;
  TALLY_RETURN_IF_ERROR(selectPorts(options.hca, ports, &chosen));
  // Device::listen binds the side channel to this host's address on the chosen interface.
  std::vector<tcp::Interface> interfaces;
  TALLY_RETURN_IF_ERROR(tcp::findInterfaces(options.side_ifname, &interfaces));
  const std::string side_address = interfaces.front().address;

  std::vector<std::shared_ptr<Device>> devices;
  std::shared_ptr<DeviceContext> first;
  std::string names;
  for (const PortRecord& port : chosen) {
    std::shared_ptr<DeviceContext> context;
    Status status = DeviceContext::open(api, port, options, &context);
    if (!status.isOk()) {
      // One bad port should not take the others down; none at all is an error below.
      TALLY_WARN("verbs: skipping RDMA port %s:%d: %s", port.device.c_str(), port.port,
                 status.toString().c_str());
      continue;
    }
    if (!first) first = context;
    names += (names.empty() ? "" : ",") + context->properties().name;
    devices.push_back(std::make_shared<VerbsDevice>(std::move(context), side_address));
  }
  if (devices.empty()) {
    return Status::invalidUsage("no RDMA port could be opened (TALLY_IB_HCA \"" + options.hca +
                                "\"); see the warnings above");
  }
  const char* link =
      first->endpoint().link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand";
  std::string description = std::string("verbs ") + link + " " + names + ", " +
                            std::to_string(options.qps_per_connection) +
                            " data queue pair(s) per connection, side channel on " + side_address;
  *out =
      std::make_shared<VerbsNetwork>(std::move(devices), std::move(description), std::move(first));
  return Status::ok();
}

}  // namespace tally::transport::verbs
