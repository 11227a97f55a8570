// `tally plan --format jobset`: the planned job as a Kubernetes JobSet (plan_formats.h).
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "tools/commands/launch_env.h"
#include "tools/commands/plan_formats.h"

namespace tally::plan {
namespace {

namespace cmd = tally::commands;

// Strings are written double-quoted, so "1", "yes" or "null" stay strings for Kubernetes.
void quoted(YAML::Emitter& out, const std::string& text) { out << YAML::DoubleQuoted << text; }

void fieldEnv(YAML::Emitter& out, const char* name, const std::string& path) {
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << name;
  out << YAML::Key << "valueFrom" << YAML::Value << YAML::BeginMap << YAML::Key << "fieldRef"
      << YAML::Value << YAML::BeginMap << YAML::Key << "fieldPath" << YAML::Value;
  quoted(out, path);
  out << YAML::EndMap << YAML::EndMap << YAML::EndMap;
}

void valueEnv(YAML::Emitter& out, const char* name, const std::string& value) {
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << name << YAML::Key << "value"
      << YAML::Value;
  quoted(out, value);
  out << YAML::EndMap;
}

struct Group {
  const char* name;   // the replicated job
  int64_t pods = 0;   // hosts
  std::string image;  // container image
  int64_t gpus = 0;   // nvidia.com/gpu per pod
};

void replicatedJob(YAML::Emitter& out, const Group& group, const Plan& plan, int64_t workers,
                   int64_t reducers, const std::string& name) {
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << group.name;
  out << YAML::Key << "replicas" << YAML::Value << 1;
  out << YAML::Key << "template" << YAML::Value << YAML::BeginMap << YAML::Key << "spec"
      << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "completionMode" << YAML::Value << "Indexed";
  out << YAML::Key << "completions" << YAML::Value << group.pods;
  out << YAML::Key << "parallelism" << YAML::Value << group.pods;
  out << YAML::Key << "backoffLimit" << YAML::Value << 0;
  out << YAML::Key << "template" << YAML::Value << YAML::BeginMap << YAML::Key << "spec"
      << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "restartPolicy" << YAML::Value << "Never";
  out << YAML::Key << "containers" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << "tally";
  out << YAML::Key << "image" << YAML::Value;
  quoted(out, group.image);
  out << YAML::Key << "command" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const char* word : {"tally", "launch", "--"}) quoted(out, word);
  out << YAML::EndSeq;
  out << YAML::Key << "args" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& word : plan.train_command) quoted(out, word);
  out << YAML::EndSeq;
  out << YAML::Key << "env" << YAML::Value << YAML::BeginSeq;
  fieldEnv(out, cmd::kJobSetName, "metadata.labels['jobset.sigs.k8s.io/jobset-name']");
  fieldEnv(out, cmd::kJobSetReplicatedJob,
           "metadata.labels['jobset.sigs.k8s.io/replicatedjob-name']");
  fieldEnv(out, cmd::kJobSetJobIndex, "metadata.labels['jobset.sigs.k8s.io/job-index']");
  fieldEnv(out, cmd::kJobSetPodIndex,
           "metadata.annotations['batch.kubernetes.io/job-completion-index']");
  valueEnv(out, cmd::kJobSetWorkers, std::to_string(workers));
  valueEnv(out, cmd::kJobSetReducers, std::to_string(reducers));
  valueEnv(out, cmd::kJobSetSubdomain, name);
  out << YAML::EndSeq;
  out << YAML::Key << "ports" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << "tally";
  out << YAML::Key << "containerPort" << YAML::Value << cmd::kSchedulerPort;
  out << YAML::EndMap << YAML::EndSeq;
  if (group.gpus > 0) {
    out << YAML::Key << "resources" << YAML::Value << YAML::BeginMap << YAML::Key << "limits"
        << YAML::Value << YAML::BeginMap << YAML::Key << "nvidia.com/gpu" << YAML::Value
        << group.gpus << YAML::EndMap << YAML::EndMap;
  }
  out << YAML::EndMap << YAML::EndSeq;  // the container, containers
  out << YAML::EndMap << YAML::EndMap;  // pod spec, pod template
  out << YAML::EndMap << YAML::EndMap;  // job spec, job template
  out << YAML::EndMap;
}

}  // namespace

