// SPDX-License-Identifier: Apache-2.0
// Parsing a CustomJob spec and planning its reducer pool (rendering is in plan_render.cc).
#include "tools/commands/plan_model.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tools/commands/plan_rules.h"
#include "tools/commands/spec_document.h"
#include "tools/commands/spec_keys.h"

namespace tally::plan {
namespace {

using nlohmann::json;

Status fieldError(const std::string& field, const std::string& expected, const json& got) {
  return Status::invalidUsage(field + ": expected " + expected + ", got " + got.dump());
}

// A non-negative integer written as a JSON number or a decimal string (REST's int64).
Status parseCount(const json& value, const std::string& field, int64_t* out) {
  const char* expected = "a non-negative integer (a number or a decimal string)";
  if (value.is_number_unsigned()) {
    if (value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return fieldError(field, expected, value);
    }
    *out = value.get<int64_t>();
    return Status::ok();
  }
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    int64_t n = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (!text.empty() && ec == std::errc() && end == text.data() + text.size() && n >= 0) {
      *out = n;
      return Status::ok();
    }
  }
  return fieldError(field, expected, value);
}

Status parseString(const json& object, const char* key, const std::string& field,
                   std::string* out) {
  auto it = object.find(key);
  if (it == object.end()) return Status::ok();
  if (!it->is_string()) return fieldError(field + "." + key, "a string", *it);
  *out = it->get<std::string>();
  return Status::ok();
}

Status parseStringList(const json& object, const char* key, const std::string& field,
                       std::vector<std::string>* out) {
  auto it = object.find(key);
  if (it == object.end()) return Status::ok();
  std::string where = field + "." + key;
  if (!it->is_array()) return fieldError(where, "an array of strings", *it);
  std::vector<std::string> items;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& item = (*it)[i];
    if (!item.is_string()) {
      return fieldError(where + "[" + std::to_string(i) + "]", "a string", item);
    }
    items.push_back(item.get<std::string>());
  }
  *out = std::move(items);
  return Status::ok();
}

Status parsePool(const json& entry, const std::string& field, PoolSpec* out) {
  if (!entry.is_object()) return fieldError(field, "an object ({} skips the pool)", entry);
  PoolSpec pool;
  if (entry.empty()) {
    *out = pool;
    return Status::ok();
  }
  TALLY_RETURN_IF_ERROR(checkKnownKeys(entry, field, SpecObject::kWorkerPoolSpec));
  pool.present = true;
  auto machine = entry.find("machineSpec");
  if (machine == entry.end()) {
    return Status::invalidUsage(field + ".machineSpec: missing (an empty {} skips the pool)");
  }
  std::string machine_field = field + ".machineSpec";
  if (!machine->is_object()) return fieldError(machine_field, "an object", *machine);
  TALLY_RETURN_IF_ERROR(checkKnownKeys(*machine, machine_field, SpecObject::kMachineSpec));
  TALLY_RETURN_IF_ERROR(parseString(*machine, "machineType", machine_field, &pool.machine_type));
  if (pool.machine_type.empty()) {
    return Status::invalidUsage(machine_field + ".machineType: missing");
  }
  MachineShape shape;
  if (Status s = parseMachineType(pool.machine_type, &shape); !s.isOk()) {
    return Status::invalidUsage(machine_field + ".machineType: " + s.message());
  }
  TALLY_RETURN_IF_ERROR(
      parseString(*machine, "acceleratorType", machine_field, &pool.accelerator_type));
  if (pool.accelerator_type == "ACCELERATOR_TYPE_UNSPECIFIED") pool.accelerator_type.clear();
  if (Status s = pool.accelerator_type.empty() ? Status::ok()
                                               : checkAcceleratorType(pool.accelerator_type);
      !s.isOk()) {
    return Status::invalidUsage(machine_field + ".acceleratorType: " + s.message());
  }
  if (auto count = machine->find("acceleratorCount"); count != machine->end()) {
    TALLY_RETURN_IF_ERROR(
        parseCount(*count, machine_field + ".acceleratorCount", &pool.accelerator_count));
  }
  pool.replica_count = 1;
  if (auto replicas = entry.find("replicaCount"); replicas != entry.end()) {
    TALLY_RETURN_IF_ERROR(parseCount(*replicas, field + ".replicaCount", &pool.replica_count));
  }
  if (auto container = entry.find("containerSpec"); container != entry.end()) {
    std::string container_field = field + ".containerSpec";
    if (!container->is_object()) return fieldError(container_field, "an object", *container);
    TALLY_RETURN_IF_ERROR(checkKnownKeys(*container, container_field, SpecObject::kContainerSpec));
    TALLY_RETURN_IF_ERROR(parseString(*container, "imageUri", container_field, &pool.image_uri));
    TALLY_RETURN_IF_ERROR(parseStringList(*container, "command", container_field, &pool.command));
    TALLY_RETURN_IF_ERROR(parseStringList(*container, "args", container_field, &pool.args));
  }
  *out = std::move(pool);
  return Status::ok();
}

