// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the multi-process functional tests: where the built plugin and tally-reducer
// are, a per-test file store and reducers on loopback, and what a worker process does before it
// loads the plugin.
//
// The gtest process never initializes the plugin itself; it only forks workers (which do) and
// starts reducers, so no plugin thread is ever duplicated by fork().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/store.h"
#include "tools/driver/plugin_library.h"
#include "tools/driver/process.h"

namespace tally::functional {

// Empty when the build had no such target.
std::string pluginPath();
std::string reducerPath();

// The transport the suite runs over: TALLY_TRANSPORT from the test's own environment ("" when
// unset: each process's default, auto). startCluster passes it to the reducers as --transport
// and setWorkerEnvironment to the workers, so that both ends agree; FI_PROVIDER and the other
// FI_ variables reach them unchanged, since fork and exec keep the environment. CTest's
// functional_ofi entry (TALLY_TEST_OFI=ON) runs the CollNet and net tests this way.
std::string transportUnderTest();

inline constexpr int64_t kStoreTimeoutMs = 30000;
inline constexpr int64_t kWorkerTimeoutMs = 120000;

// A test's world: a temporary directory holding a FileStore, and `nreducers` running reducers.
struct Cluster {
  std::unique_ptr<driver::TempDir> dir;
  std::unique_ptr<Store> store;
  std::vector<std::unique_ptr<driver::ReducerProcess>> reducers;
  std::string reducer_list;  // TALLY_REDUCERS syntax
};
// extra_reducer_args: more tally-reducer arguments for every reducer.
Status startCluster(int nreducers, Cluster* out,
                    const std::vector<std::string>& extra_reducer_args = {});

// In a worker process, before dlopen: the environment an NCCL job would set for the plugin.
// Bounded timeouts, so a broken peer fails the test instead of hanging it.
void setWorkerEnvironment(const std::string& reducer_list);

// In a worker process: opens the plugin and picks the version-`version` tables. Logs and
// returns false on failure.
bool openCollNet(int version, std::unique_ptr<driver::PluginLibrary>* lib,
                 std::unique_ptr<driver::CollNetApi>* api);
bool openNet(int version, std::unique_ptr<driver::PluginLibrary>* lib,
             std::unique_ptr<driver::NetApi>* api);

// In a worker process: prints "worker <rank>: <what>: <status>" to stderr when s is not ok.
bool check(int rank, const Status& s, const std::string& what);

// Runs `body` in nworkers forked workers and returns "" when all exited 0, else a description.
std::string runAll(int nworkers, const std::function<int(int)>& body,
                   int64_t timeout_ms = kWorkerTimeoutMs);

}  // namespace tally::functional
