// SPDX-License-Identifier: Apache-2.0
// The rules `tally plan` checks (plan_model.h lists them), one function each. Each returns one
// Rule: what was found and, when it fails or warns, what to change. Pure functions of the job as
// given; makePlan() calls them in the order the output lists them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/commands/plan_model.h"

namespace tally::plan {

// Hosts that take part in the all-reduce: the replicas of pools 0 and 1.
int64_t collnetHosts(const JobSpec& job);
// Vertex AI's own Reduction Server image (a URI containing "reductionserver").
bool isVertexReductionServerImage(const std::string& image);
// NVIDIA GPUs on the pool's hosts: asked for (acceleratorType NVIDIA_*, acceleratorCount >= 1) or
// brought by the machine type (a2, a3, g2).
bool poolHasGpus(const PoolSpec& pool);
// A machine type a reducer may run on: a known CPU machine type (no GPUs of its own) with at
// least kMinReducerVcpus vCPUs.
bool isReducerMachine(const std::string& machine_type);

Rule primaryPoolRule(const PoolSpec& primary);
// Pools 0 and 1 have NVIDIA GPUs: a reduction server sums GPU workers' gradients for NCCL.
Rule workerGpusRule(const JobSpec& job);
// Pools 0 and 1 run neither Vertex AI's Reduction Server image nor the reducer image
// (`reducer_images`: pool 2's own and the one planned; empty entries are skipped).
Rule workerImageRule(const JobSpec& job, const std::vector<std::string>& reducer_images);
Rule reducersCpuOnlyRule(const PoolSpec& reducers);
// `reducer_machine` and `recommended` are the plan's, for the advice on FAIL.
Rule reducerBandwidthRule(const PoolSpec& reducers, double worker_gbps, double reducer_pool_gbps,
                          int64_t hosts, int64_t recommended, const std::string& reducer_machine);
// FAIL for one host; WARN for two, where 2(n-1)/n = 1 and the reducer pool (`recommended` x
// `reducer_machine`, its cost) cannot help.
Rule collnetHostsRule(int64_t hosts, int64_t recommended, const std::string& reducer_machine);
Rule reducerVcpusRule(const std::vector<std::string>& machines);
Rule reducerImageRule(const std::string& image);
// WARN, never FAIL, for more than one evaluator: pool 3 never touches Tally.
Rule evaluatorsRule(const PoolSpec& evaluators);

}  // namespace tally::plan