// "tally launch --dry-run -- python train.py" -> "python train.py"; anything else unchanged.
std::vector<std::string> withoutTallyLaunch(const std::vector<std::string>& words) {
  if (words.size() < 2 || words[1] != "launch") return words;
  const std::string& program = words[0];
  if (program != "tally" && !program.ends_with("/tally")) return words;
  size_t i = 2;
  while (i < words.size() && words[i] != "--" && words[i].starts_with("-")) ++i;
  if (i < words.size() && words[i] == "--") ++i;
  return {words.begin() + static_cast<std::ptrdiff_t>(i), words.end()};
}

std::vector<std::string> trainingCommandOf(const PoolSpec& pool) {
  std::vector<std::string> words = pool.command;
  words.insert(words.end(), pool.args.begin(), pool.args.end());
  return withoutTallyLaunch(words);
}

bool sameHosts(const PoolSpec& a, const PoolSpec& b) {
  return a.machine_type == b.machine_type && a.accelerator_type == b.accelerator_type &&
         a.accelerator_count == b.accelerator_count && a.image_uri == b.image_uri;
}

std::string joinedWords(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) out += (out.empty() ? "" : " ") + word;
  return out;
}

// The machine the reducer pool is planned on: --reducer-machine, else pool 2's, else the default,
// skipping one that fails reducer-vcpus (reducerVcpusRule still reports it) so that the planned
// pool passes every rule. A --reducer-machine that is not a known shape, and the chosen machine's
// unknown egress, are errors as for any machine.
Status chooseReducerMachine(const std::string& asked, const PoolSpec& reducers,
                            const EgressOptions& egress_options, std::string* machine,
                            Egress* egress) {
  if (MachineShape shape; !asked.empty()) {
    TALLY_RETURN_IF_ERROR(parseMachineType(asked, &shape));
  }
  std::vector<std::string> candidates;
  if (!asked.empty()) candidates.push_back(asked);
  if (reducers.present) candidates.push_back(reducers.machine_type);
  candidates.push_back(kDefaultReducerMachine);
  for (const auto& candidate : candidates) {
    if (!isReducerMachine(candidate)) continue;
    TALLY_RETURN_IF_ERROR(machineEgress(candidate, "", 0, egress_options, egress));
    *machine = candidate;
    return Status::ok();
  }
  return Status::internal("no reducer machine");  // the default always qualifies
}

// Notes on what the planned pool 2 replaces of the pool as given, and why.
void noteReducerPoolChanges(const PoolSpec& given, const PoolSpec& planned,
                            std::vector<std::string>* notes) {
  std::vector<std::string> own = given.command;
  own.insert(own.end(), given.args.begin(), given.args.end());
  // A `tally launch ...` command already starts the reducer; its arguments are the training
  // command, which gcloud gives every pool anyway.
  if (!own.empty() && withoutTallyLaunch(own) == own) {
    notes->push_back("planned job: pool 2's command `" + joinedWords(own) +
                     "` is replaced by `tally launch --`, which starts tally-reducer");
  }
  if (!given.image_uri.empty() && planned.image_uri != given.image_uri &&
      planned.image_uri != kReducerImagePlaceholder) {
    notes->push_back("planned job: pool 2's image " + given.image_uri + " is replaced by " +
                     planned.image_uri + " (--reducer-image)");
  }
  if (given.machine_type != planned.machine_type) {
    std::string why = isReducerMachine(given.machine_type) ? "--reducer-machine" : "reducer-vcpus";
    notes->push_back("planned job: pool 2's machine type " + given.machine_type +
                     " is replaced by " + planned.machine_type + " (" + why + ")");
  }
  if (given.hasAccelerators()) {
    notes->push_back("planned job: pool 2's accelerators are dropped (reducers-cpu-only)");
  }
}

}  // namespace

