// SPDX-License-Identifier: Apache-2.0
#include "common/cluster.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/strings.h"

namespace tally {
namespace {

using Json = nlohmann::json;

// Longest rendering of an offending value inside an error message.
constexpr size_t kMaxShown = 60;

// A value as it appears in the input, for "got ..." in messages; never throws on bad UTF-8.
std::string shown(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown) + "...";
  return text;
}

// "[json.exception.parse_error.101] parse error at line 1..." -> "parse error at line 1...".
// The library quotes the input it stopped at; bytes that are not printable ASCII become '?' so a
// log line never carries broken UTF-8 or control characters.
std::string withoutExceptionTag(const char* what) {
  std::string text(what);
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find("] ");
    if (close != std::string::npos) text = text.substr(close + 2);
  }
  for (char& c : text) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return text;
}

bool isHostChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

bool isIpv6Char(char c) {
  // Hex digits, separators, an embedded IPv4 tail and a "%zone" suffix.
  return std::isalnum(static_cast<unsigned char>(c)) || c == ':' || c == '.' || c == '%' ||
         c == '-' || c == '_';
}

// One variable's parse: every message starts with the variable's name and the field's path.
class Reader {
 public:
  explicit Reader(const char* variable) : variable_(variable) {}

  Status error(const std::string& path, const std::string& what) const {
    return Status::invalidUsage(std::string(variable_) + ": " + path + ": " + what);
  }
  Status expected(const std::string& path, const std::string& what, const Json& got) const {
    return error(path, "expected " + what + ", got " + shown(got));
  }
  Status missing(const std::string& path, const std::string& what) const {
    return error(path, "missing, expected " + what);
  }

  Status parseTop(const std::string& text, Json* out) const {
    Json doc;
    try {
      doc = Json::parse(text);
    } catch (const Json::parse_error& e) {
      return Status::invalidUsage(std::string(variable_) +
                                  ": not JSON: " + withoutExceptionTag(e.what()));
    }
    if (!doc.is_object()) {
      return Status::invalidUsage(std::string(variable_) + ": expected a JSON object, got " +
                                  shown(doc));
    }
    *out = std::move(doc);
    return Status::ok();
  }

  // Copies an optional string member; absent leaves *out alone.
  Status optionalString(const Json& object, const std::string& parent, const char* key,
                        std::string* out) const {
    auto it = object.find(key);
    if (it == object.end()) return Status::ok();
    if (!it->is_string()) return expected(parent + key, "a string", *it);
    *out = it->get<std::string>();
    return Status::ok();
  }

  Status addressList(const Json& value, const std::string& path,
                     std::vector<std::string>* out) const {
    if (!value.is_array()) return expected(path, "an array of \"host:port\" strings", value);
    std::vector<std::string> addresses;
    for (size_t i = 0; i < value.size(); ++i) {
      const Json& item = value[i];
      std::string item_path = path + "[" + std::to_string(i) + "]";
      if (!item.is_string() || !checkPeerAddress(item.get<std::string>()).isOk()) {
        return expected(item_path, "\"host:port\" with port 1 to 65535", item);
      }
      addresses.push_back(item.get<std::string>());
    }
    *out = std::move(addresses);
    return Status::ok();
  }

  // The "environment" string and the "job" object, shared by both formats.
  Status common(const Json& doc, ClusterSpec* spec) const {
    TALLY_RETURN_IF_ERROR(optionalString(doc, "", "environment", &spec->environment));
    auto job = doc.find("job");
    if (job != doc.end()) {
      if (!job->is_object()) return expected("job", "an object", *job);
      spec->job_json = job->dump(-1, ' ', false, Json::error_handler_t::replace);
    }
    return Status::ok();
  }

  // task.index: present, an integer, not negative. The range is checked by the caller.
  Status taskIndex(const Json& task, int* out) const {
    auto it = task.find("index");
    if (it == task.end()) return missing("task.index", "a non-negative integer");
    bool negative = it->is_number_integer() && !it->is_number_unsigned() && it->get<int64_t>() < 0;
    if (!it->is_number_integer() || negative) {
      return expected("task.index", "a non-negative integer", *it);
    }
    // Any index this large is out of range of every pool; clamp so the range check reports it.
    uint64_t value = it->get<uint64_t>();
    *out = value > static_cast<uint64_t>(INT32_MAX) ? INT32_MAX : static_cast<int>(value);
    return Status::ok();
  }

  Status indexInRange(const ClusterSpec& spec, const std::string& pool_path) const {
    size_t size = spec.pools[static_cast<size_t>(spec.pool)].size();
    if (static_cast<size_t>(spec.index) < size) return Status::ok();
    return error("task.index", std::to_string(spec.index) + " is out of range: " + pool_path +
                                   (size == 0 ? " is empty or absent"
                                              : " has " + std::to_string(size) +
                                                    (size == 1 ? " address" : " addresses")));
  }

