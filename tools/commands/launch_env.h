// SPDX-License-Identifier: Apache-2.0
// The job's cluster as a Kubernetes JobSet or a Slurm heterogeneous job describes it, turned
// into the same ClusterSpec that CLUSTER_SPEC gives, so `tally launch` derives the same roles and
// variables (launch_plan.h). `tally plan --format jobset|slurm` writes jobs that set exactly what
// is read here (plan_jobset.cc, plan_slurm.cc).
//
// Both map the job onto the four Vertex AI pools: the first GPU host is pool 0 (the primary,
// CollNet rank 0), the other GPU hosts are pool 1 in order, the reducer hosts pool 2; there is no
// evaluator pool. Every address is "host:kSchedulerPort".
//
// JobSet (docs/launch.md), read when TALLY_JOBSET_NAME is set; the manifest fills the first four
// from the pod's labels and annotations through the downward API:
//   TALLY_JOBSET_NAME             label jobset.sigs.k8s.io/jobset-name
//   TALLY_JOBSET_REPLICATED_JOB   label jobset.sigs.k8s.io/replicatedjob-name: "workers" or
//                                 "reducers"
//   TALLY_JOBSET_JOB_INDEX        label jobset.sigs.k8s.io/job-index (must be 0: replicas 1)
//   TALLY_JOBSET_POD_INDEX        annotation batch.kubernetes.io/job-completion-index; when
//                                 unset, JOB_COMPLETION_INDEX (Kubernetes sets it in Indexed Jobs)
//   TALLY_JOBSET_WORKERS          pods of the workers job (its completions)
//   TALLY_JOBSET_REDUCERS         pods of the reducers job (0: none)
//   TALLY_JOBSET_SUBDOMAIN        the JobSet's network subdomain (default: the JobSet's name)
// Pod P of replicated job J is "<name>-<J>-0-<P>.<subdomain>", JobSet's DNS scheme
// <jobSet>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>.
//
// Slurm, read when SLURM_HET_SIZE is set: component 0 holds the GPU hosts, component 1 the
// reducers, one task per node.
//   SLURM_HET_SIZE                       2
//   SLURM_JOB_NODELIST_HET_GROUP_0 / _1  each component's nodes, as a hostlist (hostlist.h)
//   TALLY_SLURM_HET_GROUP                this task's component, set by the sbatch script on each
//                                        srun; when unset, the component whose list holds
//                                        SLURMD_NODENAME
//   SLURMD_NODENAME                      this node, found in its component's list; when unset,
//                                        SLURM_NODEID is the index in that list
//   SLURM_LOCALID                        must be 0 when set (one task per node)
//
// Malformed or missing values are kInvalidUsage naming the variable and what was expected.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/cluster.h"
#include "common/params.h"
#include "common/status.h"

namespace tally::commands {

// The port of every address: the primary's MASTER_PORT and each reducer's --listen, as on Vertex.
inline constexpr int kSchedulerPort = 2222;
inline constexpr const char* kJobSetWorkersJob = "workers";
inline constexpr const char* kJobSetReducersJob = "reducers";
inline constexpr const char* kJobSetName = "TALLY_JOBSET_NAME";
inline constexpr const char* kJobSetReplicatedJob = "TALLY_JOBSET_REPLICATED_JOB";
inline constexpr const char* kJobSetJobIndex = "TALLY_JOBSET_JOB_INDEX";
inline constexpr const char* kJobSetPodIndex = "TALLY_JOBSET_POD_INDEX";
inline constexpr const char* kJobSetWorkers = "TALLY_JOBSET_WORKERS";
inline constexpr const char* kJobSetReducers = "TALLY_JOBSET_REDUCERS";
inline constexpr const char* kJobSetSubdomain = "TALLY_JOBSET_SUBDOMAIN";
inline constexpr const char* kSlurmHetGroup = "TALLY_SLURM_HET_GROUP";
// Each is a known TALLY_ name, never reported as a typo by `tally env` and `tally doctor`.
static_assert(isLaunchInputVariable(kJobSetName) && isLaunchInputVariable(kJobSetReplicatedJob) &&
              isLaunchInputVariable(kJobSetJobIndex) && isLaunchInputVariable(kJobSetPodIndex) &&
              isLaunchInputVariable(kJobSetWorkers) && isLaunchInputVariable(kJobSetReducers) &&
              isLaunchInputVariable(kJobSetSubdomain) && isLaunchInputVariable(kSlurmHetGroup));

// Whether the spec came from CLUSTER_SPEC or TF_CONFIG rather than a scheduler's own variables,
// whose task_type already names the task in full ("het group 0 node gpu08").
inline bool fromClusterVariable(const ClusterSpec& spec) {
  return spec.variable == "CLUSTER_SPEC" || spec.variable == "TF_CONFIG";
}

// The JobSet's cluster, or nullopt when TALLY_JOBSET_NAME is unset. spec.variable is "JobSet".
Status jobSetCluster(const ParamSource& env, std::optional<ClusterSpec>* out);
// The Slurm heterogeneous job's cluster, or nullopt when SLURM_HET_SIZE is unset.
// spec.variable is "Slurm".
Status slurmCluster(const ParamSource& env, std::optional<ClusterSpec>* out);

// The job's cluster as tally launch and tally doctor read it: CLUSTER_SPEC or TF_CONFIG
// (ClusterEnv::load), else the first of jobSetCluster and slurmCluster that finds its variables,
// as out->cluster_spec. A malformed variable is an error that names it; a plain (not
// heterogeneous) Slurm job gives no spec and a note that says why it is not used.
Status loadJobCluster(const ParamSource& env, ClusterEnv* out, std::vector<std::string>* notes);

// Parses a decimal integer in [min, max] from `name`'s value; kInvalidUsage naming the variable.
Status parseEnvInt(const std::string& name, const std::string& value, int min, int max, int* out);

}  // namespace tally::commands