const char* poolRole(int pool) {
  static const char* const kRoles[kPools] = {"primary", "workers", "reducers", "evaluators"};
  return pool >= 0 && pool < kPools ? kRoles[pool] : "unknown";
}

bool Plan::ok() const {
  for (const auto& rule : rules) {
    if (!rule.pass) return false;
  }
  return true;
}

Status parseJobSpec(const std::string& text, JobSpec* out) {
  json root;
  TALLY_RETURN_IF_ERROR(parseSpecDocument(text, &root));
  if (!root.is_object()) {
    return fieldError("(top level)", "an object (a JSON or YAML CustomJob or CustomJobSpec)", root);
  }
  JobSpec job;
  const json* spec = &root;
  std::string prefix;
  if (auto job_spec = root.find("jobSpec"); job_spec != root.end()) {
    if (!job_spec->is_object()) return fieldError("jobSpec", "an object", *job_spec);
    TALLY_RETURN_IF_ERROR(checkKnownKeys(root, "", SpecObject::kCustomJob));
    TALLY_RETURN_IF_ERROR(parseString(root, "displayName", "(top level)", &job.display_name));
    spec = &*job_spec;
    prefix = "jobSpec.";
  }
  TALLY_RETURN_IF_ERROR(
      checkKnownKeys(*spec, prefix.empty() ? "" : "jobSpec", SpecObject::kCustomJobSpec));
  auto pools = spec->find("workerPoolSpecs");
  if (pools == spec->end()) {
    return Status::invalidUsage(prefix + "workerPoolSpecs: missing (expected a CustomJobSpec " +
                                "{\"workerPoolSpecs\": [...]} or a CustomJob with jobSpec)");
  }
  std::string field = prefix + "workerPoolSpecs";
  if (!pools->is_array() || pools->empty() || pools->size() > kPools) {
    return fieldError(field, "an array of 1 to 4 pools", *pools);
  }
  for (size_t i = 0; i < pools->size(); ++i) {
    TALLY_RETURN_IF_ERROR(
        parsePool((*pools)[i], field + "[" + std::to_string(i) + "]", &job.pools[i]));
  }
  *out = std::move(job);
  return Status::ok();
}

Status readJobSpecFile(const std::string& path, JobSpec* out) {
  // stat(2) first so that the reason reaches the message ("No such file or directory",
  // "Permission denied"); a directory opens fine as a stream and would read as bad JSON.
  auto unreadable = [&path](int err) {
    return Status::invalidUsage(path + ": cannot read the file: " + std::strerror(err));
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return unreadable(errno);
  if (S_ISDIR(st.st_mode)) return unreadable(EISDIR);
  errno = 0;
  std::ifstream file(path, std::ios::binary);
  if (!file) return unreadable(errno != 0 ? errno : EIO);
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) return unreadable(EIO);
  Status s = parseJobSpec(text.str(), out);
  if (!s.isOk()) return Status::invalidUsage(path + ": " + s.message());
  return Status::ok();
}

