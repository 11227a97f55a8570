// SPDX-License-Identifier: Apache-2.0
// The plugin's process-wide state, in one object: the parameters and the cluster variables, read
// once; the transport::Network opened from them (TALLY_TRANSPORT, transport/network.h) whose
// devices NCCL sees and over which CollNet reaches its reducers; the per-communicator contexts
// init hands out; and the connects in progress. Nothing else in plugin/ keeps state across calls
// but the NCCL logger and TALLY_ABORT_ON_ERROR (edge.h), which are the process's.
//
// Lifetime: NCCL's tables are plain C functions, and devices()/getProperties() carry no context,
// so the entry points share one PluginState, owned by a slot in state.cc. The first init (net or
// CollNet, any version) creates it; it lives until the library is unloaded (getProperties hands
// NCCL pointers to the devices' name strings). finalize (v11) destroys only the context its init
// created. The state owns no threads: every thread belongs to a comm, so NCCL may dlclose the
// library once all comms are closed and finalize has run.
//
// CollNet's reducers come from resolveReducers (TALLY_REDUCERS, then CLUSTER_SPEC's workerpool2,
// then TF_CONFIG's ps). CollNet reports one device whatever they are, so that every host of a job
// reports the same count (NCCL 2.30 fails a communicator whose ranks differ): only TALLY_COLLNET=0
// or a net without devices make it zero. What keeps this replica out of CollNet is reported by
// connect, which declines: no reducers, a reducer or evaluator replica (only pools 0 and 1 join),
// or a malformed CLUSTER_SPEC or TF_CONFIG (collStatus() carries the error; point-to-point is
// unaffected).
//
// Tests build a PluginState from explicit Params and ClusterInput (MapParamSource) and devices,
// and may install one as the global state before the first init.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/cluster.h"
#include "common/params.h"
#include "common/status.h"
#include "plugin/abi/nccl_types.h"
#include "worker_client/coll_client.h"
#include "transport/network.h"
#include "transport/route.h"
#include "transport/transport.h"

namespace tally::plugin {

// Limits Tally reports to NCCL in getProperties and enforces.
inline constexpr int kMaxComms = 65536;
inline constexpr int kMaxRecvs = transport::kMaxRecvs;  // grouped receives: 8
inline constexpr int kMaxNetRequests = NCCL_NET_MAX_REQUESTS;
// NCCL may post maxRecvs times the request limit on a send comm.
inline constexpr int kMaxSendRequests = kMaxNetRequests * kMaxRecvs;
inline constexpr uint64_t kMaxP2pBytes = NCCL_MAX_NET_SIZE_BYTES;  // 1 TiB
inline constexpr uint64_t kMaxCollBytes = 1ull << 30;  // 1 GiB: test() reports it as an int

static_assert(kMaxRecvs == 8, "properties advertise maxRecvs 8");
static_assert(kMaxNetRequests == 32);

// A per-communicator context handed to NCCL by v11 init and taken back by finalize. Pre-v11
// tables have no ctx; their adapters pass nullptr.
struct CommContext {
  uint64_t comm_id = 0;
  int traffic_class = -1;  // NCCL_NET_TRAFFIC_CLASS_UNDEF; Tally does not use it
  bool coll = false;
};

// The live contexts. NCCL calls finalize even when init failed, with a ctx init never wrote, so a
// ctx is only deleted when this registry knows it: finalize of an unknown pointer (NULL, stale or
// never set) is accepted and ignored. Thread-safe.
class ContextRegistry {
 public:
  CommContext* create(uint64_t comm_id, int traffic_class, bool coll);
  // True when ctx was live (and is now destroyed).
  // When ctx was live, *comm_id (if given) receives the id init gave it.
  bool destroy(const void* ctx, uint64_t* comm_id = nullptr);
  bool contains(const void* ctx) const;
  size_t size() const;
  // The live contexts of net and of CollNet inits, "still open: 1 net, 0 CollNet", for the init
  // and finalize log lines.
  std::string describeOpen() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<const void*, std::unique_ptr<CommContext>> live_;
};

// Connections in progress, keyed by the id connect stores in NCCL's handle (NetHandle in
// net_comm.h). Thread-safe.
class PendingConnects {
 public:
  uint64_t park(std::unique_ptr<transport::PendingConnection> pending);
  // Null when the id is unknown.
  std::unique_ptr<transport::PendingConnection> take(uint64_t id);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<transport::PendingConnection>> pending_;
};

// CLUSTER_SPEC and TF_CONFIG as the plugin read them. A malformed variable is kept as its Status
// (env is then empty) so that it can turn CollNet off without failing the net side.
struct ClusterInput {
  ClusterEnv env;
  Status status;  // ClusterEnv::load's result

  static ClusterInput load(const ParamSource& source);
};

class PluginState {
 public:
  // Opens the Network TALLY_TRANSPORT asks for (transport::openNetwork; for TCP the interfaces
  // are TALLY_SOCKET_IFNAME, else NCCL_SOCKET_IFNAME, else the default choice) and logs the
  // choice at INFO. Fails with kInvalidUsage naming the variable for a bad value or when no
  // interface matches, and with the backend's error when an explicit ofi or verbs cannot be used;
  // the cluster input never makes it fail. The first form has no cluster variables.
  static Status create(const Params& params, std::unique_ptr<PluginState>* out);
  static Status create(const Params& params, ClusterInput cluster,
                       std::unique_ptr<PluginState>* out);

