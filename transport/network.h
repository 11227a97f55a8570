// SPDX-License-Identifier: Apache-2.0
// A Network is one transport backend as a whole, chosen at run time (TALLY_TRANSPORT): the
// Devices the point-to-point net offers NCCL, and the "host:port" listen and connect that workers
// and tally-reducer use to reach each other. This header is the only way in: every backend is
// made from one NetworkConfig by openNetwork (or openDefaultNetwork), and nothing outside
// transport/ names a backend.
//
// Backends other than TCP set up their connections over a TCP side channel to the same
// host:port: the address a reducer listens on is the same whatever the transport.
//
// Threads: every method may be called from any thread. A Network outlives nothing it made:
// listeners and connections keep what they need alive themselves.
//
// Choosing the transport (TALLY_TRANSPORT=auto|tcp|ofi|verbs):
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
// Backends are reached through a table of factory functions (NetworkBackends), so tests can pass
// fakes. builtinBackends() is the table of what this library was built with.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/params.h"
#include "common/status.h"
#include "common/timeouts.h"
#include "transport/transport.h"

namespace tally::transport {

class Network {
 public:
  virtual ~Network() = default;
  // "tcp", "ofi" or "verbs".
  virtual const char* name() const = 0;
  // One line for logs: what this backend runs on, e.g. "ofi provider tcp;ofi_rxm, domain lo".
  virtual std::string description() const = 0;
  // The libfabric provider this network runs on, as fi_info reports it ("efa", "tcp;ofi_rxm");
  // empty for backends that are not libfabric. TALLY_TRANSPORT=auto uses ofi only when this
  // names a high-speed provider (isHighSpeedProvider), so the ofi backend must override it.
  virtual std::string provider() const { return std::string(); }
  // The devices NCCL's point-to-point net sees, in a stable order. At least one.
  virtual const std::vector<std::shared_ptr<Device>>& devices() const = 0;
  // Listens on "host:port" (port 0 picks one; IPv6 as "[::1]:port"); Listener::address()
  // reports the bound port. Errors: kInvalidUsage for a malformed address, kSystem when it
  // cannot be bound.
  virtual Status listenAt(const std::string& host_port, std::unique_ptr<Listener>* out) = 0;
  // Resumable connect to a listenAt address. A refused connect is retried until the backend's
  // connect timeout, so a peer that starts a moment later is found. Never blocks; a malformed
  // address fails here with kInvalidUsage, everything else from PendingConnection::step.
  virtual Status connectTo(const std::string& host_port, const ConnectionOptions& options,
                           std::unique_ptr<PendingConnection>* out) = 0;
};

// A network interface of this host, as TCP (and the side channels of the other backends)
// choose them.
struct Interface {
  std::string name;     // "eth0"
  std::string address;  // numeric IPv4 or IPv6 address
  bool loopback = false;
};

// Interfaces that are up and have an address, chosen by `spec` (TALLY_SOCKET_IFNAME syntax:
// comma list of name prefixes, '^' excludes, '=' exact), in the order TCP makes devices for
// them. Empty spec: every non-loopback interface, or loopback alone when there is no other.
// Fails with kInvalidUsage naming the spec when nothing matches.
Status findInterfaces(const std::string& spec, std::vector<Interface>* out);

// The speed the kernel reports for interface `name`, read from <sys_class_net>/<name>/speed, in
// Mb/s; 0 when it reports none (loopback, most virtual interfaces, no such interface).
int linkSpeedMbps(const std::string& name, const std::string& sys_class_net = "/sys/class/net");

// Steps `pending` until it yields a connection (then *out is set), fails (its Status, final), or
// timeout_ms passes (kTimeout; `pending` may be stepped again or destroyed). timeout_ms < 0 waits
// as long as the backend's own connect timeout allows. Sleeps briefly between steps.
Status finishConnect(PendingConnection* pending, int64_t timeout_ms,
                     std::unique_ptr<Connection>* out);

enum class TransportKind { kAuto, kTcp, kOfi, kVerbs };

// "auto", "tcp", "ofi", "verbs".
const char* transportKindName(TransportKind kind);

// Parses one of the four names (exactly, lower case; surrounding spaces ignored). Anything else:
// kInvalidUsage naming the value and the accepted ones; *out untouched.
Status parseTransportKind(const std::string& text, TransportKind* out);

// TCP's own settings, which the TCP backend's options extend.
struct TcpConfig {
  int sockets = 2;                  // streams per connection, by default (TALLY_SOCKET_NSOCKS)
  uint64_t min_stripe = 64 * 1024;  // TALLY_SOCKET_MIN_STRIPE
  // Lets the thread that posts a small (one-stripe) send write it to the socket itself when the
  // connection has nothing queued, instead of waking the stream's send thread. For connections
  // whose posting threads have nothing else to do meanwhile (the reducer's); a caller that polls
  // many requests, such as a ring step, is better served by the send threads (measured: about
  // 30% slower with inline sends). Other backends ignore it.
  bool inline_sends = false;
};

// Everything a backend needs to open. Filled from Params by networkConfigFromParams.
struct NetworkConfig {
  TransportKind kind = TransportKind::kAuto;  // TALLY_TRANSPORT
  // TALLY_SOCKET_IFNAME syntax: the interfaces TCP makes devices for. Empty: the default choice.
  std::string ifname_spec;
  TcpConfig tcp;
  Timeouts timeouts;                     // every backend honours both
  int max_requests = 256;                // in-flight requests per direction, by default
  std::string ib_hca;                    // TALLY_IB_HCA (NCCL_IB_HCA syntax), verbs
  int ib_qps_per_connection = 2;         // TALLY_IB_QPS_PER_CONNECTION, verbs
  std::string sysfs_root = "/sys";       // where auto looks for RDMA devices (tests: a fake tree)
};

// The config the variables describe: TALLY_TRANSPORT, TALLY_SOCKET_IFNAME (else
// NCCL_SOCKET_IFNAME), TALLY_SOCKET_NSOCKS, TALLY_SOCKET_MIN_STRIPE, the two timeouts,
// TALLY_IB_HCA and TALLY_IB_QPS_PER_CONNECTION. A bad value: kInvalidUsage naming the variable,
// *out untouched.
Status networkConfigFromParams(const Params& params, NetworkConfig* out);
// The same without the checks, for callers that validated the Params already or take them as
// given (tests): an unknown TALLY_TRANSPORT leaves kind at auto, out-of-range counts are copied.
NetworkConfig networkConfigOf(const Params& params);

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

// The network for a caller that was given none (a reducer or a CollNet client in tests and
// tools): TCP on config.ifname_spec's interfaces (empty: the default choice), with config's TCP
// settings, timeouts and request depth; config.kind is not read. Fails as the TCP backend does.
Status openDefaultNetwork(const NetworkConfig& config, std::shared_ptr<Network>* out);

// Connects to a listenAt address over openDefaultNetwork(config), waiting as long as the
// network's connect timeout (config.timeouts.connect_ms) allows, for tools and tests that reach
// a reducer or a listener directly. Fails as openDefaultNetwork, connectTo or the connect does.
Status connectDefault(const std::string& host_port, const NetworkConfig& config,
                      const ConnectionOptions& options, std::unique_ptr<Connection>* out);

}  // namespace tally::transport
