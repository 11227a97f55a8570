// SPDX-License-Identifier: Apache-2.0
// `tally plan`'s logic, free of I/O but for reading the spec file: a Vertex AI CustomJob spec is
// parsed into its four worker pools, the reduction-server rules are checked, the reducer pool is
// sized from the machines' egress bandwidth (machine_types.h), and the planned job is rendered as
// a `gcloud ai custom-jobs create` command, as text and as JSON.
//
// Pools, by position in workerPoolSpecs[]: 0 the primary replica, 1 the workers, 2 the reducers,
// 3 the evaluators. An empty {} entry skips its pool, as in the REST API.
//
// Rules (each one PASS, WARN or FAIL; plan_rules.h has one function per rule):
//   primary-pool       pool 0 is present with replicaCount 1;
//   worker-gpus        the hosts of pools 0 and 1 have NVIDIA GPUs;
//   worker-image       pools 0 and 1 run neither Vertex AI's Reduction Server nor pool 2's image;
//   reducers-cpu-only  pool 2 asks for no accelerators;
//   reducer-bandwidth  pool 2's total egress >= the total egress of pools 0 and 1;
//   collnet-hosts      pools 0 and 1 hold two or more hosts (CollNet has nothing to do on one);
//                      WARN at two, where reducers cannot beat the ring;
//   reducer-vcpus      the reducer machines have at least 16 vCPUs;
//   reducer-image      pool 2's image is not Vertex AI's own Reduction Server (no `tally launch`);
//   evaluators         WARN when pool 3 has more than one replica (TensorFlow runs one).
// Recommended reducers = ceil(egress of pools 0 and 1 / egress of one reducer machine), at
// least 1: five 100 Gbps GPU hosts need 16 n1-highcpu-16 (32 Gbps) reducers, eight need 25.
// A single host gets none (0). The machine is --reducer-machine, else pool 2's, else
// n1-highcpu-16, skipping one that fails reducer-vcpus, so the planned pool passes every rule.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/commands/machine_types.h"
#include "tools/commands/plan_predict.h"

namespace tally::plan {

inline constexpr int kPools = 4;
inline constexpr const char* kDefaultReducerMachine = "n1-highcpu-16";
// Vertex AI's reduction-server guidance: each reducer machine has at least 16 vCPUs.
inline constexpr int kMinReducerVcpus = 16;
inline constexpr const char* kDefaultRegion = "us-central1";
inline constexpr const char* kDefaultDisplayName = "tally-job";
// Placeholders put in the gcloud command where the input did not say (a note says so too).
inline constexpr const char* kTrainingImagePlaceholder = "TRAINING_IMAGE_URI";
inline constexpr const char* kReducerImagePlaceholder = "REDUCER_IMAGE_URI";
inline constexpr const char* kTrainingCommandPlaceholder = "TRAINING_COMMAND";
// Fusion settings that fill a reducer pool's links: Horovod's fusion buffer (128 MiB) and
// PyTorch DistributedDataParallel's bucket_cap_mb.
inline constexpr int64_t kHorovodFusionThreshold = 134217728;
inline constexpr int kDdpBucketCapMb = 64;

const char* poolRole(int pool);  // "primary", "workers", "reducers", "evaluators"

struct PoolSpec {
  bool present = false;  // false: an empty {} entry, or past the end of workerPoolSpecs
  std::string machine_type;
  std::string accelerator_type;  // empty for none (ACCELERATOR_TYPE_UNSPECIFIED reads as none)
  int64_t accelerator_count = 0;
  int64_t replica_count = 0;         // 1 when a present pool leaves it out, as gcloud does
  std::string image_uri;             // containerSpec.imageUri
  std::vector<std::string> command;  // containerSpec.command
  std::vector<std::string> args;     // containerSpec.args

