// SPDX-License-Identifier: Apache-2.0
// Rendering a Plan: the gcloud argv, the shell command, the text report and the JSON document
// (docs/plan.md).
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tools/commands/plan_model.h"

namespace tally::plan {
namespace {

using ordered_json = nlohmann::ordered_json;

std::string gbpsText(double gbps) {
  std::ostringstream out;
  out << gbps;
  return out.str();
}

std::string shellWord(const std::string& word) {
  auto safe = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_./:=,@%+^-").find(c) != std::string_view::npos;
  };
  if (!word.empty() && std::all_of(word.begin(), word.end(), safe)) return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string hostText(const PoolSpec& pool) {
  std::string text = pool.machine_type;
  if (pool.hasAccelerators()) {
    text += " + " + std::to_string(pool.accelerator_count) + " x " +
            (pool.accelerator_type.empty() ? std::string("(no type)") : pool.accelerator_type);
  }
  return text;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) out += (out.empty() ? "" : " ") + shellWord(word);
  return out;
}

ordered_json poolJson(const PoolSpec& pool, int index, const PoolEgress* egress) {
  ordered_json j;
  j["pool"] = index;
  j["role"] = poolRole(index);
  j["present"] = pool.present;
  if (!pool.present) return j;
  j["machineType"] = pool.machine_type;
  j["acceleratorType"] = pool.accelerator_type;
  j["acceleratorCount"] = pool.accelerator_count;
  j["replicaCount"] = pool.replica_count;
  j["imageUri"] = pool.image_uri;
  if (egress != nullptr) {
    j["egressGbpsPerReplica"] = egress->per_replica.gbps;
    j["egressGbpsTotal"] = egress->total;
    j["bandwidthSource"] = egress->per_replica.source;
  }
  return j;
}

// The planned pool in the REST API's own shape, for gcloud --config or the API.
ordered_json restPoolJson(const PoolSpec& pool) {
  ordered_json j = ordered_json::object();
  if (!pool.present) return j;
  j["machineSpec"]["machineType"] = pool.machine_type;
  if (pool.hasAccelerators()) {
    j["machineSpec"]["acceleratorType"] = pool.accelerator_type;
    j["machineSpec"]["acceleratorCount"] = pool.accelerator_count;
  }
  j["replicaCount"] = std::to_string(pool.replica_count);  // int64 is a string in REST
  j["containerSpec"]["imageUri"] = pool.image_uri;
  j["containerSpec"]["command"] = pool.command;
  if (!pool.args.empty()) j["containerSpec"]["args"] = pool.args;
  return j;
}

// gcloud splits list flags on commas; "^D^" before the value picks another delimiter D.
std::string gcloudList(const std::vector<std::string>& items) {
  bool has_comma = false;
  for (const auto& item : items) has_comma |= item.find(',') != std::string::npos;
  char delimiter = ',';
  if (has_comma) {
    for (char candidate : std::string(":;|@#~")) {
      bool used = false;
      for (const auto& item : items) used |= item.find(candidate) != std::string::npos;
      if (!used) {
        delimiter = candidate;
        break;
      }
    }
  }
  std::string out = delimiter == ',' ? "" : std::string("^") + delimiter + "^";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += delimiter;
    out += items[i];
  }
  return out;
}

std::string workerPoolSpecFlag(const PoolSpec& pool) {
  if (!pool.present) return "--worker-pool-spec=";  // gcloud: an empty spec skips the pool
  std::string spec = "--worker-pool-spec=machine-type=" + pool.machine_type +
                     ",replica-count=" + std::to_string(pool.replica_count);
  if (pool.hasAccelerators()) {
    spec += ",accelerator-type=" + pool.accelerator_type +
            ",accelerator-count=" + std::to_string(pool.accelerator_count);
  }
  return spec + ",container-image-uri=" + pool.image_uri;
}

}  // namespace

const char* ruleVerdict(const Rule& rule) {
  return !rule.pass ? "FAIL" : rule.warn ? "WARN" : "PASS";
}

std::string resultText(const Plan& plan) {
  int failed = 0, warned = 0;
  for (const auto& rule : plan.rules) {
    failed += rule.pass ? 0 : 1;
    warned += rule.pass && rule.warn ? 1 : 0;
  }
  std::string text = failed == 0
                         ? std::string("every rule passes")
                         : std::to_string(failed) + (failed == 1 ? " rule fails" : " rules fail");
  if (warned > 0) text += ", " + std::to_string(warned) + (warned == 1 ? " warning" : " warnings");
  return text;
}

std::vector<std::string> gcloudArgv(const Plan& plan) {
  std::vector<std::string> argv = {"gcloud",
                                   "ai",
                                   "custom-jobs",
                                   "create",
                                   "--region=" + plan.region,
                                   "--display-name=" + plan.display_name};
  int last = kPools - 1;
  while (last > 0 && !plan.planned.pools[last].present) --last;
  for (int i = 0; i <= last; ++i) argv.push_back(workerPoolSpecFlag(plan.planned.pools[i]));
  // gcloud gives --command and --args to every pool's container; `tally launch` picks the role.
  argv.push_back("--command=" + gcloudList({"tally", "launch", "--"}));
  argv.push_back("--args=" + gcloudList(plan.train_command));
  return argv;
}

std::string renderShellCommand(const std::vector<std::string>& argv) {
  std::string out;
  for (size_t i = 0; i < argv.size(); ++i) {
    bool flag = argv[i].starts_with("-");
    if (i > 0) out += flag ? " \\\n    " : " ";
    out += shellWord(argv[i]);
  }
  return out + "\n";
}

