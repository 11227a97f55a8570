// SPDX-License-Identifier: Apache-2.0
// `tally doctor`'s checks of this host: the plugin library, the cluster spec, the reducer list
// and the link speed of the interface Tally would use. Each returns its report line; none exits.
#pragma once

#include <optional>
#include <string>

#include "common/cluster.h"
#include "common/params.h"
#include "tools/commands/doctor_checks.h"
#include "transport/network.h"

namespace tally::commands::doctor {

// dlopens `path` the way NCCL does and reports the ncclNetPlugin_vN and ncclCollNetPlugin_vN
// tables it exports (8..12 expected) and their name ("Tally" expected).
CheckResult checkPlugin(const std::string& path);

// Whether dlopen(library) from this process (LD_LIBRARY_PATH, the loader cache, the default
// directories, or the path itself) gives a library whose tables are named "Tally" and that
// exports CollNet. Used as NcclCheckContext::loads_tally.
bool libraryIsTally(const std::string& library);

// The NCCL this host's loader finds as libnccl.so.2, by its ncclGetVersion (22809 for 2.28.9);
// 0 when there is none. A PyTorch job runs the NCCL bundled with PyTorch instead, which may
// differ: `tally doctor --nccl-version` names it.
int ncclVersionOnThisHost();

// CLUSTER_SPEC / TF_CONFIG. *env receives the parsed variables (left empty when malformed) and
// *coll_ranks the job's CollNet ranks (1 without a spec).
CheckResult checkCluster(const ParamSource& source, ClusterEnv* env, int* coll_ranks);

// The reducer list and where it came from; FAIL when it is empty. *list receives it.
CheckResult checkReducers(const Params& params, const ClusterEnv& env, ReducerList* list);

// The link the plugin would report to NCCL and cut CollNet slices for, chosen as the plugin
// chooses it (transport::chooseLink): TALLY_LINK_MBPS, else the speed of the interface the kernel
// routes the first reducer to (over TCP; over ofi or verbs, or without reducers, net device 0 of
// `network`), read from <sys_class_net>/<name>/speed. `network` may be null (it did not open).
struct LinkSpeed {
  // The link's own speed, from TALLY_LINK_MBPS or the kernel; empty when neither gives one
  // (loopback, virtual NICs reporting -1): the plugin then reports reported_mbps regardless.
  std::optional<double> gbps;
  int reported_mbps = 0;  // what NCCL is told, Mb/s
  std::string interface;  // "eth0", "lo"
  std::string reason;     // transport::LinkChoice::reason
};
LinkSpeed workerLinkSpeed(const Params& params, const ReducerList& reducers,
                          const transport::Network* network,
                          const std::string& sys_class_net = "/sys/class/net");

// The "link" line: the interface and the speed NCCL is told, and why. WARN when reducers are
// configured and that speed is below what NCCL builds a CollNet channel on, else PASS.
CheckResult checkLink(const LinkSpeed& link, bool reducers_known);

}  // namespace tally::commands::doctor
