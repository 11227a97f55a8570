// SPDX-License-Identifier: Apache-2.0
// Choosing and opening a backend (transport/network.h): the one place that names them all.
#include "transport/network.h"

#include <dirent.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "common/strings.h"

#include "transport/tcp/socket.h"
#include "transport/tcp/tcp.h"
#if TALLY_HAVE_TRANSPORT_OFI
#include "transport/ofi/ofi.h"
#endif
#if TALLY_HAVE_TRANSPORT_VERBS
#include "transport/verbs/verbs.h"
#endif

namespace tally::transport {
namespace {

constexpr int kMaxSockets = 16;
constexpr int kMaxQpsPerConnection = 16;

// The TCP backend's options: config.tcp with the timeouts and request depth every backend takes.
tcp::TcpOptions tcpOptions(const NetworkConfig& config) {
  tcp::TcpOptions options;
  static_cast<TcpConfig&>(options) = config.tcp;
  options.timeouts = config.timeouts;
  options.max_requests = config.max_requests;
  return options;
}

Status openTcp(const NetworkConfig& config, std::shared_ptr<Network>* out) {
  return tcp::createNetwork(config.ifname_spec, tcpOptions(config), out);
}

#if TALLY_HAVE_TRANSPORT_OFI
// The provider comes from FI_PROVIDER (libfabric reads it); every domain of it is a device.
Status openOfi(const NetworkConfig& config, std::shared_ptr<Network>* out) {
  ofi::OfiOptions options;
  options.timeouts = config.timeouts;
  options.max_requests = config.max_requests;
  return ofi::createNetwork(options, out);
}
#endif

#if TALLY_HAVE_TRANSPORT_VERBS
Status openVerbs(const NetworkConfig& config, std::shared_ptr<Network>* out) {
  verbs::VerbsOptions options;
  options.hca = config.ib_hca;
  options.qps_per_connection = config.ib_qps_per_connection;
  options.max_requests = config.max_requests;
  options.timeouts = config.timeouts;
  options.side_ifname = config.ifname_spec;
  options.sysfs_root = config.sysfs_root;
  return verbs::createNetwork(options, out);
}
#endif

NetworkFactory factoryFor(const NetworkBackends& backends, TransportKind kind) {
  switch (kind) {
    case TransportKind::kTcp:
      return backends.tcp;
    case TransportKind::kOfi:
      return backends.ofi;
    case TransportKind::kVerbs:
      return backends.verbs;
    case TransportKind::kAuto:
      break;
  }
  return nullptr;
}

// Opens one backend. On failure *reason is why, without context ("not built into this library"
// or the factory's message).
Status tryOpen(const NetworkBackends& backends, TransportKind kind, const NetworkConfig& config,
               std::shared_ptr<Network>* out, std::string* reason) {
  NetworkFactory factory = factoryFor(backends, kind);
  if (factory == nullptr) {
    *reason = "not built into this library";
    return Status::invalidUsage(std::string(transportKindName(kind)) + " is " + *reason);
  }
  std::shared_ptr<Network> network;
  Status st = factory(config, &network);
  if (st.isOk() && !network) st = Status::internal("the backend returned no network");
  if (st.isOk() && network->devices().empty()) st = Status::system("no devices");
  if (!st.isOk()) {
    *reason = st.message();
    return st;
  }
  *out = std::move(network);
  return Status::ok();
}

// The device names in <sysfs_root>/class/<cls>, sorted; none when the folder is missing.
std::vector<std::string> sysfsDevices(const std::string& sysfs_root, const char* cls) {
  std::vector<std::string> names;
  DIR* dir = ::opendir((sysfs_root + "/class/" + cls).c_str());
  if (dir == nullptr) return names;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') names.emplace_back(entry->d_name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& name : names) s += (s.empty() ? "" : ", ") + name;
  return s;
}

std::string usingLine(const Network& network) {
  return std::string("using ") + network.name() + " (" + network.description() + ")";
}

// Tries ofi for auto: *out is the network when its provider is a high-speed one; otherwise *out
// stays empty, whatever ofi opened is closed again, and *steps says why.
void tryAutoOfi(const NetworkBackends& backends, const NetworkConfig& config,
                std::shared_ptr<Network>* out, std::string* steps) {
  std::string reason;
  std::shared_ptr<Network> network;
  if (!tryOpen(backends, TransportKind::kOfi, config, &network, &reason).isOk()) {
    *steps += "ofi unavailable (" + reason + "); ";
    return;
  }
  const std::string provider = network->provider();
  if (isHighSpeedProvider(provider)) {
    *steps += "ofi provider " + provider + " is high-speed; ";
    *out = std::move(network);
    return;
  }
  *steps += "ofi provider " + (provider.empty() ? std::string("(unnamed)") : provider) +
            " is not high-speed; ";
}

Status openAuto(const NetworkBackends& backends, const NetworkConfig& config,
                std::shared_ptr<Network>* out, std::string* why) {
  std::string steps = "auto: ";
  std::string reason;
  std::shared_ptr<Network> network;
  // Verbs, EFA and Omni-Path devices are in class/infiniband, Slingshot's in class/cxi. Without
  // one, neither libibverbs nor libfabric is loaded at all.
  const std::string ib_dir = config.sysfs_root + "/class/infiniband";
  const std::string cxi_dir = config.sysfs_root + "/class/cxi";
  const std::vector<std::string> ib = sysfsDevices(config.sysfs_root, "infiniband");
  const std::vector<std::string> cxi = sysfsDevices(config.sysfs_root, "cxi");
  if (ib.empty() && cxi.empty()) {
    steps += "no RDMA device in " + ib_dir + " or " + cxi_dir + "; ";
  } else {
    if (!ib.empty()) steps += "RDMA devices in " + ib_dir + ": " + joined(ib) + "; ";
    if (!cxi.empty()) steps += "RDMA devices in " + cxi_dir + ": " + joined(cxi) + "; ";
    if (ib.empty()) {
      steps += "verbs not tried (no device in " + ib_dir + "); ";
    } else if (tryOpen(backends, TransportKind::kVerbs, config, &network, &reason).isOk()) {
      *why = steps + usingLine(*network);
      *out = std::move(network);
      return Status::ok();
    } else {
      steps += "verbs unavailable (" + reason + "); ";
    }
    tryAutoOfi(backends, config, &network, &steps);
    if (network) {
      *why = steps + usingLine(*network);
      *out = std::move(network);
      return Status::ok();
    }
  }
  Status st = tryOpen(backends, TransportKind::kTcp, config, &network, &reason);
  if (!st.isOk()) return Status(st.code(), steps + "tcp: " + st.message());
  *why = steps + usingLine(*network);
  *out = std::move(network);
  return Status::ok();
}

}  // namespace

const char* transportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kAuto:
      return "auto";
    case TransportKind::kTcp:
      return "tcp";
    case TransportKind::kOfi:
      return "ofi";
    case TransportKind::kVerbs:
      return "verbs";
  }
  return "?";
}

