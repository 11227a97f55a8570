// SPDX-License-Identifier: Apache-2.0
// tally plan --format jobset|slurm (plan_formats.h): the JobSet manifest parses as YAML and has
// the expected structure, the sbatch script has its #SBATCH lines, het groups and sruns, and
// what each sets up makes `tally launch` derive the roles of the plan on every pod and node.
#include "tools/commands/plan_formats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "test/support/command_run.h"
#include "tools/commands/launch_plan.h"

namespace tally::plan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using PlanRun = test::CommandRun;

// `tally plan ARGS` of the built binary.
PlanRun runPlan(const std::string& args) {
  return test::runCommand(std::string("'") + TALLY_BIN + "' plan " + args);
}

const std::string kExample =
    std::string("--spec '") + TALLY_SOURCE_DIR + "/examples/customjob-reduction-server.json'";
const std::vector<std::string> kTrain = {"python", "train.py", "--epochs", "90"};

std::vector<std::string> strings(const YAML::Node& seq) {
  std::vector<std::string> out;
  for (const auto& item : seq) out.push_back(item.as<std::string>());
  return out;
}

// name -> value, or name -> "fieldRef:PATH" for the downward API.
std::map<std::string, std::string> envOf(const YAML::Node& container) {
  std::map<std::string, std::string> env;
  for (const auto& var : container["env"]) {
    std::string name = var["name"].as<std::string>();
    if (var["value"]) {
      env[name] = var["value"].as<std::string>();
    } else {
      env[name] = "fieldRef:" + var["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>();
    }
  }
  return env;
}

// The pod's environment as Kubernetes fills the manifest's env in pod `pod` of the JobSet's
// replicated job `job`.
std::map<std::string, std::string> podEnv(const std::map<std::string, std::string>& manifest,
                                          const std::string& jobset, const std::string& job,
                                          int pod) {
  const std::map<std::string, std::string> fields = {
      {"metadata.labels['jobset.sigs.k8s.io/jobset-name']", jobset},
      {"metadata.labels['jobset.sigs.k8s.io/replicatedjob-name']", job},
      {"metadata.labels['jobset.sigs.k8s.io/job-index']", "0"},
      {"metadata.annotations['batch.kubernetes.io/job-completion-index']", std::to_string(pod)}};
  std::map<std::string, std::string> env;
  for (const auto& [name, value] : manifest) {
    if (value.rfind("fieldRef:", 0) == 0) {
      auto it = fields.find(value.substr(9));
      EXPECT_NE(it, fields.end()) << "unexpected downward API field " << value;
      if (it != fields.end()) env[name] = it->second;
    } else {
      env[name] = value;
    }
  }
  env["JOB_COMPLETION_INDEX"] = std::to_string(pod);
  return env;
}

commands::LaunchPlan launchIn(const std::map<std::string, std::string>& env) {
  commands::LaunchPlan out;
  Status st = commands::planLaunchFromEnvironment(MapParamSource(env), "/p.so", "/r", kTrain, &out);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return out;
}

std::string valueOf(const commands::LaunchPlan& p, const std::string& name) {
  for (const auto& change : p.env) {
    if (change.name == name) return change.value;
  }
  return "<none>";
}

TEST(PlanJobSet, ManifestParsesWithTheExpectedStructure) {
  PlanRun run = runPlan(kExample + " --format jobset");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("# Planned by tally plan for resnet50-tally: every rule passes"));
  YAML::Node doc = YAML::Load(run.out);
  EXPECT_EQ(doc["apiVersion"].as<std::string>(), "jobset.x-k8s.io/v1alpha2");
  EXPECT_EQ(doc["kind"].as<std::string>(), "JobSet");
  EXPECT_EQ(doc["metadata"]["name"].as<std::string>(), "resnet50-tally");
  EXPECT_TRUE(doc["spec"]["network"]["enableDNSHostnames"].as<bool>());
  EXPECT_EQ(doc["spec"]["network"]["subdomain"].as<std::string>(), "resnet50-tally");
  EXPECT_EQ(doc["spec"]["successPolicy"]["operator"].as<std::string>(), "All");
  EXPECT_THAT(strings(doc["spec"]["successPolicy"]["targetReplicatedJobs"]),
              ElementsAre("workers"));

  const YAML::Node jobs = doc["spec"]["replicatedJobs"];
  ASSERT_EQ(jobs.size(), 2u);
  struct Want {
    const char* name;
    int pods;
    const char* image;
    int gpus;
  };
  const Want wants[] = {
      {"workers", 5, "us-central1-docker.pkg.dev/my-project/tally/pytorch-tally:latest", 8},
      {"reducers", 16, "us-central1-docker.pkg.dev/my-project/tally/tally-reducer:latest", 0}};
  for (size_t i = 0; i < 2; ++i) {
    const Want& want = wants[i];
    const YAML::Node job = jobs[i];
    SCOPED_TRACE(want.name);
    EXPECT_EQ(job["name"].as<std::string>(), want.name);
    EXPECT_EQ(job["replicas"].as<int>(), 1);
    const YAML::Node spec = job["template"]["spec"];
    EXPECT_EQ(spec["completionMode"].as<std::string>(), "Indexed");
    EXPECT_EQ(spec["completions"].as<int>(), want.pods);
    EXPECT_EQ(spec["parallelism"].as<int>(), want.pods);
    const YAML::Node pod = spec["template"]["spec"];
    EXPECT_EQ(pod["restartPolicy"].as<std::string>(), want.gpus > 0 ? "Never" : "OnFailure");
    ASSERT_EQ(pod["containers"].size(), 1u);
    const YAML::Node container = pod["containers"][0];
    EXPECT_EQ(container["image"].as<std::string>(), want.image);
    EXPECT_THAT(strings(container["command"]), ElementsAre("tally", "launch", "--"));
    EXPECT_EQ(strings(container["args"]), kTrain);
    EXPECT_EQ(container["ports"][0]["containerPort"].as<int>(), 2222);
    if (want.gpus > 0) {
      EXPECT_EQ(container["resources"]["limits"]["nvidia.com/gpu"].as<int>(), want.gpus);
    } else {
      EXPECT_FALSE(container["resources"]["limits"]["nvidia.com/gpu"])
          << "a reducer asks for no GPU";
    }
    std::map<std::string, std::string> env = envOf(container);
    EXPECT_EQ(env["TALLY_JOBSET_NAME"],
              "fieldRef:metadata.labels['jobset.sigs.k8s.io/jobset-name']");
    EXPECT_EQ(env["TALLY_JOBSET_POD_INDEX"],
              "fieldRef:metadata.annotations['batch.kubernetes.io/job-completion-index']");
    EXPECT_EQ(env["TALLY_JOBSET_WORKERS"], "5");
    EXPECT_EQ(env["TALLY_JOBSET_REDUCERS"], "16");
    EXPECT_EQ(env["TALLY_JOBSET_SUBDOMAIN"], "resnet50-tally");
  }
}