  // Explicit devices, for tests (may be empty); CollNet then reaches reducers over default TCP.
  PluginState(Params params, std::vector<std::shared_ptr<transport::Device>> devices);
  PluginState(Params params, ClusterInput cluster,
              std::vector<std::shared_ptr<transport::Device>> devices);

  const Params& params() const { return params_; }
  // The link CollNet's connections run over (transport::chooseLink): the interface the kernel
  // routes the first reducer to over TCP, else net device 0; its speed is TALLY_LINK_MBPS, else
  // the interface's own. Chosen once, at construction, and logged at INFO by create().
  const transport::LinkChoice& collLink() const { return coll_link_; }
  // The speed getProperties reports for net device `dev`, in Mb/s (> 0). Device 0 is the one
  // CollNet mirrors, and NCCL keeps one speed for the topology node both share: it and the
  // CollNet device report collLink()'s speed, the one the slice plan is cut for. The others
  // report TALLY_LINK_MBPS, else their own speed, else transport::kUnknownLinkMbps.
  int reportedSpeedMbps(int dev) const;
  const ClusterInput& cluster() const { return cluster_; }
  // The reducers CollNet would use and where they came from (origin "none" when there are none).
  const ReducerList& reducers() const { return reducers_; }
  // Ok, or the malformed cluster variable's error: CollNet init fails with it.
  const Status& collStatus() const { return cluster_.status; }
  int netDeviceCount() const { return static_cast<int>(devices_.size()); }
  // True when the cluster input is good, reducers are known and this replica is a CollNet rank
  // (not in pool 2 or 3): CollNet connect can form a group.
  bool collEnabled() const { return coll_off_reason_.empty(); }
  // One CollNet device, which mirrors net device 0, unless TALLY_COLLNET=0 or there is no net
  // device. It does not depend on collEnabled(): see the comment at the top.
  int collDeviceCount() const { return params_.collNet && netDeviceCount() > 0 ? 1 : 0; }
  // The one line that says where the reducers come from, or why CollNet connect declines:
  // "CollNet reducers from CLUSTER_SPEC workerpool2: a:1,b:2" or "CollNet disabled: ...".
  std::string collNetSummary() const;
  // Why CollNet connect declines; empty when collEnabled().
  const std::string& collOffReason() const { return coll_off_reason_; }
  // Logs collNetSummary() at INFO the first time it is called, or a malformed cluster variable's
  // error as a WARN.
  void logCollNetOnce();
  // Null when dev is out of range.
  transport::Device* device(int dev) const;
  // The network settings the variables describe (TCP's sockets, the timeouts), with the plugin's
  // request depth; the network was opened from them.
  const transport::NetworkConfig& networkConfig() const { return network_config_; }
  // The opened transport; null when the state was built from explicit devices.
  const std::shared_ptr<transport::Network>& network() const { return network_; }
  // What openNetwork chose and why ("auto: ...; using tcp (...)"); empty without a network.
  const std::string& transportChoice() const { return transport_choice_; }
  transport::ConnectionOptions connectionOptions() const;
  const worker_client::CollOptions& collOptions() const { return coll_options_; }
  ContextRegistry& contexts() { return contexts_; }
  PendingConnects& pendingConnects() { return pending_connects_; }

  // The state the C entry points use. The first call loads Params and the cluster variables from
  // the environment, logs the parameters' provenance and builds the devices; later calls return the
  // same object. A failure is remembered and returned by every later call (the environment does not
  // change).
  static Status global(PluginState** out);
  // Installs `state` as the global state unless one exists already; false then.
  static bool installGlobal(std::unique_ptr<PluginState> state);
  // The global state, or null before the first successful global().
  static PluginState* globalIfLoaded();
  // The global state, or kInternal when no init has succeeded yet (every entry point but init).
  static Status loaded(PluginState** out);

 private:
  // `transport_name` is the network's ("tcp", "ofi", "verbs"): over TCP the reducers' route
  // decides the link, over the others device 0 carries the reducer connections.
  PluginState(Params params, ClusterInput cluster, transport::NetworkConfig network_config,
              std::vector<std::shared_ptr<transport::Device>> devices,
              const std::string& transport_name);

  Params params_;
  ClusterInput cluster_;
  ReducerList reducers_;
  std::string coll_off_reason_;  // empty when CollNet is on
  std::once_flag coll_logged_;
  std::shared_ptr<transport::Network> network_;
  std::string transport_choice_;
  std::vector<std::shared_ptr<transport::Device>> devices_;
  transport::LinkChoice coll_link_;
  transport::NetworkConfig network_config_;
  worker_client::CollOptions coll_options_;
  // Declared after the devices: a pending connection is destroyed before the device it uses.
  ContextRegistry contexts_;
  PendingConnects pending_connects_;
};

}  // namespace tally::plugin