  bool hasAccelerators() const { return accelerator_count > 0 || !accelerator_type.empty(); }
};

struct JobSpec {
  std::string display_name;  // a full CustomJob's displayName; empty otherwise
  std::array<PoolSpec, kPools> pools;
};

// Parses a bare CustomJobSpec ({"workerPoolSpecs": [...]}) or a full CustomJob
// ({"displayName": ..., "jobSpec": {"workerPoolSpecs": [...]}}), written in JSON (comments
// allowed) or YAML (spec_document.h). replicaCount and acceleratorCount may be numbers or decimal
// strings (the REST API writes int64 as a string). A key Vertex AI does not define is an error
// naming the nearest known one (spec_keys.h), and so are a machine type that is not a known shape
// and an accelerator type Vertex AI does not have (machine_types.h).
// On error (kInvalidUsage) *out is untouched and the message names the field, e.g.
// "jobSpec.workerPoolSpecs[1].replicaCount: expected a non-negative integer, got \"two\"".
Status parseJobSpec(const std::string& text, JobSpec* out);
// Reads `path` and parses it; an unreadable file is kInvalidUsage naming the path and the
// system's reason ("path: cannot read the file: Is a directory").
Status readJobSpecFile(const std::string& path, JobSpec* out);

struct PlanOptions {
  std::string region = kDefaultRegion;
  std::string display_name;     // empty: the spec's displayName, else kDefaultDisplayName
  std::string reducer_machine;  // empty: pool 2's machine type, else kDefaultReducerMachine
  std::string reducer_image;    // empty: pool 2's image, else kReducerImagePlaceholder
  // What `tally launch` runs in pools 0, 1 and 3; empty: pool 0's command and args (without a
  // leading `tally launch ... --`).
  std::vector<std::string> train_command;
  BandwidthOverrides bandwidth;
  bool tier1 = false;  // --tier1: the VMs use Tier_1 networking (machine_types.h)
};

struct Rule {
  std::string name;  // "primary-pool", "reducers-cpu-only", ... (the list above)
  bool pass = false;
  std::string detail;  // one sentence: what was found and, on FAIL or WARN, what to change
  bool warn = false;   // passes, but the job wastes something: printed as WARN
};

struct PoolEgress {
  Egress per_replica;  // pools 0..2 when present; pool 3 is never looked up
  double total = 0;    // per_replica.gbps x replicaCount
};

struct Plan {
  JobSpec input;
  std::array<PoolEgress, kPools> egress;
  double worker_gbps = 0;        // pools 0 and 1 together
  double reducer_pool_gbps = 0;  // pool 2 as given (0 when it is skipped)
  std::string reducer_machine;   // the machine the recommendation is for (passes reducer-vcpus)
  Egress reducer_machine_egress;
  int64_t recommended_reducers = 0;  // 0 when pools 0 and 1 hold a single host
  std::vector<Rule> rules;
  std::string region;
  std::string display_name;
  bool tier1 = false;  // egress counted with Tier_1 networking (--tier1)
  // The job to create: the input with pool 2 sized as recommended (CPU only, the reducer image),
  // a pool 0 of N > 1 identical replicas split into 1 + (N - 1) in pool 1, and every container
  // running `tally launch -- <training command>`.
  JobSpec planned;
  std::vector<std::string> train_command;
  std::vector<std::string> gcloud;  // argv of the gcloud command; empty when pool 0 is unusable
  // Things the reader should know: placeholders, and what the planned job changed or replaced.
  std::vector<std::string> notes;
  // The expected all-reduce of one bucket, ring and reducers (plan_predict.h); set by the caller
  // after makePlan, absent for a single host.
  std::optional<Prediction> prediction;
  PredictProvenance prediction_sources;  // where the prediction's inputs came from

  bool ok() const;  // every rule passes
};

// Checks the rules on `job` and plans the job to create. Fails (kInvalidUsage) only when a
// machine's egress is unknown (the message asks for --bandwidth); a failing rule is a result in
// out->rules, not an error. *out is written only on success.
Status makePlan(const JobSpec& job, const PlanOptions& options, Plan* out);

// `gcloud ai custom-jobs create` for plan.planned, plan.region and plan.display_name: one
// --worker-pool-spec per pool up to the last present one (an empty value skips a pool, as gcloud
// reads it), then --command=tally,launch,-- and --args=<training command>, which gcloud gives to
// every pool. makePlan() fills Plan::gcloud with it.
std::vector<std::string> gcloudArgv(const Plan& plan);
// The gcloud argv as one shell command, one flag per line, each word quoted where the shell
// needs it.
std::string renderShellCommand(const std::vector<std::string>& argv);
// What `tally plan` prints: the pools, the rule lines, the recommendation, the fusion settings,
// the gcloud command and the notes.
std::string renderText(const Plan& plan);
// "PASS", "WARN" or "FAIL".
const char* ruleVerdict(const Rule& rule);
// "every rule passes", "2 rules fail", with ", 1 warning" when a rule warns.
std::string resultText(const Plan& plan);
// The same as a JSON document (schema in docs/plan.md), pretty-printed, ending in a newline.
std::string renderJson(const Plan& plan);

}  // namespace tally::plan