TEST(PlanJobSet, EveryPodGetsItsRoleFromLaunch) {
  PlanRun run = runPlan(kExample + " --format jobset");
  ASSERT_EQ(run.status, 0) << run.out;
  YAML::Node doc = YAML::Load(run.out);
  const YAML::Node jobs = doc["spec"]["replicatedJobs"];
  auto envFor = [&](size_t job) {
    return envOf(jobs[job]["template"]["spec"]["template"]["spec"]["containers"][0]);
  };
  const std::string master = "resnet50-tally-workers-0-0.resnet50-tally";
  for (int pod = 0; pod < 5; ++pod) {
    commands::LaunchPlan p = launchIn(podEnv(envFor(0), "resnet50-tally", "workers", pod));
    EXPECT_EQ(p.role, pod == 0 ? ClusterRole::kPrimary : ClusterRole::kWorker);
    EXPECT_EQ(valueOf(p, "RANK"), std::to_string(pod));
    EXPECT_EQ(valueOf(p, "WORLD_SIZE"), "5");
    EXPECT_EQ(valueOf(p, "MASTER_ADDR"), master);
    EXPECT_THAT(valueOf(p, "TALLY_REDUCERS"),
                HasSubstr("resnet50-tally-reducers-0-15.resnet50-tally:2222"));
    EXPECT_EQ(p.argv, kTrain);
  }
  commands::LaunchPlan r = launchIn(podEnv(envFor(1), "resnet50-tally", "reducers", 15));
  EXPECT_EQ(r.role, ClusterRole::kReducer);
  // Every address of the pod; the workers reach it by its name.
  EXPECT_THAT(r.argv, ElementsAre("/r", "--listen", "0.0.0.0:2222", "--threads", "15",
                                  "--max-memory", "10035M"));
  EXPECT_THAT(r.summary, HasSubstr("tally-reducer on resnet50-tally-reducers-0-15.resnet50-tally"));
}

