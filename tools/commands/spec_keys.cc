// SPDX-License-Identifier: Apache-2.0
// Vertex AI's CustomJob field names and the unknown-key check (spec_keys.h).
#include "tools/commands/spec_keys.h"

#include <algorithm>
#include <cctype>

namespace tally::plan {
namespace {

std::string folded(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c != '_' && c != '-') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

const char* specObjectName(SpecObject kind) {
  switch (kind) {
    case SpecObject::kCustomJob:
      return "CustomJob";
    case SpecObject::kCustomJobSpec:
      return "CustomJobSpec";
    case SpecObject::kWorkerPoolSpec:
      return "WorkerPoolSpec";
    case SpecObject::kMachineSpec:
      return "MachineSpec";
    case SpecObject::kContainerSpec:
      return "ContainerSpec";
  }
  return "object";
}

const std::vector<std::string>& knownKeys(SpecObject kind) {
  // A CustomJob as written or as returned by `gcloud ai custom-jobs describe` (output-only fields
  // included, so a described job can be planned as it is).
  static const std::vector<std::string> kCustomJob = {
      "name",           "displayName",   "jobSpec",      "state",       "createTime",
      "startTime",      "endTime",       "updateTime",   "error",       "labels",
      "encryptionSpec", "webAccessUris", "satisfiesPzs", "satisfiesPzi"};
  static const std::vector<std::string> kCustomJobSpec = {"persistentResourceId",
                                                          "workerPoolSpecs",
                                                          "scheduling",
                                                          "serviceAccount",
                                                          "network",
                                                          "reservedIpRanges",
                                                          "pscInterfaceConfig",
                                                          "baseOutputDirectory",
                                                          "protectedArtifactLocationId",
                                                          "tensorboard",
                                                          "enableWebAccess",
                                                          "enableDashboardAccess",
                                                          "experiment",
                                                          "experimentRun",
                                                          "models"};
  static const std::vector<std::string> kWorkerPoolSpec = {
      "containerSpec", "pythonPackageSpec", "machineSpec", "replicaCount",
      "nfsMounts",     "lustreMounts",      "diskSpec"};
  static const std::vector<std::string> kMachineSpec = {"machineType",      "acceleratorType",
                                                        "acceleratorCount", "gpuPartitionSize",
                                                        "tpuTopology",      "reservationAffinity"};
  static const std::vector<std::string> kContainerSpec = {"imageUri", "command", "args", "env"};
  switch (kind) {
    case SpecObject::kCustomJob:
      return kCustomJob;
    case SpecObject::kCustomJobSpec:
      return kCustomJobSpec;
    case SpecObject::kWorkerPoolSpec:
      return kWorkerPoolSpec;
    case SpecObject::kMachineSpec:
      return kMachineSpec;
    case SpecObject::kContainerSpec:
      return kContainerSpec;
  }
  return kContainerSpec;
}

std::string nearestKey(const std::string& key, SpecObject kind) {
  std::string want = folded(key);
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const auto& candidate : knownKeys(kind)) {
    size_t d = editDistance(want, folded(candidate));
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  // A third of the name, at least 2: "replicaCont" (1) and "machinespec" (0) are typos,
  // "foo" is not a misspelled "env".
  size_t limit = std::max<size_t>(2, want.size() / 3);
  return best_distance <= limit && best_distance < want.size() ? best : "";
}

Status checkKnownKeys(const nlohmann::json& object, const std::string& field, SpecObject kind) {
  if (!object.is_object()) return Status::ok();
  const auto& known = knownKeys(kind);
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string where = field.empty() ? key : field + "." + key;
    std::string hint = nearestKey(key, kind);
    std::string message = where + ": unknown key in a " + specObjectName(kind);
    if (!hint.empty()) {
      message += " (did you mean " + hint + "?)";
    } else {
      message += " (known keys:";
      for (const auto& k : known) message += " " + k;
      message += ")";
    }
    return Status::invalidUsage(message);
  }
  return Status::ok();
}

}  // namespace tally::plan
