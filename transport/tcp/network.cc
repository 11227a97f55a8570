// SPDX-License-Identifier: Apache-2.0
// The TCP Network: one Device per chosen interface, and listenAt/connectTo over the same sockets.
#include <utility>

#include "transport/network.h"
#include "transport/tcp/tcp.h"

namespace tally::transport::tcp {
namespace {

class TcpNetwork final : public Network {
 public:
  TcpNetwork(std::vector<std::shared_ptr<Device>> devices, const TcpOptions& options)
      : devices_(std::move(devices)), options_(options) {}

  const char* name() const override { return "tcp"; }

  std::string description() const override {
    std::string text = "tcp on";
    for (size_t i = 0; i < devices_.size(); ++i) {
      const DeviceProperties& p = devices_[i]->properties();
      text += (i == 0 ? " " : ", ") + p.name + " " + p.address;
    }
    return text + "; " + std::to_string(options_.sockets) + " sockets per connection";
  }

  const std::vector<std::shared_ptr<Device>>& devices() const override { return devices_; }

  Status listenAt(const std::string& host_port, std::unique_ptr<Listener>* out) override {
    return tcp::listenAt(host_port, options_, out);
  }

  Status connectTo(const std::string& host_port, const ConnectionOptions& options,
                   std::unique_ptr<PendingConnection>* out) override {
    return tcp::connectTo(host_port, options_, options, out);
  }

 private:
  const std::vector<std::shared_ptr<Device>> devices_;
  const TcpOptions options_;
};

}  // namespace

Status createNetwork(const std::string& ifname_spec, const TcpOptions& options,
                     std::shared_ptr<Network>* out) {
  std::vector<Interface> interfaces;
  TALLY_RETURN_IF_ERROR(findInterfaces(ifname_spec, &interfaces));
  std::vector<std::shared_ptr<Device>> devices;
  for (const Interface& iface : interfaces) {
    std::shared_ptr<Device> device;
    TALLY_RETURN_IF_ERROR(createDevice(iface, options, &device));
    devices.push_back(std::move(device));
  }
  *out = std::make_shared<TcpNetwork>(std::move(devices), options);
  return Status::ok();
}

}  // namespace tally::transport::tcp
