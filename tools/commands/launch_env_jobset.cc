// SPDX-License-Identifier: Apache-2.0
// The cluster of a Kubernetes JobSet written by `tally plan --format jobset` (launch_env.h).
#include <algorithm>
#include <charconv>
#include <utility>

#include "tools/commands/launch_env.h"

namespace tally::commands {
namespace {

// Pods per replicated job; far above any real job, low enough to keep the lists small.
constexpr int kMaxPods = 100000;
// A DNS label, which a pod's host name is.
constexpr size_t kMaxLabel = 63;

bool isDnsLabel(const std::string& text) {
  if (text.empty() || text.size() > kMaxLabel || text.front() == '-' || text.back() == '-') {
    return false;
  }
  for (char c : text) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

// Dot-separated DNS labels.
bool isDnsName(const std::string& text) {
  size_t begin = 0;
  while (true) {
    size_t dot = text.find('.', begin);
    if (!isDnsLabel(text.substr(begin, dot == std::string::npos ? dot : dot - begin))) {
      return false;
    }
    if (dot == std::string::npos) return true;
    begin = dot + 1;
  }
}

Status required(const ParamSource& env, const char* name, std::string* out) {
  std::optional<std::string> value = env.get(name);
  if (!value || value->empty()) {
    return Status::invalidUsage(std::string(name) + " is not set, but " + kJobSetName +
                                " is: the JobSet manifest must set both (tally plan --format "
                                "jobset writes them)");
  }
  *out = *value;
  return Status::ok();
}

}  // namespace

Status parseEnvInt(const std::string& name, const std::string& value, int min, int max, int* out) {
  int n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || n < min ||
      n > max) {
    return Status::invalidUsage(name + ": expected an integer from " + std::to_string(min) +
                                " to " + std::to_string(max) + ", got \"" + value + "\"");
  }
  *out = n;
  return Status::ok();
}

Status jobSetCluster(const ParamSource& env, std::optional<ClusterSpec>* out) {
  std::optional<std::string> set_name = env.get(kJobSetName);
  if (!set_name || set_name->empty()) {
    *out = std::nullopt;
    return Status::ok();
  }
  const std::string& name = *set_name;
  if (!isDnsLabel(name)) {
    return Status::invalidUsage(std::string(kJobSetName) + ": expected a JobSet name (lower-case " +
                                "letters, digits and '-', at most 63), got \"" + name + "\"");
  }
  std::string job;
  TALLY_RETURN_IF_ERROR(required(env, kJobSetReplicatedJob, &job));
  if (job != kJobSetWorkersJob && job != kJobSetReducersJob) {
    return Status::invalidUsage(std::string(kJobSetReplicatedJob) + ": expected " +
                                kJobSetWorkersJob + " or " + kJobSetReducersJob + ", got \"" + job +
                                "\"");
  }
  std::string text;
  int job_index = 0;
  TALLY_RETURN_IF_ERROR(required(env, kJobSetJobIndex, &text));
  TALLY_RETURN_IF_ERROR(parseEnvInt(kJobSetJobIndex, text, 0, kMaxPods, &job_index));
  if (job_index != 0) {
    return Status::invalidUsage(std::string(kJobSetJobIndex) + " is " + text + ": each " +
                                "replicated job must have replicas: 1 (its pods are the hosts)");
  }
  std::optional<std::string> pod_text = env.get(kJobSetPodIndex);
  std::string pod_variable = kJobSetPodIndex;
  if (!pod_text || pod_text->empty()) {
    pod_text = env.get("JOB_COMPLETION_INDEX");
    pod_variable = "JOB_COMPLETION_INDEX";
  }
  if (!pod_text || pod_text->empty()) {
    return Status::invalidUsage(std::string("neither ") + kJobSetPodIndex +
                                " nor JOB_COMPLETION_INDEX is set: the replicated job must be an "
                                "Indexed Job (completionMode: Indexed)");
  }
  int workers = 0;
  int reducers = 0;
  int pod = 0;
  TALLY_RETURN_IF_ERROR(required(env, kJobSetWorkers, &text));
  TALLY_RETURN_IF_ERROR(parseEnvInt(kJobSetWorkers, text, 1, kMaxPods, &workers));
  TALLY_RETURN_IF_ERROR(required(env, kJobSetReducers, &text));
  TALLY_RETURN_IF_ERROR(parseEnvInt(kJobSetReducers, text, 0, kMaxPods, &reducers));
  const bool is_worker = job == kJobSetWorkersJob;
  const int pods = is_worker ? workers : reducers;
  TALLY_RETURN_IF_ERROR(parseEnvInt(pod_variable, *pod_text, 0, kMaxPods, &pod));
  if (pod >= pods) {
    return Status::invalidUsage(pod_variable + " is " + *pod_text + ", out of range: " +
                                (is_worker ? kJobSetWorkers : kJobSetReducers) + " is " +
                                std::to_string(pods));
  }
  std::string subdomain = env.get(kJobSetSubdomain).value_or("");
  if (subdomain.empty()) subdomain = name;
  if (!isDnsName(subdomain)) {
    return Status::invalidUsage(std::string(kJobSetSubdomain) + ": expected a DNS name, got \"" +
                                subdomain + "\"");
  }

  // <jobSet>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>:port
  auto address = [&](const char* replicated, int index) {
    return name + "-" + replicated + "-0-" + std::to_string(index) + "." + subdomain + ":" +
           std::to_string(kSchedulerPort);
  };
  if (name.size() + 1 + std::string(kJobSetReducersJob).size() + 3 +
          std::to_string(std::max(workers, reducers)).size() >
      kMaxLabel) {
    return Status::invalidUsage(std::string(kJobSetName) + " \"" + name + "\" is too long: pod " +
                                "host names (" + name + "-" + kJobSetReducersJob +
                                "-0-N) must fit in 63 characters");
  }

  ClusterSpec spec;
  spec.variable = "JobSet";
  for (int i = 0; i < workers; ++i) {
    spec.pools[i == 0 ? 0 : 1].push_back(address(kJobSetWorkersJob, i));
  }
  for (int i = 0; i < reducers; ++i) spec.pools[2].push_back(address(kJobSetReducersJob, i));
  spec.task_type = job + " pod " + std::to_string(pod);
  if (is_worker) {
    spec.pool = pod == 0 ? 0 : 1;
    spec.index = pod == 0 ? 0 : pod - 1;
  } else {
    spec.pool = 2;
    spec.index = pod;
  }
  *out = std::move(spec);
  return Status::ok();
}

}  // namespace tally::commands
