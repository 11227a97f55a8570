// Helpers shared by the plugin tests: parameters from a map (never setenv), and a global plugin
// state on loopback installed before the first init.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "common/params.h"
#include "plugin/abi/abi.h"
#include "plugin/state.h"

extern "C" const ncclNet_v8_t ncclNetPlugin_v8;
extern "C" const ncclNet_v9_t ncclNetPlugin_v9;
extern "C" const ncclNet_v10_t ncclNetPlugin_v10;
extern "C" const ncclNet_v11_t ncclNetPlugin_v11;
extern "C" const ncclCollNet_v8_t ncclCollNetPlugin_v8;
extern "C" const ncclCollNet_v9_t ncclCollNetPlugin_v9;
extern "C" const ncclCollNet_v10_t ncclCollNetPlugin_v10;
extern "C" const ncclCollNet_v11_t ncclCollNetPlugin_v11;

namespace tally::plugin::testing {

inline Params paramsFrom(std::map<std::string, std::string> values) {
  Params p;
  Status st = Params::load(MapParamSource(std::move(values)), &p);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return p;
}

// Loopback devices, short timeouts, a (dead) reducer so that CollNet reports devices.
inline std::map<std::string, std::string> loopbackValues() {
  // TCP always: on a host with an RDMA device or a fast libfabric provider, auto would pick that.
  return {{"TALLY_TRANSPORT", "tcp"},
          {"TALLY_SOCKET_IFNAME", "lo"},
          {"TALLY_REDUCERS", "127.0.0.1:1"},
          {"TALLY_CONNECT_TIMEOUT_MS", "1s"},
          {"TALLY_TIMEOUT_MS", "10s"}};
}

// Installs the loopback state as the process-wide one (once per test process; gtest runs each
// test in its own process under ctest, and in one process when run by hand).
inline void installLoopbackState() {
  if (PluginState::globalIfLoaded() != nullptr) return;
  std::unique_ptr<PluginState> state;
  Status st = PluginState::create(paramsFrom(loopbackValues()), &state);
  ASSERT_TRUE(st.isOk()) << st.toString();
  PluginState::installGlobal(std::move(state));
}

}  // namespace tally::plugin::testing