Status parseTransportKind(const std::string& text, TransportKind* out) {
  const std::string t = trim(text);
  for (TransportKind kind : {TransportKind::kAuto, TransportKind::kTcp, TransportKind::kOfi,
                             TransportKind::kVerbs}) {
    if (t == transportKindName(kind)) {
      *out = kind;
      return Status::ok();
    }
  }
  return Status::invalidUsage("transport '" + text + "' is not one of auto, tcp, ofi, verbs");
}

Status networkConfigFromParams(const Params& params, NetworkConfig* out) {
  TransportKind kind = TransportKind::kAuto;
  Status st = parseTransportKind(params.transport, &kind);
  if (!st.isOk()) return Status::invalidUsage("TALLY_TRANSPORT: " + st.message());
  if (params.socketNsocks < 1 || params.socketNsocks > kMaxSockets) {
    return Status::invalidUsage("TALLY_SOCKET_NSOCKS=" + std::to_string(params.socketNsocks) +
                                " is not valid: expected 1 to " + std::to_string(kMaxSockets));
  }
  if (params.ibQpsPerConnection < 1 || params.ibQpsPerConnection > kMaxQpsPerConnection) {
    return Status::invalidUsage(
        "TALLY_IB_QPS_PER_CONNECTION=" + std::to_string(params.ibQpsPerConnection) +
        " is not valid: expected 1 to " + std::to_string(kMaxQpsPerConnection));
  }
  NetworkConfig c = networkConfigOf(params);
  c.kind = kind;
  *out = std::move(c);
  return Status::ok();
}