std::string jobSetName(const std::string& display_name, int64_t max_pods) {
  std::string name;
  for (char c : display_name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    const bool plain = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (plain) {
      name += c;
    } else if (!name.empty() && name.back() != '-') {
      name += '-';
    }
  }
  if (name.empty() || name.front() < 'a' || name.front() > 'z') name.insert(0, "tally-");
  // <name>-reducers-0-<max index> must fit in one DNS label.
  const size_t suffix = std::string("-").size() + std::string(cmd::kJobSetReducersJob).size() +
                        std::string("-0-").size() +
                        std::to_string(std::max<int64_t>(max_pods - 1, 0)).size();
  const size_t limit = 63 > suffix ? 63 - suffix : 1;
  if (name.size() > limit) name.resize(limit);
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name;
}

std::string renderJobSet(const Plan& plan) {
  std::string text = planComment(plan);
  if (plan.gcloud.empty()) {
    return text + "# No JobSet: the job cannot be planned until pool 0 holds one replica.\n";
  }
  const JobSpec& job = plan.planned;
  Group workers{cmd::kJobSetWorkersJob, job.pools[0].replica_count, job.pools[0].image_uri,
                job.pools[0].accelerator_count};
  if (job.pools[1].present) workers.pods += job.pools[1].replica_count;
  Group reducers{cmd::kJobSetReducersJob, job.pools[2].present ? job.pools[2].replica_count : 0,
                 job.pools[2].image_uri, 0};
  const std::string name = jobSetName(plan.display_name, std::max(workers.pods, reducers.pods));

  text += "# JobSet " + name + ": " + std::to_string(workers.pods) + " GPU pods (" +
          job.pools[0].machine_type +
          (job.pools[0].hasAccelerators() ? " + " + std::to_string(job.pools[0].accelerator_count) +
                                                " x " + job.pools[0].accelerator_type
                                          : "") +
          ")";
  if (reducers.pods > 0) {
    text +=
        ", " + std::to_string(reducers.pods) + " reducer pods (" + job.pools[2].machine_type + ")";
  }
  text += "\n# Pods reach each other as " + name + "-<workers|reducers>-0-<index>." + name +
          " (tally launch reads the env below).\n";

  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << "jobset.x-k8s.io/v1alpha2";
  out << YAML::Key << "kind" << YAML::Value << "JobSet";
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap << YAML::Key << "name"
      << YAML::Value << name << YAML::EndMap;
  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "network" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enableDNSHostnames" << YAML::Value << true;
  out << YAML::Key << "subdomain" << YAML::Value << name;
  out << YAML::Key << "publishNotReadyAddresses" << YAML::Value << true;
  out << YAML::EndMap;
  // The reducers serve until they are stopped: the job is done when the workers are.
  out << YAML::Key << "successPolicy" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "operator" << YAML::Value << "All";
  out << YAML::Key << "targetReplicatedJobs" << YAML::Value << YAML::Flow << YAML::BeginSeq
      << cmd::kJobSetWorkersJob << YAML::EndSeq;
  out << YAML::EndMap;
  out << YAML::Key << "replicatedJobs" << YAML::Value << YAML::BeginSeq;
  replicatedJob(out, workers, plan, workers.pods, reducers.pods, name);
  if (reducers.pods > 0) replicatedJob(out, reducers, plan, workers.pods, reducers.pods, name);
  out << YAML::EndSeq;
  out << YAML::EndMap << YAML::EndMap;
  return text + out.c_str() + "\n";
}

}  // namespace tally::plan
