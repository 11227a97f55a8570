// SPDX-License-Identifier: Apache-2.0
// This host's side of `tally doctor`: plugin library, cluster spec, reducer list, link speed.
#include "tools/commands/doctor_host.h"

#include <dlfcn.h>

#include <memory>
#include <vector>

#include "tools/commands/launch_env.h"
#include "tools/driver/plugin_library.h"
#include "transport/network.h"
#include "transport/route.h"

namespace tally::commands::doctor {
namespace {

// "v8..v12", "v9, v11", "none".
std::string versionList(const std::vector<int>& v) {
  if (v.empty()) return "none";
  bool contiguous = true;
  for (size_t i = 1; i < v.size(); ++i) contiguous = contiguous && v[i] == v[i - 1] + 1;
  if (contiguous && v.size() > 1) {
    return "v" + std::to_string(v.front()) + "..v" + std::to_string(v.back());
  }
  std::string s;
  for (int n : v) s += (s.empty() ? "v" : ", v") + std::to_string(n);
  return s;
}

// The names of the exported tables that are not "Tally", as "net v9 is \"X\"".
std::string foreignName(const driver::PluginLibrary& lib) {
  for (int v : lib.netVersions()) {
    std::unique_ptr<driver::NetApi> net;
    if (!lib.net(v, &net).isOk()) continue;
    const std::string name = net->name() ? net->name() : "";
    if (name != "Tally") return "net v" + std::to_string(v) + " is named \"" + name + "\"";
  }
  for (int v : lib.collNetVersions()) {
    std::unique_ptr<driver::CollNetApi> coll;
    if (!lib.collNet(v, &coll).isOk()) continue;
    const std::string name = coll->name() ? coll->name() : "";
    if (name != "Tally") return "CollNet v" + std::to_string(v) + " is named \"" + name + "\"";
  }
  return "";
}

std::string joinList(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& item : items) s += (s.empty() ? "" : ",") + item;
  return s;
}

}  // namespace

CheckResult checkPlugin(const std::string& path) {
  CheckResult r{Severity::kFail, "plugin", ""};
  std::unique_ptr<driver::PluginLibrary> lib;
  Status st = driver::PluginLibrary::open(path, &lib);
  if (!st.isOk()) {
    r.detail = "cannot load it: " + st.message() +
               " (give the right path with --plugin, or install Tally)";
    return r;
  }
  const std::vector<int> net = lib->netVersions();
  const std::vector<int> coll = lib->collNetVersions();
  const std::string tables = "net " + versionList(net) + ", CollNet " + versionList(coll);
  if (net.empty() && coll.empty()) {
    r.detail = path + " exports no ncclNetPlugin_v8..v12 or ncclCollNetPlugin_v8..v12 table";
    return r;
  }
  if (coll.empty()) {
    r.detail =
        path + " exports " + tables + ": without CollNet tables there is no reduction server";
    return r;
  }
  const std::string foreign = foreignName(*lib);
  if (!foreign.empty()) {
    r.detail = path + " is not Tally: " + foreign;
    return r;
  }
  const size_t all = driver::kMaxTableVersion - driver::kMinTableVersion + 1;
  r.severity = (net.size() == all && coll.size() == all) ? Severity::kPass : Severity::kWarn;
  r.detail = path + " loads; \"Tally\" exports " + tables;
  if (r.severity == Severity::kWarn) r.detail += " (expected v8..v12 for both: a partial build?)";
  return r;
}

bool libraryIsTally(const std::string& library) {
  std::unique_ptr<driver::PluginLibrary> lib;
  if (!driver::PluginLibrary::open(library, &lib).isOk()) return false;
  return !lib->collNetVersions().empty() && foreignName(*lib).empty();
}

int ncclVersionOnThisHost() {
  void* lib = ::dlopen("libnccl.so.2", RTLD_LAZY | RTLD_LOCAL);
  if (lib == nullptr) return 0;
  using GetVersion = int (*)(int*);
  auto get = reinterpret_cast<GetVersion>(::dlsym(lib, "ncclGetVersion"));
  int version = 0;
  if (get == nullptr || get(&version) != 0) version = 0;
  ::dlclose(lib);
  return version;
}

