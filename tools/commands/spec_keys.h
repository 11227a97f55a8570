// SPDX-License-Identifier: Apache-2.0
// The field names Vertex AI's REST API defines for the objects of a CustomJob, and the check that
// refuses any other key in a spec, so that a typo (`replicaCont`) is an input error with a hint
// instead of a field silently ignored. Fields `tally plan` does not read (diskSpec, env,
// scheduling...) are known and accepted.
//
// The lists follow the aiplatform v1 reference (CustomJob, CustomJobSpec, WorkerPoolSpec,
// MachineSpec, ContainerSpec), e.g.
// https://cloud.google.com/vertex-ai/docs/reference/rest/v1/CustomJobSpec and the generated client
// types of the same names.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace tally::plan {

enum class SpecObject { kCustomJob, kCustomJobSpec, kWorkerPoolSpec, kMachineSpec, kContainerSpec };

const char* specObjectName(SpecObject kind);                 // "CustomJob", "WorkerPoolSpec", ...
const std::vector<std::string>& knownKeys(SpecObject kind);  // camelCase, as in REST JSON

// The known key nearest to `key` (edit distance, ignoring case and underscores, so
// `replica_count` finds `replicaCount`), or "" when none is close enough to be a likely typo.
std::string nearestKey(const std::string& key, SpecObject kind);

// kInvalidUsage for the first key of `object` that `kind` does not define, e.g.
// "workerPoolSpecs[0].replicaCont: unknown key in a WorkerPoolSpec (did you mean replicaCount?)";
// `field` is the object's own path ("" at the top level). OK for a non-object.
Status checkKnownKeys(const nlohmann::json& object, const std::string& field, SpecObject kind);

}  // namespace tally::plan
