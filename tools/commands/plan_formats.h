// SPDX-License-Identifier: Apache-2.0
// `tally plan --format jobset|slurm`: the planned job (plan_model.h) for Kubernetes and Slurm
// instead of Vertex AI's gcloud command. Both run `tally launch -- <training command>` on every
// host, as the gcloud command does, and set what launch reads there (launch_env.h).
//
// The GPU hosts of pools 0 and 1 become one group (pool 0's single replica first: the primary),
// pool 2 the reducer group; pool 3 (evaluators) has no place in either and is left out with a
// note. The text starts with comment lines that give the rules' result and the plan's notes, so
// it can be saved and submitted as it is.
#pragma once

#include <string>

#include "tools/commands/plan_model.h"

namespace tally::plan {

enum class Format { kGcloud, kJobSet, kSlurm };

// "gcloud", "jobset", "slurm" -> *out; false for anything else.
bool parseFormat(const std::string& text, Format* out);

// The planned job as a JobSet (jobset.x-k8s.io/v1alpha2, JobSet 0.5 or later) manifest in YAML:
// replicated job "workers" (an Indexed Job of one pod per GPU host, nvidia.com/gpu requests and
// limits from pool 0's acceleratorCount, pool 0's image) and "reducers" (one pod per reducer,
// pool 2's image, CPU and memory requests and limits from pool 2's machine type, kept off nodes
// labelled as GPU nodes; absent without reducers). At most one pod of either on a node. A worker's
// exit fails its Job and the JobSet; a reducer's is restarted in its pod and never fails its Job.
// DNS host names on, the JobSet complete once the workers are. Without a planned job
// (plan.gcloud empty) only the comment lines, which say why.
std::string renderJobSet(const Plan& plan);

// The planned job as an sbatch script for a heterogeneous job: component 0 the GPU hosts
// (--gpus-per-node from pool 0's acceleratorCount), `#SBATCH hetjob`, component 1 the reducers;
// one srun per component runs `tally launch`, the reducers in the background until the training
// step ends. Without reducers, a plain job of the GPU hosts. Without a planned job only the
// comment lines.
std::string renderSlurm(const Plan& plan);

// The JobSet's metadata.name: the display name in lower case, anything but letters, digits and
// '-' turned into '-', starting with a letter, short enough that every pod's host name
// (<name>-reducers-0-<index>) fits in a 63-character DNS label.
std::string jobSetName(const std::string& display_name, int64_t max_pods);

// The comment lines both formats start with, each starting with "# ".
std::string planComment(const Plan& plan);

}  // namespace tally::plan