CheckResult checkCluster(const ParamSource& source, ClusterEnv* env, int* coll_ranks) {
  CheckResult r{Severity::kFail, "cluster", ""};
  *coll_ranks = 1;
  // As tally launch reads it: CLUSTER_SPEC, TF_CONFIG, a JobSet's or a Slurm job's variables.
  ClusterEnv loaded;
  std::vector<std::string> notes;
  Status st = loadJobCluster(source, &loaded, &notes);
  if (!st.isOk()) {
    *env = ClusterEnv();
    r.detail = st.message() + " (fix the variable, or unset it outside a managed job)";
    return r;
  }
  *env = loaded;
  const ClusterSpec* spec = env->primary();
  if (spec == nullptr) {
    r.severity = Severity::kWarn;
    r.detail =
        "no cluster spec (neither CLUSTER_SPEC nor TF_CONFIG is set, nor a JobSet's or a Slurm "
        "heterogeneous job's variables); assuming 1 CollNet rank";
    return r;
  }
  *coll_ranks = std::max(1, spec->collRanks());
  r.detail = spec->variable + ": " + spec->task_type;
  if (fromClusterVariable(*spec)) r.detail += " index " + std::to_string(spec->index);
  r.detail += std::string(" is the ") + clusterRoleName(spec->role());
  if (spec->collRank() >= 0) {
    r.detail += ", CollNet rank " + std::to_string(spec->collRank()) + " of " +
                std::to_string(spec->collRanks());
  }
  if (!spec->trial.empty()) r.detail += ", trial " + spec->trial;
  if (env->cluster_spec && env->tf_config) r.detail += " (TF_CONFIG also set; CLUSTER_SPEC wins)";
  if (spec->collRank() < 0) {
    r.severity = Severity::kWarn;
    r.detail += "; this replica is no CollNet rank: run doctor on pool 0 or 1";
    return r;
  }
  r.severity = Severity::kPass;
  return r;
}

CheckResult checkReducers(const Params& params, const ClusterEnv& env, ReducerList* list) {
  *list = resolveReducers(params, env);
  if (list->addresses.empty()) {
    return {Severity::kFail, "reducers",
            "none: set TALLY_REDUCERS=host:port,... or list them in CLUSTER_SPEC workerpool2 or "
            "TF_CONFIG ps (without reducers CollNet connect declines)"};
  }
  return {Severity::kPass, "reducers",
          std::to_string(list->addresses.size()) + " from " + list->origin + ": " +
              joinList(list->addresses)};
}

LinkSpeed workerLinkSpeed(const Params& params, const ReducerList& reducers,
                          const transport::Network* network, const std::string& sys_class_net) {
  transport::LinkQuery query;
  query.override_mbps = params.linkMbps;
  if (params.collNet && !reducers.addresses.empty()) query.peer = reducers.addresses.front();
  query.transport = network != nullptr ? network->name() : "tcp";
  query.over_ip = query.transport == "tcp";
  if (network != nullptr && !network->devices().empty()) {
    query.device = &network->devices().front()->properties();
  }
  query.sys_class_net = sys_class_net;
  const transport::LinkChoice choice = transport::chooseLink(query);
  LinkSpeed out;
  if (choice.speed_known) out.gbps = static_cast<double>(choice.speed_mbps) / 1000.0;
  out.reported_mbps = choice.speed_mbps;
  out.interface = choice.interface;
  out.reason = choice.reason;
  return out;
}

CheckResult checkLink(const LinkSpeed& link, bool reducers_known) {
  CheckResult r{Severity::kPass, "link", ""};
  r.detail = (link.interface.empty() ? std::string("(none)") : link.interface) + ", " +
             std::to_string(link.reported_mbps) + " Mb/s told to NCCL: " + link.reason;
  if (reducers_known && link.reported_mbps < transport::kNcclMinCollNetMbps) {
    r.severity = Severity::kWarn;
    r.detail += "; NCCL builds no CollNet channel below " +
                std::to_string(transport::kNcclMinCollNetMbps) +
                " Mb/s and runs the job without CollNet";
  }
  return r;
}

}  // namespace tally::commands::doctor
