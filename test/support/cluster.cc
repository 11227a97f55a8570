// SPDX-License-Identifier: Apache-2.0
#include "test/support/cluster.h"

#include <cstdio>
#include <cstdlib>

#include "common/params.h"

namespace tally::functional {

std::string pluginPath() {
#ifdef TALLY_TEST_PLUGIN
  return TALLY_TEST_PLUGIN;
#else
  return "";
#endif
}

std::string reducerPath() {
#ifdef TALLY_TEST_REDUCER
  return TALLY_TEST_REDUCER;
#else
  return "";
#endif
}

std::string transportUnderTest() {
  return EnvParamSource().get("TALLY_TRANSPORT").value_or("");
}

Status startCluster(int nreducers, Cluster* out,
                    const std::vector<std::string>& extra_reducer_args) {
  Cluster c;
  TALLY_RETURN_IF_ERROR(driver::TempDir::create("functional", &c.dir));
  TALLY_RETURN_IF_ERROR(createFileStore(c.dir->path(), &c.store));
  if (nreducers > 0) {
    std::vector<std::string> args = {"--threads", "1"};
    const std::string transport = transportUnderTest();
    if (!transport.empty()) args.insert(args.end(), {"--transport", transport});
    args.insert(args.end(), extra_reducer_args.begin(), extra_reducer_args.end());
    TALLY_RETURN_IF_ERROR(
        driver::startReducers(reducerPath(), nreducers, args, 20000, &c.reducers));
    c.reducer_list = driver::reducerList(c.reducers);
  }
  *out = std::move(c);
  return Status::ok();
}

void setWorkerEnvironment(const std::string& reducer_list) {
  // This process stands in for an NCCL job, which configures the plugin through its environment.
  ::setenv("TALLY_REDUCERS", reducer_list.c_str(), 1);
  ::setenv("TALLY_SOCKET_IFNAME", "lo", 1);
  ::setenv("TALLY_CONNECT_TIMEOUT_MS", "20000", 1);
  ::setenv("TALLY_TIMEOUT_MS", "30000", 1);
  const std::string transport = transportUnderTest();
  if (!transport.empty()) ::setenv("TALLY_TRANSPORT", transport.c_str(), 1);
}

bool check(int rank, const Status& s, const std::string& what) {
  if (s.isOk()) return true;
  std::fprintf(stderr, "worker %d: %s: %s\n", rank, what.c_str(), s.toString().c_str());
  return false;
}

bool openCollNet(int version, std::unique_ptr<driver::PluginLibrary>* lib,
                 std::unique_ptr<driver::CollNetApi>* api) {
  if (!check(-1, driver::PluginLibrary::open(pluginPath(), lib), "dlopen")) return false;
  return check(-1, (*lib)->collNet(version, api), "collnet table");
}

bool openNet(int version, std::unique_ptr<driver::PluginLibrary>* lib,
             std::unique_ptr<driver::NetApi>* api) {
  if (!check(-1, driver::PluginLibrary::open(pluginPath(), lib), "dlopen")) return false;
  return check(-1, (*lib)->net(version, api), "net table");
}

std::string runAll(int nworkers, const std::function<int(int)>& body, int64_t timeout_ms) {
  std::vector<driver::WorkerExit> exits;
  Status s = driver::runWorkers(nworkers, body, timeout_ms, &exits);
  if (!s.isOk()) return s.toString();
  std::string why;
  driver::allWorkersOk(exits, &why);
  return why;
}

}  // namespace tally::functional
