// SPDX-License-Identifier: Apache-2.0
// `tally plan --format jobset`: the planned job as a Kubernetes JobSet (plan_formats.h).
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "tools/commands/launch_env.h"
#include "tools/commands/machine_types.h"
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

// Labels JobSet puts on every pod of a replicated job.
constexpr const char* kJobSetNameLabel = "jobset.sigs.k8s.io/jobset-name";
constexpr const char* kReplicatedJobLabel = "jobset.sigs.k8s.io/replicatedjob-name";
// Labels of GPU nodes: NVIDIA's GPU feature discovery (the GPU Operator) sets the first, GKE the
// second on every node of a GPU node pool. A reducer goes only where neither is.
constexpr const char* kGpuNodeLabels[] = {"nvidia.com/gpu.present",
                                          "cloud.google.com/gke-accelerator"};
// The largest backoffLimit a Job takes (an int32): the reducers' Job never fails.
constexpr int64_t kReducerBackoffLimit = 2147483647;
// Memory a reducer keeps out of --max-memory for what is not slices: threads, sockets, metrics.
constexpr int64_t kReducerOverheadMib = 1024;

struct Group {
  const char* name;  // the replicated job
  bool reducers = false;
  int64_t pods = 0;        // hosts
  std::string image;       // container image
  int64_t gpus = 0;        // nvidia.com/gpu per pod (workers)
  int cpus = 0;            // CPU request and limit per pod (reducers); 0: not set
  int64_t memory_mib = 0;  // memory request and limit per pod, MiB (reducers); 0: not set
};

// A reducer pod takes its node's vCPUs but one and three quarters of its memory: the rest is for
// the kubelet's reservation and the node's DaemonSets, so that the pod fits a node of the plan's
// reducer machine. Requests equal to limits, in whole CPUs, make it a Guaranteed pod, which a
// kubelet with the static CPU manager gives cores of its own. Left unset for a machine type
// whose memory is unknown.
void sizeReducers(const std::string& machine_type, Group* group) {
  MachineShape shape;
  if (!parseMachineType(machine_type, &shape).isOk() || shape.vcpus < 2 || shape.memory_gib <= 0) {
    return;
  }
  group->cpus = shape.vcpus - 1;
  group->memory_mib = static_cast<int64_t>(shape.memory_gib * 1024 * 3 / 4);
}

// What `tally launch` passes on to tally-reducer: as many threads as the pod has CPUs (it would
// count the node's), and slice memory within the pod's limit, so that a communicator past it is
// refused by name instead of the reducer being killed for memory.
std::string reducerArgs(const Group& group) {
  return "--threads " + std::to_string(group.cpus) + " --max-memory " +
         std::to_string(group.memory_mib - kReducerOverheadMib) + "M";
}