std::map<std::string, std::string> matchLabels(const YAML::Node& pod) {
  std::map<std::string, std::string> labels;
  const YAML::Node terms =
      pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  EXPECT_EQ(terms.size(), 1u);
  if (terms.size() != 1) return labels;
  EXPECT_EQ(terms[0]["topologyKey"].as<std::string>(), "kubernetes.io/hostname");
  for (const auto& label : terms[0]["labelSelector"]["matchLabels"]) {
    labels[label.first.as<std::string>()] = label.second.as<std::string>();
  }
  return labels;
}

// Where Kubernetes puts the pods, what each may use, and what a pod's exit does to the JobSet:
// one pod per node, reducers off GPU nodes and sized from the plan's reducer machine
// (n1-highcpu-16: 16 vCPUs, 14.4 GiB), and a reducer's exit restarts that reducer only.
TEST(PlanJobSet, PodsArePlacedAndSizedAndAReducerExitIsNotTheJobs) {
  PlanRun run = runPlan(kExample + " --format jobset");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("16 reducer pods (n1-highcpu-16: 15 CPUs and 11059 MiB each)"));
  YAML::Node doc = YAML::Load(run.out);
  // No failurePolicy: a failed Job fails the JobSet, and only the workers' Job can fail.
  EXPECT_FALSE(doc["spec"]["failurePolicy"]);
  const YAML::Node jobs = doc["spec"]["replicatedJobs"];
  ASSERT_EQ(jobs.size(), 2u);
  const YAML::Node workers = jobs[0]["template"]["spec"];
  const YAML::Node reducers = jobs[1]["template"]["spec"];
  const YAML::Node worker_pod = workers["template"]["spec"];
  const YAML::Node reducer_pod = reducers["template"]["spec"];

  EXPECT_EQ(workers["backoffLimit"].as<int>(), 0);
  EXPECT_EQ(worker_pod["restartPolicy"].as<std::string>(), "Never");
  EXPECT_EQ(reducers["backoffLimit"].as<int64_t>(), 2147483647);
  EXPECT_EQ(reducer_pod["restartPolicy"].as<std::string>(), "OnFailure");

  const YAML::Node worker_resources = worker_pod["containers"][0]["resources"];
  const YAML::Node reducer_resources = reducer_pod["containers"][0]["resources"];
  for (const char* kind : {"requests", "limits"}) {
    SCOPED_TRACE(kind);
    EXPECT_EQ(worker_resources[kind]["nvidia.com/gpu"].as<std::string>(), "8");
    EXPECT_EQ(reducer_resources[kind]["cpu"].as<std::string>(), "15");
    EXPECT_EQ(reducer_resources[kind]["memory"].as<std::string>(), "11059Mi");
    EXPECT_FALSE(reducer_resources[kind]["nvidia.com/gpu"]);
  }

  EXPECT_THAT(
      matchLabels(worker_pod),
      ElementsAre(
          std::pair<std::string, std::string>("jobset.sigs.k8s.io/jobset-name", "resnet50-tally"),
          std::pair<std::string, std::string>("jobset.sigs.k8s.io/replicatedjob-name", "workers")));
  EXPECT_THAT(matchLabels(reducer_pod),
              ElementsAre(std::pair<std::string, std::string>("jobset.sigs.k8s.io/jobset-name",
                                                              "resnet50-tally"),
                          std::pair<std::string, std::string>(
                              "jobset.sigs.k8s.io/replicatedjob-name", "reducers")));
  EXPECT_FALSE(worker_pod["affinity"]["nodeAffinity"]);
  const YAML::Node terms =
      reducer_pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                 ["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 1u);  // one term: its expressions must all hold
  std::vector<std::string> off;
  for (const auto& expression : terms[0]["matchExpressions"]) {
    EXPECT_EQ(expression["operator"].as<std::string>(), "DoesNotExist");
    off.push_back(expression["key"].as<std::string>());
  }
  EXPECT_THAT(off, ElementsAre("nvidia.com/gpu.present", "cloud.google.com/gke-accelerator"));

  // tally-reducer gets the pod's CPUs and a slice-memory cap under the pod's memory limit.
  std::map<std::string, std::string> env = envOf(reducer_pod["containers"][0]);
  EXPECT_EQ(env["TALLY_REDUCER_ARGS"], "--threads 15 --max-memory 10035M");
  EXPECT_EQ(envOf(worker_pod["containers"][0]).count("TALLY_REDUCER_ARGS"), 0u);
  commands::LaunchPlan r = launchIn(podEnv(env, "resnet50-tally", "reducers", 3));
  EXPECT_THAT(r.argv, ElementsAre("/r", "--listen", "0.0.0.0:2222", "--threads", "15",
                                  "--max-memory", "10035M"));
}