std::string renderText(const Plan& plan) {
  std::ostringstream out;
  char line[512];
  out << "Pools\n";
  for (int i = 0; i < kPools; ++i) {
    const PoolSpec& pool = plan.input.pools[i];
    if (!pool.present) {
      std::snprintf(line, sizeof(line), "  pool %d  %-10s  (skipped)\n", i, poolRole(i));
    } else if (i == 3) {
      std::snprintf(line, sizeof(line), "  pool %d  %-10s  %3lld x %-40s  (not counted)\n", i,
                    poolRole(i), static_cast<long long>(pool.replica_count),
                    hostText(pool).c_str());
    } else {
      std::snprintf(line, sizeof(line), "  pool %d  %-10s  %3lld x %-40s  %5s Gbps each, %s Gbps\n",
                    i, poolRole(i), static_cast<long long>(pool.replica_count),
                    hostText(pool).c_str(), gbpsText(plan.egress[i].per_replica.gbps).c_str(),
                    gbpsText(plan.egress[i].total).c_str());
    }
    out << line;
  }

  out << "\nRules\n";
  for (const auto& rule : plan.rules) {
    std::snprintf(line, sizeof(line), "  %s  %-17s  ", ruleVerdict(rule), rule.name.c_str());
    out << line << rule.detail << "\n";
  }

  if (plan.recommended_reducers == 0) {
    out << "\nRecommended reducers: none (a single host has no CollNet traffic)\n";
  } else {
    out << "\nRecommended reducers: " << plan.recommended_reducers << " x " << plan.reducer_machine
        << " = ceil(" << gbpsText(plan.worker_gbps) << " Gbps / "
        << gbpsText(plan.reducer_machine_egress.gbps) << " Gbps)\n";
  }

  out << "\nBandwidth sources" << (plan.tier1 ? " (Tier_1 networking)" : "") << "\n";
  std::vector<std::string> sources;
  auto addSource = [&](const std::string& host, const Egress& egress) {
    std::string text = "  " + host + ": " + gbpsText(egress.gbps) + " Gbps (" + egress.source + ")";
    if (std::find(sources.begin(), sources.end(), text) == sources.end()) sources.push_back(text);
  };
  for (int i = 0; i < 3; ++i) {
    if (plan.input.pools[i].present)
      addSource(hostText(plan.input.pools[i]), plan.egress[i].per_replica);
  }
  addSource(plan.reducer_machine, plan.reducer_machine_egress);
  for (const auto& source : sources) out << source << "\n";

  out << "\nFusion settings\n";
  std::snprintf(line, sizeof(line), "  %-36s %s\n",
                ("HOROVOD_FUSION_THRESHOLD=" + std::to_string(kHorovodFusionThreshold)).c_str(),
                "Horovod: fuse gradients into 128 MiB buffers");
  out << line;
  std::snprintf(line, sizeof(line), "  %-36s %s\n",
                ("bucket_cap_mb=" + std::to_string(kDdpBucketCapMb)).c_str(),
                "PyTorch: DistributedDataParallel(model, bucket_cap_mb=64)");
  out << line;

  if (plan.prediction) out << renderPredictionText(*plan.prediction, plan.prediction_sources);

  out << "\nPlanned job (every container runs `tally launch -- " << joined(plan.train_command)
      << "`; in pool 2 that starts the reducer)\n";
  if (!plan.gcloud.empty()) out << renderShellCommand(plan.gcloud);

  if (!plan.notes.empty()) {
    out << "\nNotes\n";
    for (const auto& note : plan.notes) out << "  - " << note << "\n";
  }
  out << "\nResult: " << resultText(plan) << "\n";
  return out.str();
}

std::string renderJson(const Plan& plan) {
  ordered_json j;
  j["displayName"] = plan.display_name;
  j["region"] = plan.region;
  j["pools"] = ordered_json::array();
  for (int i = 0; i < kPools; ++i) {
    j["pools"].push_back(poolJson(plan.input.pools[i], i, i < 3 ? &plan.egress[i] : nullptr));
  }
  j["tier1"] = plan.tier1;
  j["workerEgressGbps"] = plan.worker_gbps;
  j["reducerPoolEgressGbps"] = plan.reducer_pool_gbps;
  j["reducerMachineType"] = plan.reducer_machine;
  j["reducerMachineEgressGbps"] = plan.reducer_machine_egress.gbps;
  j["recommendedReducers"] = plan.recommended_reducers;
  j["rules"] = ordered_json::array();
  for (const auto& rule : plan.rules) {
    j["rules"].push_back({{"name", rule.name},
                          {"pass", rule.pass},
                          {"warn", rule.pass && rule.warn},
                          {"detail", rule.detail}});
  }
  j["ok"] = plan.ok();
  j["fusion"] = {{"HOROVOD_FUSION_THRESHOLD", kHorovodFusionThreshold},
                 {"ddpBucketCapMb", kDdpBucketCapMb}};
  j["prediction"] = plan.prediction ? predictionJson(*plan.prediction, plan.prediction_sources)
                                    : ordered_json(nullptr);
  j["trainCommand"] = plan.train_command;
  if (plan.gcloud.empty()) {
    j["gcloud"] = nullptr;
  } else {
    std::string command = renderShellCommand(plan.gcloud);
    j["gcloud"] = {{"argv", plan.gcloud}, {"command", command}};
  }
  int last = kPools - 1;
  while (last > 0 && !plan.planned.pools[last].present) --last;
  ordered_json pools = ordered_json::array();
  for (int i = 0; i <= last; ++i) pools.push_back(restPoolJson(plan.planned.pools[i]));
  j["customJobSpec"] = {{"workerPoolSpecs", pools}};
  j["notes"] = plan.notes;
  // Flags may carry bytes that are not UTF-8; replace them rather than throw.
  return j.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace tally::plan
