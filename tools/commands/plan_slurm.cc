// SPDX-License-Identifier: Apache-2.0
// `tally plan --format slurm`: the planned job as an sbatch script for a heterogeneous job
// (plan_formats.h).
#include <string>
#include <vector>

#include "tools/commands/launch_env.h"
#include "tools/commands/launch_plan.h"
#include "tools/commands/plan_formats.h"

namespace tally::plan {
namespace {

std::string words(const std::vector<std::string>& argv) {
  std::string text;
  for (const std::string& word : argv) text += " " + commands::shellWord(word);
  return text;
}

// One component's #SBATCH lines: a node per host, one task per node, the whole node.
std::string component(int64_t nodes, int64_t gpus) {
  std::string text = "#SBATCH --nodes=" + std::to_string(nodes) + "\n";
  text += "#SBATCH --ntasks-per-node=1\n";
  if (gpus > 0) text += "#SBATCH --gpus-per-node=" + std::to_string(gpus) + "\n";
  text += "#SBATCH --exclusive\n";
  return text;
}

// The srun line that runs `tally launch -- CMD` on every node of one component.
std::string srunLine(int group, bool het, const std::string& command) {
  std::string line = "srun";
  if (het) line += " --het-group=" + std::to_string(group);
  line += " --ntasks-per-node=1 --export=ALL," + std::string(commands::kSlurmHetGroup) + "=" +
          std::to_string(group);
  return line + " tally launch --" + command;
}

}  // namespace

std::string renderSlurm(const Plan& plan) {
  std::string text = "#!/bin/bash\n" + planComment(plan);
  if (plan.gcloud.empty()) {
    return text + "# No script: the job cannot be planned until pool 0 holds one replica.\n";
  }
  const JobSpec& job = plan.planned;
  int64_t hosts = job.pools[0].replica_count;
  if (job.pools[1].present) hosts += job.pools[1].replica_count;
  const int64_t reducers = job.pools[2].present ? job.pools[2].replica_count : 0;
  const bool het = reducers > 0;
  const std::string command = words(plan.train_command);

  text += "# Component 0: " + std::to_string(hosts) + " GPU nodes like " +
          job.pools[0].machine_type + "; the first is the primary (CollNet rank 0).\n";
  if (het) {
    text += "# Component 1: " + std::to_string(reducers) + " CPU reducer nodes like " +
            job.pools[2].machine_type + ".\n";
  }
  text += "# Each reducer listens on port " + std::to_string(commands::kSchedulerPort) +
          " of its node, which is the primary's MASTER_PORT too; `tally` must be on PATH on every "
          "node.\n";
  text += "# Container images (add --container-image=URI to each srun with pyxis): training " +
          job.pools[0].image_uri + (het ? ", reducers " + job.pools[2].image_uri : "") + "\n";
  text += "#SBATCH --job-name=" + jobSetName(plan.display_name, hosts) + "\n";
  text += component(hosts, job.pools[0].accelerator_count);
  if (het) text += "#SBATCH hetjob\n" + component(reducers, 0);
  text += "\n";
  if (!het) {
    text += "# No reducers: tally launch runs the command without CollNet.\n";
    return text + "exec " + srunLine(0, false, command) + "\n";
  }
  text +=
      "# The reducers first, in the background: tally launch starts tally-reducer on each "
      "node of component 1.\n";
  text += srunLine(1, true, command) + " &\n";
  text += "reducers=$!\n";
  text +=
      "# The training step: tally launch sets NCCL and Tally up and runs the command on each "
      "GPU node.\n";
  text += srunLine(0, true, command) + "\n";
  text += "status=$?\n";
  text += "# The reducers serve until stopped.\n";
  text += "kill \"$reducers\" 2>/dev/null\n";
  text += "wait \"$reducers\" 2>/dev/null\n";
  text += "exit \"$status\"\n";
  return text;
}

}  // namespace tally::plan
