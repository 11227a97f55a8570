// SPDX-License-Identifier: Apache-2.0
// The ofi Devices and Network.
#include <algorithm>

#include "common/log.h"
#include "common/strings.h"
#include "transport/ofi/internal.h"
#include "transport/ofi/ofi.h"
#include "transport/tcp/tcp.h"

namespace tally::transport::ofi {
namespace {

// Where a device's listener puts its side channel: the domain's own IP address when it has one
// (tcp, verbs over IP), else the configured or first usable interface (efa has no IP).
Status sideHost(const Domain& domain, const OfiOptions& options, std::string* out) {
  if (!domain.address.empty()) {
    *out = domain.address;
    return Status::ok();
  }
  if (!options.side_address.empty()) {
    *out = options.side_address;
    return Status::ok();
  }
  std::vector<tcp::Interface> interfaces;
  TALLY_RETURN_IF_ERROR(tcp::findInterfaces("", &interfaces));
  *out = interfaces.front().address;
  return Status::ok();
}

class OfiDevice final : public Device {
 public:
  OfiDevice(std::shared_ptr<Domain> domain, std::string side_host,
            std::shared_ptr<const ConnectContext> context)
      : domain_(std::move(domain)),
        properties_(domainProperties(*domain_)),
        side_host_(std::move(side_host)),
        context_(std::move(context)) {}

  const DeviceProperties& properties() const override { return properties_; }

  Status listen(std::unique_ptr<Listener>* listener) override {
    return makeListener(domain_, joinHostPort(side_host_, 0), *context_, listener);
  }

  Status connect(const ConnectHandle& handle, const ConnectionOptions& options,
                 std::unique_ptr<PendingConnection>* pending) override {
    std::string address;
    TALLY_RETURN_IF_ERROR(side::decodeHandle(kHandleMagic, handle, &address));
    return makePendingConnection(domain_, address, *context_, options, pending);
  }

  const std::shared_ptr<Domain>& domain() const { return domain_; }
  const std::string& sideHost() const { return side_host_; }

 private:
  const std::shared_ptr<Domain> domain_;
  const DeviceProperties properties_;
  const std::string side_host_;
  const std::shared_ptr<const ConnectContext> context_;
};

class OfiNetwork final : public Network {
 public:
  OfiNetwork(std::vector<std::shared_ptr<Device>> devices, std::shared_ptr<Domain> first,
             std::shared_ptr<const ConnectContext> context, std::string description)
      : devices_(std::move(devices)),
        first_(std::move(first)),
        context_(std::move(context)),
        description_(std::move(description)) {}

  const char* name() const override { return "ofi"; }
  std::string description() const override { return description_; }
  // The libfabric provider, layers joined by ';' ("tcp;ofi_rxm").
  std::string provider() const override { return first_->provider; }
  const std::vector<std::shared_ptr<Device>>& devices() const override { return devices_; }

  // host:port addressing uses the first device's domain at both ends.
  Status listenAt(const std::string& host_port, std::unique_ptr<Listener>* out) override {
    return makeListener(first_, host_port, *context_, out);
  }
  Status connectTo(const std::string& host_port, const ConnectionOptions& options,
                   std::unique_ptr<PendingConnection>* out) override {
    return makePendingConnection(first_, host_port, *context_, options, out);
  }

 private:
  const std::vector<std::shared_ptr<Device>> devices_;
  const std::shared_ptr<Domain> first_;
  const std::shared_ptr<const ConnectContext> context_;
  const std::string description_;
};

}  // namespace

Status createNetwork(const OfiOptions& options, std::shared_ptr<Network>* out) {
  if (options.max_requests < 1) {
    return Status::invalidUsage("ofi: max_requests must be at least 1, got " +
                                std::to_string(options.max_requests));
  }
  const FabricApi* api = nullptr;
  TALLY_RETURN_IF_ERROR(loadFabric(&api));
  std::vector<std::shared_ptr<Domain>> domains;
  TALLY_RETURN_IF_ERROR(openDomains(api, options, &domains));

  auto context = std::make_shared<ConnectContext>();
  context->options = options;
  context->side.timeouts = options.timeouts;
  context->side.setup_timeout_ms = options.timeouts.connect_ms;

  std::vector<std::shared_ptr<Device>> devices;
  std::string names;
  for (const std::shared_ptr<Domain>& domain : domains) {
    std::string host;
    TALLY_RETURN_IF_ERROR(sideHost(*domain, options, &host));
    auto device = std::make_shared<OfiDevice>(domain, host, context);
    const DeviceProperties& p = device->properties();
    TALLY_INFO(log::kNet, "ofi: device %s (%s) side channel on %s, speed %d Mbps%s%s",
               p.name.c_str(), domain->provider.c_str(), host.c_str(), p.speed_mbps,
               p.pci_path.empty() ? "" : " pci ", p.pci_path.c_str());
    names += (names.empty() ? "" : ",") + p.name;
    devices.push_back(std::move(device));
  }
  const std::string description = "ofi provider " + domains.front()->provider + ", domain" +
                                  (domains.size() > 1 ? "s " : " ") + names;
  *out = std::make_shared<OfiNetwork>(std::move(devices), domains.front(), std::move(context),
                                      description);
  return Status::ok();
}

}  // namespace tally::transport::ofi