  Status objectMember(const Json& doc, const char* key, const Json** out) const {
    auto it = doc.find(key);
    if (it == doc.end()) return missing(key, "an object");
    if (!it->is_object()) return expected(key, "an object", *it);
    *out = &*it;
    return Status::ok();
  }

  Status taskType(const Json& task, std::string* out) const {
    auto it = task.find("type");
    if (it == task.end()) return missing("task.type", "a string");
    if (!it->is_string()) return expected("task.type", "a string", *it);
    *out = it->get<std::string>();
    return Status::ok();
  }

 private:
  const char* variable_;
};

const char* const kWorkerPools[kClusterPools] = {"workerpool0", "workerpool1", "workerpool2",
                                                 "workerpool3"};

Status parseClusterSpecJson(const std::string& text, ClusterSpec* out) {
  const Reader r("CLUSTER_SPEC");
  Json doc;
  TALLY_RETURN_IF_ERROR(r.parseTop(text, &doc));
  ClusterSpec spec;
  spec.variable = "CLUSTER_SPEC";

  const Json* cluster = nullptr;
  TALLY_RETURN_IF_ERROR(r.objectMember(doc, "cluster", &cluster));
  for (const auto& [key, value] : cluster->items()) {
    int pool = -1;
    for (int p = 0; p < kClusterPools; ++p) {
      if (key == kWorkerPools[p]) pool = p;
    }
    if (pool < 0) {
      return r.error("cluster." + key,
                     "unknown pool, expected workerpool0, workerpool1, workerpool2 or workerpool3");
    }
    TALLY_RETURN_IF_ERROR(
        r.addressList(value, "cluster." + key, &spec.pools[static_cast<size_t>(pool)]));
  }
  if (spec.pools[0].empty()) {
    // Vertex AI requires the primary pool; without it there is no rank 0.
    return r.error("cluster.workerpool0",
                   cluster->contains("workerpool0")
                       ? "empty, expected the primary replica's \"host:port\""
                       : "missing, expected the primary replica's \"host:port\"");
  }

  const Json* task = nullptr;
  TALLY_RETURN_IF_ERROR(r.objectMember(doc, "task", &task));
  TALLY_RETURN_IF_ERROR(r.taskType(*task, &spec.task_type));
  spec.pool = -1;
  for (int p = 0; p < kClusterPools; ++p) {
    if (spec.task_type == kWorkerPools[p]) spec.pool = p;
  }
  if (spec.pool < 0) {
    return r.expected("task.type", "workerpool0, workerpool1, workerpool2 or workerpool3",
                      task->at("type"));
  }
  TALLY_RETURN_IF_ERROR(r.taskIndex(*task, &spec.index));
  TALLY_RETURN_IF_ERROR(r.indexInRange(spec, std::string("cluster.") + kWorkerPools[spec.pool]));
  TALLY_RETURN_IF_ERROR(r.optionalString(*task, "task.", "trial", &spec.trial));
  TALLY_RETURN_IF_ERROR(r.common(doc, &spec));
  *out = std::move(spec);
  return Status::ok();
}

Status parseTfConfigJson(const std::string& text, ClusterSpec* out) {
  const Reader r("TF_CONFIG");
  Json doc;
  TALLY_RETURN_IF_ERROR(r.parseTop(text, &doc));
  ClusterSpec spec;
  spec.variable = "TF_CONFIG";

  const Json* cluster = nullptr;
  TALLY_RETURN_IF_ERROR(r.objectMember(doc, "cluster", &cluster));
  if (cluster->contains("chief") && cluster->contains("master")) {
    return r.error("cluster.master", "both chief and master are set, expected one of them");
  }
  for (const auto& [key, value] : cluster->items()) {
    int pool = -1;
    if (key == "chief" || key == "master") pool = 0;
    if (key == "worker") pool = 1;
    if (key == "ps") pool = 2;
    if (key == "evaluator") {
      return r.error("cluster.evaluator",
                     "not expected: TF_CONFIG's cluster never lists the evaluator");
    }
    if (pool < 0) {
      return r.error("cluster." + key, "unknown pool, expected chief, master, worker or ps");
    }
    TALLY_RETURN_IF_ERROR(
        r.addressList(value, "cluster." + key, &spec.pools[static_cast<size_t>(pool)]));
  }
  if (spec.pools[0].empty() && spec.pools[1].empty()) {
    return r.error("cluster", "expected a non-empty chief, master or worker list");
  }

  const Json* task = nullptr;
  TALLY_RETURN_IF_ERROR(r.objectMember(doc, "task", &task));
  TALLY_RETURN_IF_ERROR(r.taskType(*task, &spec.task_type));
  const std::string& type = spec.task_type;
  if (type == "chief" || type == "master") {
    spec.pool = 0;
  } else if (type == "worker") {
    spec.pool = 1;
  } else if (type == "ps") {
    spec.pool = 2;
  } else if (type == "evaluator") {
    spec.pool = 3;
  } else {
    return r.expected("task.type", "chief, master, worker, ps or evaluator", task->at("type"));
  }
  TALLY_RETURN_IF_ERROR(r.taskIndex(*task, &spec.index));
  if (spec.pool != 3) {
    // A chief task reads the chief or master list, whichever the cluster has.
    std::string list = spec.pool == 0 ? (cluster->contains("master") ? "master" : "chief")
                                      : (spec.pool == 1 ? "worker" : "ps");
    TALLY_RETURN_IF_ERROR(r.indexInRange(spec, "cluster." + list));
  }
  TALLY_RETURN_IF_ERROR(r.optionalString(*task, "task.", "trial", &spec.trial));
  TALLY_RETURN_IF_ERROR(r.optionalString(*task, "task.", "cloud", &spec.cloud));
  TALLY_RETURN_IF_ERROR(r.common(doc, &spec));
  *out = std::move(spec);
  return Status::ok();
}