NetworkConfig networkConfigOf(const Params& params) {
  NetworkConfig c;
  (void)parseTransportKind(params.transport, &c.kind);  // unknown: left at auto
  c.ifname_spec = params.socketIfname.empty() ? params.ncclSocketIfname : params.socketIfname;
  c.tcp.sockets = static_cast<int>(params.socketNsocks);
  c.tcp.min_stripe = params.socketMinStripe;
  c.timeouts = Timeouts::fromParams(params);
  c.ib_hca = params.ibHca;
  c.ib_qps_per_connection = static_cast<int>(params.ibQpsPerConnection);
  return c;
}

Status openDefaultNetwork(const NetworkConfig& config, std::shared_ptr<Network>* out) {
  return openTcp(config, out);
}

Status connectDefault(const std::string& host_port, const NetworkConfig& config,
                      const ConnectionOptions& options, std::unique_ptr<Connection>* out) {
  std::shared_ptr<Network> network;
  TALLY_RETURN_IF_ERROR(openDefaultNetwork(config, &network));
  std::unique_ptr<PendingConnection> pending;
  TALLY_RETURN_IF_ERROR(network->connectTo(host_port, options, &pending));
  return finishConnect(pending.get(), -1, out);
}


const NetworkBackends& builtinBackends() {
  // A backend whose headers were missing at build time (TALLY_WITH_OFI/VERBS) is left out.
  static const NetworkBackends backends = {
      openTcp,
#if TALLY_HAVE_TRANSPORT_OFI
      openOfi,
#else
      nullptr,
#endif
#if TALLY_HAVE_TRANSPORT_VERBS
      openVerbs,
#else
      nullptr,
#endif
  };
  return backends;
}

bool isHighSpeedProvider(const std::string& provider) {
  static const char* const kSlowCores[] = {"tcp", "udp", "sockets", "net", "shm", "sm2"};
  bool any_core = false;
  for (const std::string& layer : splitList(provider, ';')) {
    // Utility providers (ofi_rxm, ofi_rxd, ...) run over a core provider; only cores say what
    // the fabric is.
    if (startsWith(layer, "ofi_")) continue;
    for (const char* slow : kSlowCores) {
      if (layer == slow) return false;
    }
    any_core = true;
  }
  return any_core;
}

Status openNetwork(const NetworkConfig& config, std::shared_ptr<Network>* out, std::string* why) {
  return openNetwork(builtinBackends(), config, out, why);
}

Status openNetwork(const NetworkBackends& backends, const NetworkConfig& config,
                   std::shared_ptr<Network>* out, std::string* why) {
  if (config.kind == TransportKind::kAuto) return openAuto(backends, config, out, why);
  const std::string name = transportKindName(config.kind);
  std::shared_ptr<Network> network;
  std::string reason;
  Status st = tryOpen(backends, config.kind, config, &network, &reason);
  if (!st.isOk()) {
    if (config.kind == TransportKind::kTcp) return st;
    return Status(st.code(), "transport " + name + " was asked for but cannot be used: " + reason);
  }
  *why = name + " as asked; " + usingLine(*network);
  *out = std::move(network);
  return Status::ok();
}

}  // namespace tally::transport
