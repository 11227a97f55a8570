// SPDX-License-Identifier: Apache-2.0
// The job's cluster, as Vertex AI (and any scheduler that sets the same variables) describes it.
//
// CLUSTER_SPEC (Vertex AI's own format):
//   {"cluster": {"workerpool0": ["host:port"], "workerpool1": [...], "workerpool2": [...],
//                "workerpool3": [...]},
//    "environment": "cloud",
//    "task": {"type": "workerpool1", "index": 0, "trial": "7"},   // trial may be absent
//    "job": {...CustomJobSpec...}}                                // kept, not required
//
// TF_CONFIG (TensorFlow's format, also set by Vertex AI):
//   {"cluster": {"chief": [...], "worker": [...], "ps": [...]},   // or "master" for "chief"
//    "task": {"type": "worker", "index": 0, "trial": "7", "cloud": "..."},
//    "environment": "cloud", "job": {...}}
// TF_CONFIG's cluster never lists the evaluator; a task of type "evaluator" is pool 3.
//
// Pools: 0 is the primary replica (chief/master), 1 the workers, 2 the reducers (ps), 3 the
// evaluators. Only pools 0 and 1 are CollNet ranks.
//
// Both variables are parsed once, here, from a ParamSource (never getenv); malformed input is an
// error that names the variable, the field and what was expected. Nothing is guessed: a set but
// malformed variable is an error even when the other one would do.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "common/params.h"
#include "common/status.h"

namespace tally {

inline constexpr int kClusterPools = 4;

enum class ClusterRole {
  kPrimary,    // pool 0: CollNet rank 0, PyTorch's master
  kWorker,     // pool 1
  kReducer,    // pool 2: runs tally-reducer
  kEvaluator,  // pool 3: never joins CollNet
};
const char* clusterRoleName(ClusterRole role);  // "primary", "worker", "reducer", "evaluator"

struct ClusterSpec {
  std::string variable;  // "CLUSTER_SPEC" or "TF_CONFIG": where this came from, for messages
  // Addresses ("host:port") of each pool, in replica order. Pools the variable omits are empty.
  std::array<std::vector<std::string>, kClusterPools> pools;
  std::string environment;  // "cloud", or empty when absent
  std::string task_type;    // as written: "workerpool1", "chief", "evaluator", ...
  int pool = 0;             // 0..3, from task_type
  int index = 0;            // replica index within the pool, checked against the pool's size
                            // (except for a TF_CONFIG evaluator, whose pool is not listed)
  std::string trial;        // hyperparameter trial id, empty when absent
  std::string cloud;        // TF_CONFIG task.cloud, empty when absent
  std::string job_json;     // the "job" object re-serialized, empty when absent

  ClusterRole role() const { return static_cast<ClusterRole>(pool); }
  // This replica's own "host:port"; empty when its pool is not listed (TF_CONFIG evaluator).
  std::string ownAddress() const;
  // CollNet / PyTorch ranks: pool 0 is rank 0, pool 1 replica i is rank i + 1. In general pool 0
  // replica i is rank i and pool 1 replica i is rank (size of pool 0) + i, so a TF_CONFIG with
  // workers but no chief makes worker 0 rank 0. collRanks() = size of pool 0 + size of pool 1.
  int collRanks() const;
  // -1 for pools 2 and 3.
  int collRank() const;
};

// Parse one variable's text. On error *out is untouched and the Status (kInvalidUsage) reads
// like "CLUSTER_SPEC: task.index: expected a non-negative integer, got \"one\"". Never throws.
Status parseClusterSpec(const std::string& text, ClusterSpec* out);
Status parseTfConfig(const std::string& text, ClusterSpec* out);

// Both variables of one process. Each is absent when unset or empty.
struct ClusterEnv {
  std::optional<ClusterSpec> cluster_spec;
  std::optional<ClusterSpec> tf_config;

  // Reads CLUSTER_SPEC and TF_CONFIG from `source` and parses those that are set. Fails on the
  // first malformed one; *out is untouched then.
  static Status load(const ParamSource& source, ClusterEnv* out);

  // The spec that describes this replica: CLUSTER_SPEC when set, else TF_CONFIG; null when
  // neither is set.
  const ClusterSpec* primary() const;
};

// Whether `address` is a peer's "host:port" as the cluster variables, TALLY_REDUCERS and
// TALLY_SPARE_REDUCERS write it: a host name or IPv4 address, or an IPv6 address in brackets
// ("[fd00::1]:2222"), and a port of 1 to 65535. kInvalidUsage quoting it otherwise.
Status checkPeerAddress(const std::string& address);

// Where CollNet's reducers come from, in this order: TALLY_REDUCERS; CLUSTER_SPEC's workerpool2;
// TF_CONFIG's ps. The first non-empty source wins.
struct ReducerList {
  std::vector<std::string> addresses;  // "host:port", in the order of the source
  std::string origin;  // "TALLY_REDUCERS", "CLUSTER_SPEC workerpool2", "TF_CONFIG ps", or
                       // "none" when every source is empty
};
ReducerList resolveReducers(const Params& params, const ClusterEnv& env);

}  // namespace tally
