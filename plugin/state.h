// Process-wide plugin state: the parameters, read once, and the devices built from them.
//
// NCCL's tables are plain C functions, and devices()/getProperties() carry no context, so the
// entry points share one PluginState. It is created by the first init (net or CollNet, any
// version) and lives until the library is unloaded. It owns no threads: every thread belongs to a
// comm, so NCCL may dlclose the library once all comms are closed and finalize has run.
//
// Tests build a PluginState from explicit Params (MapParamSource) and devices, and may install one
// as the global state before the first init.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/params.h"
#include "common/status.h"
#include "plugin/limits.h"
#include "reducer/coll_client.h"
#include "transport/tcp/tcp.h"
#include "transport/transport.h"

namespace tally::plugin {

class PluginState {
 public:
  // Finds the interfaces (TALLY_SOCKET_IFNAME, else NCCL_SOCKET_IFNAME, else the default choice)
  // and makes one TCP device per interface. Fails with kInvalidUsage when nothing matches.
  static Status create(const Params& params, std::unique_ptr<PluginState>* out);

  // Explicit devices, for tests (may be empty).
  PluginState(Params params, std::vector<std::shared_ptr<transport::Device>> devices);

  const Params& params() const { return params_; }
  int netDeviceCount() const { return static_cast<int>(devices_.size()); }
  // CollNet device i is net device i; there are none when TALLY_REDUCERS is empty.
  bool collEnabled() const { return !coll_options_.reducers.empty(); }
  int collDeviceCount() const { return collEnabled() ? netDeviceCount() : 0; }
  // Null when dev is out of range.
  transport::Device* device(int dev) const;
  const transport::tcp::TcpOptions& tcpOptions() const { return tcp_options_; }
  transport::ConnectionOptions connectionOptions() const;
  const reducer::CollOptions& collOptions() const { return coll_options_; }

  // The state the C entry points use. The first call loads Params from the environment, logs
  // their provenance and builds the devices; later calls return the same object. A failure is
  // remembered and returned by every later call (the environment does not change).
  static Status global(PluginState** out);
  // Installs `state` as the global state unless one exists already; false then.
  static bool installGlobal(std::unique_ptr<PluginState> state);
  // The global state, or null before the first successful global().
  static PluginState* globalIfLoaded();

 private:
  Params params_;
  std::vector<std::shared_ptr<transport::Device>> devices_;
  transport::tcp::TcpOptions tcp_options_;
  reducer::CollOptions coll_options_;
};

// "a:1, b:2,," -> {"a:1", "b:2"}
std::vector<std::string> splitList(const std::string& text);

}  // namespace tally::plugin
