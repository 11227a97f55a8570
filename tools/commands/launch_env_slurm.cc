// SPDX-License-Identifier: Apache-2.0
// The cluster of a Slurm heterogeneous job written by `tally plan --format slurm`
// (launch_env.h), and the choice between the schedulers.
#include <utility>

#include "tools/commands/hostlist.h"
#include "tools/commands/launch_env.h"

namespace tally::commands {
namespace {

// Components of the job tally launch expects: 0 the GPU hosts, 1 the reducers.
constexpr int kSlurmGroups = 2;

std::string nodelistVariable(int group) {
  return "SLURM_JOB_NODELIST_HET_GROUP_" + std::to_string(group);
}

// `name`'s position in `list`, or -1.
int positionOf(const std::vector<std::string>& list, const std::string& name) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

Status slurmCluster(const ParamSource& env, std::optional<ClusterSpec>* out) {
  const std::optional<std::string> size_text = env.get("SLURM_HET_SIZE");
  if (!size_text || size_text->empty()) {
    *out = std::nullopt;
    return Status::ok();
  }
  int size = 0;
  TALLY_RETURN_IF_ERROR(parseEnvInt("SLURM_HET_SIZE", *size_text, 1, 1 << 20, &size));
  if (size != kSlurmGroups) {
    return Status::invalidUsage("SLURM_HET_SIZE is " + *size_text +
                                ": tally launch expects a heterogeneous job of 2 components, 0 "
                                "the GPU hosts and 1 the reducers (tally plan --format slurm)");
  }
  std::vector<std::string> nodes[kSlurmGroups];
  for (int g = 0; g < kSlurmGroups; ++g) {
    const std::string variable = nodelistVariable(g);
    const std::optional<std::string> text = env.get(variable);
    if (!text || text->empty()) {
      return Status::invalidUsage(variable + " is not set, but SLURM_HET_SIZE is: run tally " +
                                  "launch under srun inside the heterogeneous job");
    }
    Status st = expandHostlist(*text, &nodes[g]);
    if (!st.isOk()) return Status::invalidUsage(variable + ": " + st.message());
  }
  const std::optional<std::string> local = env.get("SLURM_LOCALID");
  if (local && !local->empty() && *local != "0") {
    return Status::invalidUsage("SLURM_LOCALID is " + *local + ": tally launch runs one task " +
                                "per node (srun --ntasks-per-node=1); start more processes per " +
                                "node from the command (torchrun)");
  }

  const std::string node = env.get("SLURMD_NODENAME").value_or("");
  int group = -1;
  const std::optional<std::string> group_text = env.get(kSlurmHetGroup);
  if (group_text && !group_text->empty()) {
    TALLY_RETURN_IF_ERROR(parseEnvInt(kSlurmHetGroup, *group_text, 0, kSlurmGroups - 1, &group));
  } else if (!node.empty()) {
    const bool in0 = positionOf(nodes[0], node) >= 0;
    const bool in1 = positionOf(nodes[1], node) >= 0;
    if (in0 && in1) {
      return Status::invalidUsage("SLURMD_NODENAME " + node + " is in both components: set " +
                                  kSlurmHetGroup + " on each srun to say which this task is");
    }
    if (!in0 && !in1) {
      return Status::invalidUsage("SLURMD_NODENAME " + node + " is in neither " +
                                  nodelistVariable(0) + " nor " + nodelistVariable(1));
    }
    group = in0 ? 0 : 1;
  } else {
    return Status::invalidUsage(std::string("neither ") + kSlurmHetGroup +
                                " nor SLURMD_NODENAME is set: cannot tell this task's component");
  }

  const std::vector<std::string>& mine = nodes[group];
  int index = -1;
  if (!node.empty()) {
    index = positionOf(mine, node);
    if (index < 0) {
      return Status::invalidUsage("SLURMD_NODENAME " + node + " is not in " +
                                  nodelistVariable(group) + " (component " + std::to_string(group) +
                                  ", from " + kSlurmHetGroup + ")");
    }
  } else {
    const std::optional<std::string> id = env.get("SLURM_NODEID");
    if (!id || id->empty()) {
      return Status::invalidUsage(
          "neither SLURMD_NODENAME nor SLURM_NODEID is set: cannot tell "
          "this task's node");
    }
    TALLY_RETURN_IF_ERROR(
        parseEnvInt("SLURM_NODEID", *id, 0, static_cast<int>(mine.size()) - 1, &index));
  }

  ClusterSpec spec;
  spec.variable = "Slurm";
  const std::string port = ":" + std::to_string(kSchedulerPort);
  for (size_t i = 0; i < nodes[0].size(); ++i)
    spec.pools[i == 0 ? 0 : 1].push_back(nodes[0][i] + port);
  for (const std::string& host : nodes[1]) spec.pools[2].push_back(host + port);
  spec.task_type = "het group " + std::to_string(group) + " node " + mine[index];
  if (group == 0) {
    spec.pool = index == 0 ? 0 : 1;
    spec.index = index == 0 ? 0 : index - 1;
  } else {
    spec.pool = 2;
    spec.index = index;
  }
  *out = std::move(spec);
  return Status::ok();
}

Status loadJobCluster(const ParamSource& env, ClusterEnv* out, std::vector<std::string>* notes) {
  TALLY_RETURN_IF_ERROR(ClusterEnv::load(env, out));
  if (out->primary() != nullptr) return Status::ok();
  // No CLUSTER_SPEC nor TF_CONFIG: a JobSet's or Slurm's variables describe the same pools.
  TALLY_RETURN_IF_ERROR(jobSetCluster(env, &out->cluster_spec));
  if (out->cluster_spec) return Status::ok();
  TALLY_RETURN_IF_ERROR(slurmCluster(env, &out->cluster_spec));
  if (out->cluster_spec) return Status::ok();
  const std::optional<std::string> job = env.get("SLURM_JOB_ID");
  if (job && !job->empty()) {
    notes->push_back("Slurm job " + *job +
                     " is not a heterogeneous job (SLURM_HET_SIZE is unset): " +
                     "tally launch needs one with the GPU hosts in component 0 and the reducers " +
                     "in component 1 (tally plan --format slurm)");
  }
  return Status::ok();
}

}  // namespace tally::commands
