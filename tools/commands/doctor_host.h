// `tally doctor`'s checks of this host: the plugin library, the cluster spec, the reducer list
// and the link speed of the interface Tally would use. Each returns its report line; none exits.
#pragma once

#include <optional>
#include <string>

#include "common/cluster.h"
#include "common/params.h"
#include "tools/commands/doctor_checks.h"

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

// The link speed of the first interface Tally would pick (TALLY_SOCKET_IFNAME, then
// NCCL_SOCKET_IFNAME), from <sys_class_net>/<name>/speed (Mb/s). Empty gbps when it cannot be
// read: loopback, virtual devices reporting -1, no such file.
struct LinkSpeed {
  std::optional<double> gbps;
  std::string source;  // "eth0 (/sys/class/net/eth0/speed)", "lo (loopback)"
};
LinkSpeed workerLinkSpeed(const Params& params,
                          const std::string& sys_class_net = "/sys/class/net");

}  // namespace tally::commands::doctor