void resources(YAML::Emitter& out, const Group& group) {
  if (group.gpus <= 0 && group.cpus <= 0) return;
  out << YAML::Key << "resources" << YAML::Value << YAML::BeginMap;
  for (const char* kind : {"requests", "limits"}) {
    out << YAML::Key << kind << YAML::Value << YAML::BeginMap;
    if (group.gpus > 0) {
      out << YAML::Key << "nvidia.com/gpu" << YAML::Value;
      quoted(out, std::to_string(group.gpus));
    }
    if (group.cpus > 0) {
      out << YAML::Key << "cpu" << YAML::Value;
      quoted(out, std::to_string(group.cpus));
      out << YAML::Key << "memory" << YAML::Value;
      quoted(out, std::to_string(group.memory_mib) + "Mi");
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
}

// One pod per node for either group: each pod is one host of the plan, with that host's network.
// Reducers also stay off GPU nodes.
void affinity(YAML::Emitter& out, const Group& group, const std::string& name) {
  out << YAML::Key << "affinity" << YAML::Value << YAML::BeginMap;
  if (group.reducers) {
    out << YAML::Key << "nodeAffinity" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "requiredDuringSchedulingIgnoredDuringExecution" << YAML::Value
        << YAML::BeginMap << YAML::Key << "nodeSelectorTerms" << YAML::Value << YAML::BeginSeq
        << YAML::BeginMap << YAML::Key << "matchExpressions" << YAML::Value << YAML::BeginSeq;
    for (const char* label : kGpuNodeLabels) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "key" << YAML::Value << label << YAML::Key
          << "operator" << YAML::Value << "DoesNotExist" << YAML::EndMap;
    }
    out << YAML::EndSeq << YAML::EndMap << YAML::EndSeq << YAML::EndMap;
    out << YAML::EndMap;  // nodeAffinity
  }
  out << YAML::Key << "podAntiAffinity" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "requiredDuringSchedulingIgnoredDuringExecution" << YAML::Value
      << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "labelSelector" << YAML::Value << YAML::BeginMap << YAML::Key << "matchLabels"
      << YAML::Value << YAML::BeginMap;
  out << YAML::Key << kJobSetNameLabel << YAML::Value;
  quoted(out, name);
  out << YAML::Key << kReplicatedJobLabel << YAML::Value;
  quoted(out, group.name);
  out << YAML::EndMap << YAML::EndMap;
  out << YAML::Key << "topologyKey" << YAML::Value << "kubernetes.io/hostname";
  out << YAML::EndMap << YAML::EndSeq;
  out << YAML::EndMap;  // podAntiAffinity
  out << YAML::EndMap;  // affinity
}

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
  // A lost worker fails the communicator (NCCL's rule), so its Job fails at once, and with it the
  // JobSet. A reducer that exits is restarted in its pod, keeping its name and address, and the
  // workers take it back in (docs/failover.md): its Job must never fail the JobSet.
  out << YAML::Key << "backoffLimit" << YAML::Value << (group.reducers ? kReducerBackoffLimit : 0);
  out << YAML::Key << "template" << YAML::Value << YAML::BeginMap << YAML::Key << "spec"
      << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "restartPolicy" << YAML::Value << (group.reducers ? "OnFailure" : "Never");
  affinity(out, group, name);
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
  fieldEnv(out, cmd::kJobSetName, std::string("metadata.labels['") + kJobSetNameLabel + "']");
  fieldEnv(out, cmd::kJobSetReplicatedJob,
           std::string("metadata.labels['") + kReplicatedJobLabel + "']");
  fieldEnv(out, cmd::kJobSetJobIndex, "metadata.labels['jobset.sigs.k8s.io/job-index']");
  fieldEnv(out, cmd::kJobSetPodIndex,
           "metadata.annotations['batch.kubernetes.io/job-completion-index']");
  valueEnv(out, cmd::kJobSetWorkers, std::to_string(workers));
  valueEnv(out, cmd::kJobSetReducers, std::to_string(reducers));
  valueEnv(out, cmd::kJobSetSubdomain, name);
  if (group.reducers && group.cpus > 0) valueEnv(out, "TALLY_REDUCER_ARGS", reducerArgs(group));
  out << YAML::EndSeq;
  out << YAML::Key << "ports" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << "tally";
  out << YAML::Key << "containerPort" << YAML::Value << cmd::kSchedulerPort;
  out << YAML::EndMap << YAML::EndSeq;
  resources(out, group);
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
  Group workers{cmd::kJobSetWorkersJob, false, job.pools[0].replica_count, job.pools[0].image_uri,
                job.pools[0].accelerator_count};
  if (job.pools[1].present) workers.pods += job.pools[1].replica_count;
  Group reducers{cmd::kJobSetReducersJob, true,
                 job.pools[2].present ? job.pools[2].replica_count : 0, job.pools[2].image_uri};
  if (reducers.pods > 0) sizeReducers(job.pools[2].machine_type, &reducers);
  const std::string name = jobSetName(plan.display_name, std::max(workers.pods, reducers.pods));

  text += "# JobSet " + name + ": " + std::to_string(workers.pods) + " GPU pods (" +
          job.pools[0].machine_type +
          (job.pools[0].hasAccelerators() ? " + " + std::to_string(job.pools[0].accelerator_count) +
                                                " x " + job.pools[0].accelerator_type
                                          : "") +
          ")";
  if (reducers.pods > 0) {
    text += ", " + std::to_string(reducers.pods) + " reducer pods (" + job.pools[2].machine_type;
    if (reducers.cpus > 0) {
      text += ": " + std::to_string(reducers.cpus) + " CPUs and " +
              std::to_string(reducers.memory_mib) + " MiB each";
    }
    text += ")";
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