Status makePlan(const JobSpec& job, const PlanOptions& options, Plan* out) {
  Plan plan;
  plan.input = job;
  plan.region = options.region.empty() ? kDefaultRegion : options.region;
  plan.tier1 = options.tier1;
  plan.display_name = !options.display_name.empty() ? options.display_name
                      : !job.display_name.empty()   ? job.display_name
                                                    : kDefaultDisplayName;
  const PoolSpec& primary = job.pools[0];
  const PoolSpec& reducers = job.pools[2];

  EgressOptions egress_options{options.bandwidth, options.tier1};
  // Egress of pools 0..2 as given.
  for (int i = 0; i < 3; ++i) {
    const PoolSpec& pool = job.pools[i];
    if (!pool.present) continue;
    Egress& egress = plan.egress[i].per_replica;
    Status s = machineEgress(pool.machine_type, pool.accelerator_type, pool.accelerator_count,
                             egress_options, &egress);
    // Reducers with GPUs already fail reducers-cpu-only; count the machine without them rather
    // than stop at a GPU combination the table does not know.
    if (!s.isOk() && i == 2 && pool.hasAccelerators()) {
      s = machineEgress(pool.machine_type, "", 0, egress_options, &egress);
      if (s.isOk()) egress.source += ", counted without pool 2's accelerators";
    }
    TALLY_RETURN_IF_ERROR(s);
    plan.egress[i].total =
        plan.egress[i].per_replica.gbps * static_cast<double>(pool.replica_count);
  }
  // Pool 3 never joins the all-reduce, but its machine type must still be one that exists.
  if (MachineShape shape; job.pools[3].present) {
    TALLY_RETURN_IF_ERROR(parseMachineType(job.pools[3].machine_type, &shape));
  }
  plan.worker_gbps = plan.egress[0].total + plan.egress[1].total;
  plan.reducer_pool_gbps = plan.egress[2].total;

  // The recommendation, on a machine that passes reducer-vcpus (CPU only: no accelerators).
  TALLY_RETURN_IF_ERROR(chooseReducerMachine(options.reducer_machine, reducers, egress_options,
                                             &plan.reducer_machine, &plan.reducer_machine_egress));
  // The small slack keeps 800 / 32 at 25 when the division is not exact in binary.
  // One host has no CollNet traffic: no reducers to recommend (collnet-hosts fails).
  int64_t hosts = collnetHosts(job);
  double ratio = plan.worker_gbps / plan.reducer_machine_egress.gbps;
  plan.recommended_reducers =
      hosts < 2 ? 0 : std::max<int64_t>(1, static_cast<int64_t>(std::ceil(ratio - 1e-9)));

  // The rules, on the job as given (and the reducer machine asked for).
  std::vector<std::string> reducer_machines;
  auto addMachine = [&reducer_machines](const std::string& machine) {
    if (std::find(reducer_machines.begin(), reducer_machines.end(), machine) ==
        reducer_machines.end()) {
      reducer_machines.push_back(machine);
    }
  };
  if (reducers.present) addMachine(reducers.machine_type);
  if (!options.reducer_machine.empty()) addMachine(options.reducer_machine);
  if (plan.recommended_reducers > 0) addMachine(plan.reducer_machine);
  std::string reducer_image = !options.reducer_image.empty() ? options.reducer_image
                              : reducers.present             ? reducers.image_uri
                                                             : "";
  plan.rules = {
      primaryPoolRule(primary),
      workerGpusRule(job),
      workerImageRule(job, {reducers.present ? reducers.image_uri : "", reducer_image}),
      reducersCpuOnlyRule(reducers),
      reducerBandwidthRule(reducers, plan.worker_gbps, plan.reducer_pool_gbps, hosts,
                           plan.recommended_reducers, plan.reducer_machine),
      collnetHostsRule(hosts, plan.recommended_reducers, plan.reducer_machine),
      reducerVcpusRule(reducer_machines),
      reducerImageRule(reducer_image),
      evaluatorsRule(job.pools[3]),
  };

  // The planned job.
  JobSpec planned = job;
  planned.display_name = plan.display_name;
  if (primary.present && primary.replica_count > 1 &&
      (!job.pools[1].present || sameHosts(primary, job.pools[1]))) {
    int64_t moved = primary.replica_count - 1;
    if (!planned.pools[1].present) {
      planned.pools[1] = primary;
      planned.pools[1].replica_count = 0;
    }
    planned.pools[1].replica_count += moved;
    planned.pools[0].replica_count = 1;
    plan.notes.push_back("planned job: " + std::to_string(moved) +
                         " of pool 0's replicas moved to pool 1");
  }
  PoolSpec& planned_reducers = planned.pools[2];
  if (plan.recommended_reducers == 0) {
    planned_reducers = PoolSpec{};
    if (reducers.present) plan.notes.push_back("planned job: no reducer pool for a single host");
  } else {
    planned_reducers.present = true;
    planned_reducers.machine_type = plan.reducer_machine;
    planned_reducers.accelerator_type.clear();
    planned_reducers.accelerator_count = 0;
    planned_reducers.replica_count = plan.recommended_reducers;
    planned_reducers.args.clear();
    planned_reducers.command = {"tally", "launch", "--"};
    planned_reducers.image_uri = reducer_image;
    if (isVertexReductionServerImage(reducer_image)) {
      planned_reducers.image_uri = kReducerImagePlaceholder;
      plan.notes.push_back(std::string("pool 2's image is ") + kReducerImagePlaceholder +
                           " instead of Vertex AI's Reduction Server (see reducer-image): pass "
                           "--reducer-image with the Tally reducer image");
    } else if (planned_reducers.image_uri.empty()) {
      planned_reducers.image_uri = kReducerImagePlaceholder;
      plan.notes.push_back(std::string("pool 2's image is ") + kReducerImagePlaceholder +
                           ": pass --reducer-image with the Tally reducer image");
    }
    if (reducers.present && reducers.replica_count != plan.recommended_reducers) {
      plan.notes.push_back("planned job: pool 2 has " + std::to_string(plan.recommended_reducers) +
                           " replicas instead of " + std::to_string(reducers.replica_count));
    }
    if (reducers.present) noteReducerPoolChanges(reducers, planned_reducers, &plan.notes);
    if (!options.reducer_machine.empty() && options.reducer_machine != plan.reducer_machine) {
      plan.notes.push_back("planned job: --reducer-machine " + options.reducer_machine +
                           " fails reducer-vcpus; the reducers are planned on " +
                           plan.reducer_machine);
    }
  }

  plan.train_command =
      !options.train_command.empty() ? options.train_command : trainingCommandOf(primary);
  if (plan.train_command.empty()) {
    plan.train_command = {kTrainingCommandPlaceholder};
    plan.notes.push_back(std::string("the training command is ") + kTrainingCommandPlaceholder +
                         ": give it after `--` or in pool 0's containerSpec command/args");
  }
  bool pool_commands_differ = false;
  for (int i : {1, 3}) {
    const PoolSpec& pool = job.pools[i];
    if (pool.present && options.train_command.empty() && !trainingCommandOf(pool).empty() &&
        trainingCommandOf(pool) != trainingCommandOf(primary)) {
      pool_commands_differ = true;
    }
  }
  if (pool_commands_differ) {
    plan.notes.push_back(
        "gcloud's --command and --args apply to every pool, but pools 0, 1 and "
        "3 run different commands: use the JSON's customJobSpec with --config");
  }
  bool image_missing = false;
  for (int i : {0, 1, 3}) {
    PoolSpec& pool = planned.pools[i];
    if (!pool.present) continue;
    std::vector<std::string> own = trainingCommandOf(pool);
    if (own.empty() || !options.train_command.empty()) own = plan.train_command;
    pool.command = {"tally", "launch", "--"};
    pool.args = own;
    if (pool.image_uri.empty()) {
      pool.image_uri = kTrainingImagePlaceholder;
      image_missing = true;
    }
  }
  if (image_missing) {
    plan.notes.push_back(std::string("the training image is ") + kTrainingImagePlaceholder +
                         ": pass --image or set containerSpec.imageUri");
  }
  plan.planned = planned;

  if (planned.pools[0].present && planned.pools[0].replica_count == 1) {
    plan.gcloud = gcloudArgv(plan);
  } else {
    plan.notes.push_back(
        "no gcloud command: pool 0 must hold exactly one replica (extra ones "
        "move to pool 1 only when its hosts and image are the same)");
  }
  *out = std::move(plan);
  return Status::ok();
}

}  // namespace tally::plan
