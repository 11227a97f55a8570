// Process-wide plugin state: the parameters and the cluster variables, read once, and the
// transport::Network opened from them (TALLY_TRANSPORT, transport/network.h) whose devices NCCL sees
// and over which CollNet reaches its reducers.
//
// NCCL's tables are plain C functions, and devices()/getProperties() carry no context, so the
// entry points share one PluginState. It is created by the first init (net or CollNet, any
// version) and lives until the library is unloaded. It owns no threads: every thread belongs to a
// comm, so NCCL may dlclose the library once all comms are closed and finalize has run.
//
// CollNet's reducers come from resolveReducers (TALLY_REDUCERS, then CLUSTER_SPEC's workerpool2,
// then TF_CONFIG's ps). Only pools 0 and 1 join CollNet: a reducer or evaluator replica reports no
// CollNet devices even when reducers are known. A malformed CLUSTER_SPEC or TF_CONFIG turns CollNet
// off (collStatus() carries the error, which CollNet init returns) and leaves point-to-point alone.
//
// Tests build a PluginState from explicit Params and ClusterInput (MapParamSource) and devices,
// and may install one as the global state before the first init.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/cluster.h"
#include "common/params.h"
#include "common/status.h"
#include "plugin/limits.h"
#include "worker_client/coll_client.h"
#include "transport/network.h"
#include "transport/transport.h"

namespace tally::plugin {

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
  const ClusterInput& cluster() const { return cluster_; }
  // The reducers CollNet would use and where they came from (origin "none" when there are none).
  const ReducerList& reducers() const { return reducers_; }
  // Ok, or the malformed cluster variable's error: CollNet init fails with it.
  const Status& collStatus() const { return cluster_.status; }
  int netDeviceCount() const { return static_cast<int>(devices_.size()); }
  // True when the cluster input is good, reducers are known and this replica is a CollNet rank
  // (not in pool 2 or 3).
  bool collEnabled() const { return coll_off_reason_.empty(); }
  // CollNet device i is net device i; there are none when CollNet is off.
  int collDeviceCount() const { return collEnabled() ? netDeviceCount() : 0; }
  // The one line that says where the reducers come from, or why CollNet is off:
  // "CollNet reducers from CLUSTER_SPEC workerpool2: a:1,b:2" or "CollNet disabled: ...".
  std::string collNetSummary() const;
  // Logs collNetSummary() at INFO the first time it is called (a malformed cluster variable is
  // not logged here: CollNet init returns it and the entry point logs it as a WARN).
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

  // The state the C entry points use. The first call loads Params and the cluster variables from
  // the environment, logs the parameters' provenance and builds the devices; later calls return the
  // same object. A failure is remembered and returned by every later call (the environment does not
  // change).
  static Status global(PluginState** out);
  // Installs `state` as the global state unless one exists already; false then.
  static bool installGlobal(std::unique_ptr<PluginState> state);
  // The global state, or null before the first successful global().
  static PluginState* globalIfLoaded();

 private:
  PluginState(Params params, ClusterInput cluster, transport::NetworkConfig network_config,
              std::vector<std::shared_ptr<transport::Device>> devices);

  Params params_;
  ClusterInput cluster_;
  ReducerList reducers_;
  std::string coll_off_reason_;  // empty when CollNet is on
  std::once_flag coll_logged_;
  std::shared_ptr<transport::Network> network_;
  std::string transport_choice_;
  std::vector<std::shared_ptr<transport::Device>> devices_;
  transport::NetworkConfig network_config_;
  worker_client::CollOptions coll_options_;
};

}  // namespace tally::plugin