// The reducer pods' size follows --reducer-machine: n2-highcpu-32 has 32 vCPUs and 32 GiB.
TEST(PlanJobSet, ReducerPodsFollowTheReducerMachine) {
  PlanRun run = runPlan(
      "--primary-machine n1-highmem-96 --accelerator NVIDIA_TESLA_V100:8 --workers 3 "
      "--reducer-machine n2-highcpu-32 --format jobset -- python t.py");
  ASSERT_EQ(run.status, 0) << run.out;
  YAML::Node doc = YAML::Load(run.out);
  const YAML::Node pod = doc["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"];
  const YAML::Node limits = pod["containers"][0]["resources"]["limits"];
  EXPECT_EQ(limits["cpu"].as<std::string>(), "31");
  EXPECT_EQ(limits["memory"].as<std::string>(), "24576Mi");
  EXPECT_EQ(envOf(pod["containers"][0])["TALLY_REDUCER_ARGS"], "--threads 31 --max-memory 23552M");
}

TEST(PlanJobSet, NameIsADnsLabelThatLeavesRoomForHostNames) {
  EXPECT_EQ(jobSetName("ResNet 50 / Tally", 16), "resnet-50-tally");
  EXPECT_EQ(jobSetName("50-run", 2), "tally-50-run");
  EXPECT_EQ(jobSetName("", 2), "tally");
  std::string name = jobSetName(std::string(80, 'x'), 1000);
  EXPECT_EQ(name.size() + std::string("-reducers-0-999").size(), 63u);
}

