// Choosing the transport at run time (TALLY_TRANSPORT=auto|tcp|ofi|verbs) and opening it.
//
//   tcp            the TCP backend.
//   ofi, verbs     that backend, or an error saying why it cannot be used; never TCP instead.
//   auto           tcp, without loading any fabric library, when sysfs shows no RDMA device
//                  (nothing in <sysfs>/class/infiniband, where verbs, EFA and Omni-Path
//                  devices appear, nor in <sysfs>/class/cxi, Slingshot's). Otherwise verbs when
//                  there is an infiniband device and it opens; else ofi when its provider is a
//                  high-speed one (isHighSpeedProvider); else tcp.
//
// The sysfs check matters because opening libfabric loads every provider it was built with
// (libpsm2, librdmacm, ...), some of which install signal handlers, into the NCCL process.
//
// Backends are reached through a table of factory functions (NetworkBackends), so this file
// needs no backend's headers and tests can pass fakes. builtinBackends() is the table of what
// this library was built with.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/params.h"
#include "common/status.h"
#include "transport/network.h"
#include "transport/tcp/tcp.h"

namespace tally::transport {

enum class TransportKind { kAuto, kTcp, kOfi, kVerbs };

// "auto", "tcp", "ofi", "verbs".
const char* transportKindName(TransportKind kind);

// Parses one of the four names (exactly, lower case; surrounding spaces ignored). Anything else:
// kInvalidUsage naming the value and the accepted ones; *out untouched.
Status parseTransportKind(const std::string& text, TransportKind* out);

// Everything a backend needs to open. Filled from Params by networkConfigFromParams.
struct NetworkConfig {
  TransportKind kind = TransportKind::kAuto;  // TALLY_TRANSPORT
  // TALLY_SOCKET_IFNAME syntax: the interfaces TCP makes devices for. Empty: the default choice.
  std::string ifname_spec;
  // TCP's sockets per connection and stripe size. Its timeout and request fields are not read:
  // tcpOptions() takes them from the fields below, which every backend honours.
  tcp::TcpOptions tcp;
  int64_t connect_timeout_ms = 120000;  // TALLY_CONNECT_TIMEOUT_MS
  int64_t timeout_ms = 300000;          // TALLY_TIMEOUT_MS: a transfer making no progress
  int max_requests = 256;               // in-flight requests per direction, by default
  std::string ib_hca;                   // TALLY_IB_HCA (NCCL_IB_HCA syntax), verbs
  int ib_qps_per_connection = 2;        // TALLY_IB_QPS_PER_CONNECTION, verbs
  std::string sysfs_root = "/sys";      // where auto looks for RDMA devices (tests: a fake tree)

  // `tcp` with the timeouts and request depth above.
  tcp::TcpOptions tcpOptions() const;
};

// The config the variables describe: TALLY_TRANSPORT, TALLY_SOCKET_IFNAME (else
// NCCL_SOCKET_IFNAME), TALLY_SOCKET_NSOCKS, TALLY_SOCKET_MIN_STRIPE, the two timeouts,
// TALLY_IB_HCA and TALLY_IB_QPS_PER_CONNECTION. A bad value: kInvalidUsage naming the variable,
// *out untouched.
Status networkConfigFromParams(const Params& params, NetworkConfig* out);

// Makes a backend's Network, or says why it cannot (the message is the reason alone, e.g.
// "libibverbs.so.1 not found"; openNetwork adds the context).
using NetworkFactory = Status (*)(const NetworkConfig& config, std::shared_ptr<Network>* out);

// One factory per backend; null: not built into this library.
struct NetworkBackends {
  NetworkFactory tcp = nullptr;
  NetworkFactory ofi = nullptr;
  NetworkFactory verbs = nullptr;
};

// The backends this library was built with.
const NetworkBackends& builtinBackends();

// Whether a libfabric provider name (as Network::provider() gives it, layers joined by ';')
// runs on a high-speed fabric. Not high-speed: an empty name, a core provider that is tcp, udp,
// sockets, net, shm or sm2 (so "tcp;ofi_rxm" and "udp;ofi_rxd" too), and a utility provider
// alone ("ofi_rxm") whose core is unknown.
bool isHighSpeedProvider(const std::string& provider);

// Opens the backend config.kind asks for, by the rules at the top of this file, with
// builtinBackends(). On success *out is the network and *why one line saying what was chosen
// and why, for the INFO log: "auto: RDMA devices in /sys/class/infiniband: mlx5_0; verbs
// unavailable (libibverbs.so.1 not found); ofi provider tcp;ofi_rxm is not high-speed; using tcp
// (...)" or "auto: no RDMA device in /sys/class/infiniband or /sys/class/cxi; using tcp (...)".
// On failure *out is untouched and the Status says which backend failed and why (an explicit
// ofi or verbs that cannot open: its factory's code, kInvalidUsage when it is not built in).
Status openNetwork(const NetworkConfig& config, std::shared_ptr<Network>* out, std::string* why);
// The same with an explicit table of backends (tests).
Status openNetwork(const NetworkBackends& backends, const NetworkConfig& config,
                   std::shared_ptr<Network>* out, std::string* why);

}  // namespace tally::transport
