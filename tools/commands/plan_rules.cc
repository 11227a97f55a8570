// SPDX-License-Identifier: Apache-2.0
// The rules of a plan (plan_rules.h).
#include "tools/commands/plan_rules.h"

#include <sstream>

#include "tools/commands/machine_types.h"

namespace tally::plan {
namespace {

std::string gbpsText(double gbps) {
  std::ostringstream out;
  out << gbps;
  return out.str();
}

std::string hostsText(int64_t hosts) {
  return std::to_string(hosts) + (hosts == 1 ? " host" : " hosts");
}

}  // namespace

int64_t collnetHosts(const JobSpec& job) {
  int64_t hosts = 0;
  for (int i : {0, 1}) hosts += job.pools[i].present ? job.pools[i].replica_count : 0;
  return hosts;
}

bool isVertexReductionServerImage(const std::string& image) {
  return image.find("reductionserver") != std::string::npos;
}

bool poolHasGpus(const PoolSpec& pool) {
  if (pool.accelerator_count > 0 && isGpuType(pool.accelerator_type)) return true;
  MachineShape shape;
  return parseMachineType(pool.machine_type, &shape).isOk() && shape.gpus > 0;
}

bool isReducerMachine(const std::string& machine_type) {
  MachineShape shape;
  return parseMachineType(machine_type, &shape).isOk() && shape.gpus == 0 &&
         shape.vcpus >= kMinReducerVcpus;
}

Rule primaryPoolRule(const PoolSpec& primary) {
  Rule rule{"primary-pool", false, ""};
  if (!primary.present) {
    rule.detail = "pool 0 is empty; the primary replica's pool is required";
  } else if (primary.replica_count != 1) {
    rule.detail = "pool 0 has replicaCount " + std::to_string(primary.replica_count) +
                  "; it must be exactly 1 (put further replicas in pool 1)";
  } else {
    rule.pass = true;
    rule.detail = "pool 0 is present with replicaCount 1";
  }
  return rule;
}

Rule workerGpusRule(const JobSpec& job) {
  Rule rule{"worker-gpus", true, ""};
  for (int i : {0, 1}) {
    const PoolSpec& pool = job.pools[i];
    if (!pool.present || pool.replica_count == 0 || poolHasGpus(pool)) continue;
    std::string what = "pool " + std::to_string(i) + " (" + pool.machine_type + ")";
    if (pool.accelerator_count > 0 && !pool.accelerator_type.empty()) {
      what += " asks for " + pool.accelerator_type + ", which is not an NVIDIA GPU";
    } else {
      what += " has no GPUs";
    }
    rule.pass = false;
    rule.detail = what +
                  ": a reduction server sums the gradients of GPU workers for NCCL, which runs "
                  "on NVIDIA GPUs; give pools 0 and 1 acceleratorType and acceleratorCount (e.g. "
                  "8 x NVIDIA_TESLA_V100) or a GPU machine type (a2, a3, g2)";
    return rule;
  }
  rule.detail = collnetHosts(job) == 0 ? "pools 0 and 1 hold no hosts (see primary-pool)"
                                       : "the hosts of pools 0 and 1 have GPUs";
  return rule;
}

Rule workerImageRule(const JobSpec& job, const std::vector<std::string>& reducer_images) {
  Rule rule{"worker-image", true, ""};
  std::vector<std::string> images;  // "pool 0 runs IMAGE", or one line for both pools
  for (int i : {0, 1}) {
    const PoolSpec& pool = job.pools[i];
    if (!pool.present || pool.image_uri.empty()) continue;
    std::string runs = "pool " + std::to_string(i) + " runs " + pool.image_uri;
    if (isVertexReductionServerImage(pool.image_uri)) {
      rule.pass = false;
      rule.detail = runs +
                    ", Vertex AI's Reduction Server image: pools 0 and 1 run the training "
                    "image (the framework, NCCL with Tally's plugin, and `tally launch`)";
      return rule;
    }
    for (const std::string& reducer_image : reducer_images) {
      if (reducer_image.empty() || pool.image_uri != reducer_image) continue;
      rule.pass = false;
      rule.detail = runs +
                    ", pool 2's image: the Tally reducer image has no training framework; "
                    "give pools 0 and 1 the training image";
      return rule;
    }
    if (i == 1 && images.size() == 1 && job.pools[0].image_uri == pool.image_uri) {
      images[0] = "pools 0 and 1 run " + pool.image_uri;
    } else {
      images.push_back(runs);
    }
  }
  for (const auto& text : images) rule.detail += (rule.detail.empty() ? "" : ", ") + text;
  if (images.empty()) {
    rule.detail = "pools 0 and 1 give no image (the planned job says " +
                  std::string(kTrainingImagePlaceholder) + ")";
  }
  return rule;
}

Rule reducersCpuOnlyRule(const PoolSpec& reducers) {
  Rule rule{"reducers-cpu-only", true, ""};
  if (!reducers.present) {
    rule.detail = "pool 2 is empty, so no reducer asks for accelerators";
  } else if (reducers.hasAccelerators()) {
    rule.pass = false;
    rule.detail = "pool 2 asks for " + std::to_string(reducers.accelerator_count) + " x " +
                  (reducers.accelerator_type.empty() ? "(no type)" : reducers.accelerator_type) +
                  "; reducers are CPU-only: drop acceleratorType and acceleratorCount";
  } else {
    rule.detail = "pool 2 has no accelerators";
  }
  return rule;
}

Rule reducerBandwidthRule(const PoolSpec& reducers, double worker_gbps, double reducer_pool_gbps,
                          int64_t hosts, int64_t recommended, const std::string& reducer_machine) {
  Rule rule{"reducer-bandwidth", false, ""};
  std::string need = gbpsText(worker_gbps) + " Gbps of pools 0 and 1";
  std::string use = std::to_string(recommended) + " x " + reducer_machine;
  if (hosts < 2) {
    rule.pass = true;
    rule.detail = "not applicable: no CollNet traffic to carry (see collnet-hosts)";
  } else if (!reducers.present) {
    rule.detail = "pool 2 is empty: no reducer egress for the " + need + "; add " + use;
  } else {
    std::string have = std::to_string(reducers.replica_count) + " x " + reducers.machine_type +
                       " = " + gbpsText(reducer_pool_gbps) + " Gbps";
    // The small slack keeps an exact match (25 x 32 = 800) a pass when the sums round.
    rule.pass = reducer_pool_gbps + 1e-9 >= worker_gbps;
    rule.detail = rule.pass ? "reducer egress " + have + " >= " + need
                            : "reducer egress " + have + " < " + need + "; use " + use;
  }
  return rule;
}

Rule collnetHostsRule(int64_t hosts, int64_t recommended, const std::string& reducer_machine) {
  Rule rule{"collnet-hosts", hosts >= 2, ""};
  std::string count = "pools 0 and 1 hold " + hostsText(hosts);
  if (hosts < 2) {
    rule.detail = count +
                  ": CollNet needs two or more hosts (within one host NCCL reduces without the "
                  "network, so reducers would sit idle); add hosts in pool 1, or run without a "
                  "reducer pool";
  } else if (hosts == 2) {
    // Each host of a ring sends and receives 2(n-1)/n of the bucket, which is 1 at n = 2: what it
    // sends to and receives from the reducers.
    MachineShape shape;
    int vcpus = parseMachineType(reducer_machine, &shape).isOk() ? shape.vcpus : 0;
    rule.warn = true;
    rule.detail = count +
                  ": a ring then moves 2(n-1)/n = 1 bucket each way per host, the same as "
                  "through reducers, so reducers cannot speed the all-reduce up and the reducer "
                  "pool, " +
                  std::to_string(recommended) + " x " + reducer_machine + " (" +
                  std::to_string(recommended * vcpus) +
                  " vCPUs), is paid for with no gain; run without pool 2, or add hosts in pool 1";
  } else {
    rule.detail = count + " (CollNet needs two or more)";
  }
  return rule;
}

// Reducers sum on the CPU; Vertex AI's reduction-server guidance asks for at least 16 vCPUs each.
Rule reducerVcpusRule(const std::vector<std::string>& machines) {
  Rule rule{"reducer-vcpus", true, ""};
  if (machines.empty()) {
    rule.detail = "no reducers planned";
    return rule;
  }
  for (const auto& machine : machines) {
    MachineShape shape;
    if (!parseMachineType(machine, &shape).isOk()) continue;  // makePlan has refused it already
    std::string detail;
    if (shape.gpus > 0) {
      detail = machine + " comes with " + std::to_string(shape.gpus) +
               " GPUs; reducers need a CPU machine with at least " +
               std::to_string(kMinReducerVcpus) + " vCPUs, e.g. " + kDefaultReducerMachine;
    } else if (shape.vcpus < kMinReducerVcpus) {
      detail = machine + " has " + std::to_string(shape.vcpus) +
               " vCPUs; a reducer needs at least " + std::to_string(kMinReducerVcpus) +
               " (Vertex AI's reduction-server guidance), e.g. " + kDefaultReducerMachine;
    }
    if (!detail.empty()) {
      rule.pass = false;
      rule.detail = detail;
      return rule;
    }
    rule.detail += (rule.detail.empty() ? "" : ", ") + machine + " has " +
                   std::to_string(shape.vcpus) + " vCPUs";
  }
  rule.detail += " (at least " + std::to_string(kMinReducerVcpus) + ")";
  return rule;
}

Rule reducerImageRule(const std::string& image) {
  Rule rule{"reducer-image", true, ""};
  if (image.empty()) {
    rule.detail = "pool 2's image is not given (the planned job says " +
                  std::string(kReducerImagePlaceholder) + ")";
  } else if (isVertexReductionServerImage(image)) {
    rule.pass = false;
    rule.detail = "pool 2's image " + image +
                  " is Vertex AI's own Reduction Server, a closed reducer that speaks neither "
                  "Tally's protocol nor has `tally launch`; use the Tally reducer image (built "
                  "from docker/reducer.Dockerfile) with --reducer-image or containerSpec.imageUri";
  } else {
    rule.detail = "pool 2 runs " + image;
  }
  return rule;
}

Rule evaluatorsRule(const PoolSpec& evaluators) {
  Rule rule{"evaluators", true, ""};
  if (!evaluators.present) {
    rule.detail = "pool 3 is empty";
    return rule;
  }
  rule.detail = "pool 3 has replicaCount " + std::to_string(evaluators.replica_count);
  if (evaluators.replica_count > 1) {
    rule.warn = true;
    rule.detail +=
        ": TensorFlow runs one evaluator, so the others repeat its work; set it to 1 (pool 3 "
        "never joins the all-reduce, so Tally is not affected)";
  }
  return rule;
}

}  // namespace tally::plan