TEST(PlanJobSet, SingleHostHasNoReducerJobAndJsonCarriesTheManifest) {
  PlanRun run = runPlan(
      "--primary-machine n1-highmem-96 --accelerator NVIDIA_TESLA_V100:8 --image img --format "
      "jobset --json -- python t.py");
  EXPECT_EQ(run.status, 1) << run.out;  // collnet-hosts fails
  nlohmann::json j = nlohmann::json::parse(run.out.substr(run.out.find('{')));
  ASSERT_TRUE(j.contains("jobset")) << run.out;
  std::string manifest = j["jobset"].get<std::string>();
  EXPECT_THAT(manifest, HasSubstr("#   FAIL collnet-hosts"));
  YAML::Node doc = YAML::Load(manifest);
  ASSERT_EQ(doc["spec"]["replicatedJobs"].size(), 1u);
  EXPECT_EQ(doc["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"].as<int>(), 1);
}

TEST(PlanFormat, UnknownFormatIsAUsageError) {
  PlanRun run = runPlan(kExample + " --format helm");
  EXPECT_EQ(run.status, 2) << run.out;
  EXPECT_THAT(run.out, HasSubstr("--format: expected gcloud, jobset or slurm, got \"helm\""));
}

TEST(PlanFormat, GcloudIsTheDefault) {
  PlanRun plain = runPlan(kExample);
  PlanRun gcloud = runPlan(kExample + " --format gcloud");
  EXPECT_EQ(plain.status, 0);
  EXPECT_EQ(plain.out, gcloud.out);
  EXPECT_THAT(gcloud.out, HasSubstr("gcloud ai custom-jobs create"));
}

// --- Slurm ----------------------------------------------------------------------------------

std::vector<std::string> linesStartingWith(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) lines.push_back(line);
  }
  return lines;
}

TEST(PlanSlurm, ScriptHasTheHetJobAndItsSruns) {
  PlanRun run = runPlan(kExample + " --format slurm");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_EQ(run.out.rfind("#!/bin/bash\n", 0), 0u);
  EXPECT_THAT(linesStartingWith(run.out, "#SBATCH"),
              ElementsAre("#SBATCH --job-name=resnet50-tally", "#SBATCH --nodes=5",
                          "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=8",
                          "#SBATCH --exclusive", "#SBATCH hetjob", "#SBATCH --nodes=16",
                          "#SBATCH --ntasks-per-node=1", "#SBATCH --exclusive"));
  EXPECT_THAT(linesStartingWith(run.out, "srun"),
              ElementsAre("srun --het-group=1 --ntasks-per-node=1 "
                          "--export=ALL,TALLY_SLURM_HET_GROUP=1 tally launch -- python train.py "
                          "--epochs 90 &",
                          "srun --het-group=0 --ntasks-per-node=1 "
                          "--export=ALL,TALLY_SLURM_HET_GROUP=0 tally launch -- python train.py "
                          "--epochs 90"));
  // Every #SBATCH line comes before the first command, or sbatch ignores it.
  size_t first_command = run.out.find("\nsrun");
  size_t last_sbatch = run.out.rfind("#SBATCH");
  EXPECT_LT(last_sbatch, first_command);
  EXPECT_THAT(run.out, HasSubstr("exit \"$status\"\n"));
  // The script is valid sh.
  std::string path = ::testing::TempDir() + "/tally_plan_slurm.sh";
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(run.out.c_str(), f);
  std::fclose(f);
  EXPECT_EQ(std::system(("sh -n '" + path + "'").c_str()), 0);
  std::remove(path.c_str());
}