// Runs a parse with nothing escaping: the JSON library reports misuse by throwing.
template <typename Fn>
Status guarded(const char* variable, Fn&& fn) {
  try {
    return fn();
  } catch (const Json::exception& e) {
    return Status::invalidUsage(std::string(variable) + ": " + withoutExceptionTag(e.what()));
  } catch (const std::exception& e) {
    return Status::internal(std::string(variable) + ": " + e.what());
  }
}

}  // namespace

const char* clusterRoleName(ClusterRole role) {
  switch (role) {
    case ClusterRole::kPrimary:
      return "primary";
    case ClusterRole::kWorker:
      return "worker";
    case ClusterRole::kReducer:
      return "reducer";
    case ClusterRole::kEvaluator:
      return "evaluator";
  }
  return "unknown";
}

std::string ClusterSpec::ownAddress() const {
  if (pool < 0 || pool >= kClusterPools) return "";
  const std::vector<std::string>& list = pools[static_cast<size_t>(pool)];
  if (index < 0 || static_cast<size_t>(index) >= list.size()) return "";
  return list[static_cast<size_t>(index)];
}

int ClusterSpec::collRanks() const { return static_cast<int>(pools[0].size() + pools[1].size()); }

int ClusterSpec::collRank() const {
  // Pool 0 comes first; with its single replica this makes worker i rank i + 1. A TF_CONFIG with
  // no chief lists only workers, and worker 0 is then rank 0.
  if (pool == 0) return index;
  if (pool == 1) return static_cast<int>(pools[0].size()) + index;
  return -1;
}

Status parseClusterSpec(const std::string& text, ClusterSpec* out) {
  return guarded("CLUSTER_SPEC", [&] { return parseClusterSpecJson(text, out); });
}

Status parseTfConfig(const std::string& text, ClusterSpec* out) {
  return guarded("TF_CONFIG", [&] { return parseTfConfigJson(text, out); });
}

Status ClusterEnv::load(const ParamSource& source, ClusterEnv* out) {
  ClusterEnv env;
  std::optional<std::string> text = source.get("CLUSTER_SPEC");
  if (text && !text->empty()) {
    ClusterSpec spec;
    TALLY_RETURN_IF_ERROR(parseClusterSpec(*text, &spec));
    env.cluster_spec = std::move(spec);
  }
  text = source.get("TF_CONFIG");
  if (text && !text->empty()) {
    ClusterSpec spec;
    TALLY_RETURN_IF_ERROR(parseTfConfig(*text, &spec));
    env.tf_config = std::move(spec);
  }
  *out = std::move(env);
  return Status::ok();
}

Status checkPeerAddress(const std::string& address) {
  std::string host;
  uint16_t port = 0;
  TALLY_RETURN_IF_ERROR(splitHostPort(address, &host, &port));
  const bool host_ok =
      address.front() == '['
          ? host.find(':') != std::string::npos && std::all_of(host.begin(), host.end(), isIpv6Char)
          : std::all_of(host.begin(), host.end(), isHostChar);
  if (host.empty() || port == 0 || !host_ok) {
    return Status::invalidUsage("bad address \"" + address +
                                "\": expected host:port with a host name or address and a port "
                                "of 1 to 65535");
  }
  return Status::ok();
}

const ClusterSpec* ClusterEnv::primary() const {
  if (cluster_spec) return &*cluster_spec;
  if (tf_config) return &*tf_config;
  return nullptr;
}

ReducerList resolveReducers(const Params& params, const ClusterEnv& env) {
  ReducerList list;
  list.addresses = splitList(params.reducers);
  if (!list.addresses.empty()) {
    list.origin = "TALLY_REDUCERS";
  } else if (env.cluster_spec && !env.cluster_spec->pools[2].empty()) {
    list.addresses = env.cluster_spec->pools[2];
    list.origin = "CLUSTER_SPEC workerpool2";
  } else if (env.tf_config && !env.tf_config->pools[2].empty()) {
    list.addresses = env.tf_config->pools[2];
    list.origin = "TF_CONFIG ps";
  } else {
    list.origin = "none";
  }
  return list;
}

}  // namespace tally
