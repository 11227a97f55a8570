// SPDX-License-Identifier: Apache-2.0
// The TCP Device: one network interface, its properties read from sysfs.
#include <climits>
#include <cstdlib>

#include "common/log.h"
#include "transport/tcp/internal.h"
#include "transport/tcp/wire.h"

namespace tally::transport::tcp {
namespace {

constexpr int kDefaultSpeedMbps = 10000;

// 64-bit FNV-1a: a stable id for an interface name.
uint64_t hashName(const std::string& name) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

int readSpeedMbps(const std::string& name) {
  const int speed = linkSpeedMbps(name);
  return speed > 0 ? speed : kDefaultSpeedMbps;
}

std::string readPciPath(const std::string& name) {
  std::string link = "/sys/class/net/" + name + "/device";
  char resolved[PATH_MAX];
  if (realpath(link.c_str(), resolved) == nullptr) return "";
  return resolved;
}

class TcpDevice final : public Device {
 public:
  TcpDevice(DeviceProperties properties, const SockAddr& addr, const TcpOptions& options)
      : properties_(std::move(properties)), addr_(addr), options_(options) {}

  const DeviceProperties& properties() const override { return properties_; }

  Status listen(std::unique_ptr<Listener>* listener) override {
    return makeListener(addr_, options_, listener);
  }

  Status connect(const ConnectHandle& handle, const ConnectionOptions& options,
                 std::unique_ptr<PendingConnection>* pending) override {
    SockAddr addr;
    TALLY_RETURN_IF_ERROR(decodeHandle(handle, &addr));
    return makePendingConnection(addr, addr.toString(), options_, options, pending);
  }

 private:
  const DeviceProperties properties_;
  const SockAddr addr_;  // the interface's address, port 0
  const TcpOptions options_;
};

}  // namespace

Status createDevice(const Interface& iface, const TcpOptions& options,
                    std::shared_ptr<Device>* out) {
  SockAddr addr;
  TALLY_RETURN_IF_ERROR(resolve(iface.address, 0, true, &addr));
  DeviceProperties properties;
  properties.name = iface.name;
  properties.address = iface.address;
  properties.pci_path = readPciPath(iface.name);
  properties.speed_mbps = readSpeedMbps(iface.name);
  properties.loopback = iface.loopback;
  properties.guid = hashName(iface.name);
  TALLY_INFO(log::kNet, "tcp: device %s address %s speed %d Mbps%s%s", iface.name.c_str(),
             iface.address.c_str(), properties.speed_mbps,
             properties.pci_path.empty() ? "" : " pci ", properties.pci_path.c_str());
  *out = std::make_shared<TcpDevice>(std::move(properties), addr, options);
  return Status::ok();
}

}  // namespace tally::transport::tcp