TEST(PlanSlurm, EveryNodeGetsItsRoleFromLaunch) {
  PlanRun run = runPlan(kExample + " --format slurm");
  ASSERT_EQ(run.status, 0) << run.out;
  // What Slurm sets in each component's tasks, with the group the srun line exports.
  std::vector<std::string> sruns = linesStartingWith(run.out, "srun");
  ASSERT_EQ(sruns.size(), 2u);
  std::map<std::string, std::string> base = {{"SLURM_JOB_ID", "77"},
                                             {"SLURM_HET_SIZE", "2"},
                                             {"SLURM_JOB_NODELIST_HET_GROUP_0", "gpu[01-05]"},
                                             {"SLURM_JOB_NODELIST_HET_GROUP_1", "cpu[001-016]"}};
  std::smatch m;
  for (const std::string& srun : sruns) {
    ASSERT_TRUE(std::regex_search(srun, m, std::regex("TALLY_SLURM_HET_GROUP=([0-9])")));
    const int group = std::stoi(m[1]);
    const int nodes = group == 0 ? 5 : 16;
    for (int i = 0; i < nodes; ++i) {
      std::map<std::string, std::string> env = base;
      env["TALLY_SLURM_HET_GROUP"] = std::to_string(group);
      char node[16];
      std::snprintf(node, sizeof(node), group == 0 ? "gpu%02d" : "cpu%03d", i + 1);
      env["SLURMD_NODENAME"] = node;
      commands::LaunchPlan p = launchIn(env);
      if (group == 1) {
        EXPECT_EQ(p.role, ClusterRole::kReducer);
        EXPECT_THAT(p.argv, ElementsAre("/r", "--listen", std::string(node) + ":2222"));
      } else {
        EXPECT_EQ(p.role, i == 0 ? ClusterRole::kPrimary : ClusterRole::kWorker);
        EXPECT_EQ(valueOf(p, "RANK"), std::to_string(i));
        EXPECT_EQ(valueOf(p, "WORLD_SIZE"), "5");
        EXPECT_EQ(valueOf(p, "MASTER_ADDR"), "gpu01");
        EXPECT_THAT(valueOf(p, "TALLY_REDUCERS"), HasSubstr("cpu016:2222"));
      }
    }
  }
}

TEST(PlanSlurm, SingleHostIsAPlainJob) {
  PlanRun run = runPlan(
      "--primary-machine n1-highmem-96 --accelerator NVIDIA_TESLA_V100:8 --format slurm -- "
      "python 't 1.py'");
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_TRUE(linesStartingWith(run.out, "#SBATCH hetjob").empty()) << run.out;
  EXPECT_THAT(run.out, HasSubstr("#SBATCH --nodes=1\n"));
  EXPECT_THAT(run.out,
              HasSubstr("exec srun --ntasks-per-node=1 --export=ALL,TALLY_SLURM_HET_GROUP=0 "
                        "tally launch -- python 't 1.py'\n"));
}

TEST(PlanFormats, NoPlannedJobGivesOnlyTheReason) {
  // Two primary replicas with a different pool 1: nothing can be planned.
  std::string spec = ::testing::TempDir() + "/tally_plan_formats_bad.json";
  std::FILE* f = std::fopen(spec.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(R"({"workerPoolSpecs": [
      {"machineSpec": {"machineType": "n1-highmem-96", "acceleratorType": "NVIDIA_TESLA_V100",
       "acceleratorCount": 8}, "replicaCount": 2, "containerSpec": {"imageUri": "a"}},
      {"machineSpec": {"machineType": "n1-highmem-96", "acceleratorType": "NVIDIA_TESLA_V100",
       "acceleratorCount": 8}, "replicaCount": 2, "containerSpec": {"imageUri": "b"}}]})",
             f);
  std::fclose(f);
  for (const char* format : {"jobset", "slurm"}) {
    PlanRun run = runPlan("--spec '" + spec + "' --format " + format);
    EXPECT_EQ(run.status, 1) << run.out;
    EXPECT_THAT(run.out, HasSubstr("#   FAIL primary-pool"));
    EXPECT_THAT(run.out, HasSubstr("cannot be planned until pool 0 holds one replica"));
    EXPECT_EQ(run.out.find("kind: JobSet"), std::string::npos);
    EXPECT_EQ(run.out.find("srun"), std::string::npos);
  }
  std::remove(spec.c_str());
}

}  // namespace
}  // namespace tally::plan
