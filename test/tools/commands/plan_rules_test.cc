// SPDX-License-Identifier: Apache-2.0
// tally plan on jobs it must refuse or warn about: pools 0 and 1 without GPUs or on a reducer
// image, two hosts, several evaluators, mistyped accelerator and machine types, what the planned
// job replaces in pool 2, the reducer pool it recommends, the GPU hosts of the bandwidth table,
// and where each input of the prediction comes from.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test/support/command_run.h"
#include "test/tools/commands/plan_test_specs.h"
#include "tools/commands/machine_types.h"
#include "tools/commands/plan_model.h"

namespace tally::plan {
namespace {

using nlohmann::json;
using namespace test_specs;

constexpr const char* kVertexReducerImage =
    "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest";
const std::string kExample =
    std::string("--spec '") + TALLY_SOURCE_DIR + "/examples/customjob-reduction-server.json'";

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A pool of `machine` hosts without accelerators, on the training image.
std::string cpuPool(const std::string& machine, const std::string& replicas) {
  return R"({"machineSpec": {"machineType": ")" + machine + R"("}, "replicaCount": )" + replicas +
         R"(, "containerSpec": {"imageUri": "gcr.io/p/train"}})";
}

TEST(PlanRules, WorkersWithoutGpusFail) {
  Plan plan = planOf(
      specOf({cpuPool("n1-standard-16", "1"), cpuPool("n1-standard-16", "3"), reducerPool("4")}));
  EXPECT_FALSE(plan.ok());
  std::string text = renderText(plan);
  EXPECT_TRUE(has(text, "FAIL  worker-gpus")) << text;
  EXPECT_TRUE(has(text, "pool 0 (n1-standard-16) has no GPUs")) << text;

  // A machine type that comes with its GPUs needs no acceleratorType; TPUs do not run NCCL.
  EXPECT_TRUE(has(renderText(planOf(specOf({cpuPool("a2-highgpu-8g", "1"),
                                            cpuPool("g2-standard-96", "1"), reducerPool("7")}))),
                  "PASS  worker-gpus"));
  std::string tpu = replaced(v100Pool("1"), "NVIDIA_TESLA_V100", "TPU_V3");
  std::string tpu_text = renderText(planOf(specOf({tpu, v100Pool("1"), reducerPool("7")}),
                                           PlanOptions{.bandwidth = {{"n1-highmem-96", 100}}}));
  EXPECT_TRUE(has(tpu_text, "FAIL  worker-gpus")) << tpu_text;

  test::CommandRun run = runTally("--primary-machine n1-standard-16 --workers 3");
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_TRUE(has(run.out, "FAIL  worker-gpus")) << run.out;
}

TEST(PlanRules, ReducerImagesInWorkerPoolsFail) {
  std::string vertex = replaced(v100Pool("1"), "gcr.io/p/train", kVertexReducerImage);
  std::string text = renderText(planOf(specOf({vertex, v100Pool("4"), reducerPool("16")})));
  EXPECT_TRUE(has(text, "FAIL  worker-image")) << text;
  EXPECT_TRUE(has(text, std::string("pool 0 runs ") + kVertexReducerImage)) << text;

  // Pool 1 on pool 2's own image: the Tally reducer image has no training framework.
  std::string on_reducer = replaced(v100Pool("4"), "gcr.io/p/train", "gcr.io/p/tally-reducer");
  std::string same = renderText(planOf(specOf({v100Pool("1"), on_reducer, reducerPool("16")})));
  EXPECT_TRUE(has(same, "FAIL  worker-image")) << same;
  EXPECT_TRUE(has(same, "pool 1 runs gcr.io/p/tally-reducer, pool 2's image")) << same;

  test::CommandRun run = runTally(
      "--primary-machine n1-highmem-96 --accelerator NVIDIA_TESLA_V100:8 --workers 4 "
      "--image gcr.io/p/r --reducer-image gcr.io/p/r");
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_TRUE(has(run.out, "FAIL  worker-image")) << run.out;
}

// For many GPU host shapes, host counts and reducer machines asked for, the reducer pool the plan
// recommends passes every reducer rule when it is checked as pool 2.
TEST(PlanRules, RecommendedReducerPoolPassesEveryRule) {
  struct Host {
    const char* machine;
    const char* gpu;
    int count;
    double gbps;  // 0: the table's figure; else given with --bandwidth
  } hosts[] = {
      {"n1-highmem-96", "NVIDIA_TESLA_V100", 8, 0},   {"a2-highgpu-8g", "NVIDIA_TESLA_A100", 8, 0},
      {"a2-megagpu-16g", "NVIDIA_TESLA_A100", 16, 0}, {"a2-ultragpu-8g", "NVIDIA_A100_80GB", 8, 0},
      {"n1-standard-32", "NVIDIA_TESLA_T4", 1, 50},   {"g2-standard-48", "NVIDIA_L4", 4, 50},
      {"a3-highgpu-8g", "NVIDIA_H100_80GB", 8, 200},  {"n1-standard-8", "NVIDIA_TESLA_T4", 1, 16},
  };
  const std::vector<std::string> pool2_machines = {"", "n1-highcpu-8", "n1-highcpu-16",
                                                   "n2-highcpu-32", "n1-highmem-8"};
  const std::vector<std::string> asked_machines = {"", "n1-highcpu-8", "n2-highcpu-8",
                                                   "n1-highcpu-32"};
  for (const Host& host : hosts) {
    for (int n : {2, 3, 5, 8, 17, 64}) {
      for (const std::string& pool2 : pool2_machines) {
        for (const std::string& asked : asked_machines) {
          std::string where = std::string(host.machine) + " x " + std::to_string(n) + ", pool 2 " +
                              pool2 + ", --reducer-machine " + asked;
          std::string pool =
              replaced(v100Pool(std::to_string(n - 1)), "n1-highmem-96", host.machine);
          pool = replaced(pool, "NVIDIA_TESLA_V100", host.gpu);
          pool = replaced(pool, "\"acceleratorCount\": 8",
                          "\"acceleratorCount\": " + std::to_string(host.count));
          std::vector<std::string> pools = {
              replaced(pool, "\"replicaCount\": " + std::to_string(n - 1), "\"replicaCount\": 1"),
              pool};
          if (!pool2.empty()) pools.push_back(replaced(reducerPool("3"), "n1-highcpu-16", pool2));
          PlanOptions options;
          options.reducer_machine = asked;
          if (host.gbps > 0) options.bandwidth[host.machine] = host.gbps;
          Plan plan = planOf(specOf(pools), options);
          const PoolSpec& planned = plan.planned.pools[2];
          ASSERT_TRUE(planned.present) << where;
          EXPECT_EQ(planned.replica_count, plan.recommended_reducers) << where;

          // The recommended pool, as the job's pool 2, on the Tally reducer image.
          JobSpec job = plan.input;
          job.pools[2] = planned;
          job.pools[2].image_uri = "gcr.io/p/tally-reducer";
          PlanOptions as_given;
          as_given.bandwidth = options.bandwidth;
          Plan check;
          ASSERT_TRUE(makePlan(job, as_given, &check).isOk()) << where;
          for (const Rule& rule : check.rules) {
            EXPECT_TRUE(rule.pass)
                << where << ": " << planned.replica_count << " x " << planned.machine_type << ": "
                << rule.name << ": " << rule.detail;
          }
          EXPECT_EQ(check.recommended_reducers, planned.replica_count) << where;
        }
      }
    }
  }
}

TEST(PlanRules, TwoHostsWarnThatReducersCannotHelp) {
  Plan plan = planOf(specOf({v100Pool("1"), v100Pool("1"), reducerPool("7")}));
  EXPECT_TRUE(plan.ok());
  std::string text = renderText(plan);
  EXPECT_TRUE(has(text, "WARN  collnet-hosts")) << text;
  EXPECT_TRUE(has(text, "2(n-1)/n = 1")) << text;
  EXPECT_TRUE(has(text, "7 x n1-highcpu-16 (112 vCPUs)")) << text;
  json doc = json::parse(renderJson(plan));
  bool warned = false;
  for (const json& rule : doc["rules"]) {
    if (rule["name"] == "collnet-hosts") warned = rule.value("warn", false);
  }
  EXPECT_TRUE(warned) << doc["rules"].dump();

  std::string three = renderText(planOf(specOf({v100Pool("1"), v100Pool("2"), reducerPool("10")})));
  EXPECT_TRUE(has(three, "PASS  collnet-hosts")) << three;
}

TEST(PlanRules, SeveralEvaluatorsOnlyWarn) {
  Plan plan = planOf(specOf({v100Pool("1"), v100Pool("4"), reducerPool("16"), evaluatorPool("2")}));
  EXPECT_TRUE(plan.ok());
  std::string text = renderText(plan);
  EXPECT_TRUE(has(text, "WARN  evaluators")) << text;
  EXPECT_TRUE(has(text, "Result: every rule passes")) << text;
}

TEST(PlanRules, MistypedAcceleratorTypeSuggestsTheKnownOne) {
  JobSpec job;
  Status s = parseJobSpec(
      specOf({replaced(v100Pool("1"), "NVIDIA_TESLA_V100", "NVIDIA_TESLA_V10"), v100Pool("1")}),
      &job);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(),
            "workerPoolSpecs[0].machineSpec.acceleratorType: unknown accelerator type "
            "NVIDIA_TESLA_V10 (did you mean NVIDIA_TESLA_V100?)");
  s = parseJobSpec(specOf({replaced(v100Pool("1"), "NVIDIA_TESLA_V100", "QUANTUM_CHIP")}), &job);
  ASSERT_FALSE(s.isOk());
  EXPECT_TRUE(has(s.message(), "unknown accelerator type QUANTUM_CHIP (known types: "))
      << s.message();
  EXPECT_TRUE(has(s.message(), "NVIDIA_TESLA_T4")) << s.message();

  test::CommandRun run =
      runTally("--primary-machine n1-highmem-96 --accelerator NVIDIA_TESLA_V10:8 --workers 1");
  EXPECT_EQ(run.status, 2) << run.out;
  EXPECT_TRUE(has(run.out,
                  "--accelerator: unknown accelerator type NVIDIA_TESLA_V10 (did you mean "
                  "NVIDIA_TESLA_V100?)"))
      << run.out;
  EXPECT_FALSE(has(run.out, "egress")) << run.out;
}

TEST(PlanRules, UnknownMachineTypeNamesTheFileAndTheField) {
  std::string path = ::testing::TempDir() + "/tally_plan_mistyped_machine.json";
  std::ofstream(path) << specOf(
      {v100Pool("1"), replaced(v100Pool("1"), "n1-highmem-96", "n1-higmem-96")});
  test::CommandRun run = runTally("--spec '" + path + "'");
  EXPECT_EQ(run.status, 2) << run.out;
  EXPECT_TRUE(has(run.out, path + ": workerPoolSpecs[1].machineSpec.machineType: unknown machine "
                                  "type n1-higmem-96: expected a predefined"))
      << run.out;
  std::remove(path.c_str());

  test::CommandRun flag = runTally(
      "--primary-machine n1-highmem-96 --accelerator NVIDIA_TESLA_V100:8 --workers 1 "
      "--worker-machine n1-higmem-96");
  EXPECT_EQ(flag.status, 2) << flag.out;
  EXPECT_TRUE(has(flag.out, "--worker-machine: unknown machine type n1-higmem-96")) << flag.out;
}

TEST(PlanRules, WhatThePlannedJobReplacesInPoolTwoIsSaid) {
  std::string own = R"({"machineSpec": {"machineType": "n1-highcpu-8"}, "replicaCount": 32,
      "containerSpec": {"imageUri": "gcr.io/p/old-reducer", "command": ["python", "-m", "red"],
                        "args": ["--port", "2222"]}})";
  PlanOptions options;
  options.reducer_image = "gcr.io/p/tally-reducer:2";
  Plan plan = planOf(specOf({v100Pool("1"), v100Pool("4"), own}), options);
  std::string text = renderText(plan);
  EXPECT_TRUE(has(text,
                  "pool 2's command `python -m red --port 2222` is replaced by `tally "
                  "launch --`"))
      << text;
  EXPECT_TRUE(has(text,
                  "pool 2's image gcr.io/p/old-reducer is replaced by "
                  "gcr.io/p/tally-reducer:2 (--reducer-image)"))
      << text;
  EXPECT_TRUE(has(text, "pool 2's machine type n1-highcpu-8 is replaced by n1-highcpu-16")) << text;

  // Nothing to say when pool 2 already runs `tally launch --` on the image and machine planned.
  Plan same = planOf(specOf({v100Pool("1"), v100Pool("4"), reducerPool("16")}));
  for (const std::string& note : same.notes) EXPECT_FALSE(has(note, "pool 2's")) << note;
}

TEST(PlanTable, CurrentGpuShapesHaveTheirPublishedEgress) {
  struct Row {
    const char* machine;
    const char* gpu;
    int64_t count;
    double gbps;
  } rows[] = {
      {"a2-highgpu-1g", "NVIDIA_TESLA_A100", 1, 24},
      {"a2-highgpu-2g", "NVIDIA_TESLA_A100", 2, 32},
      {"a2-highgpu-4g", "NVIDIA_TESLA_A100", 4, 50},
      {"a2-ultragpu-1g", "NVIDIA_A100_80GB", 1, 24},
      {"a2-ultragpu-2g", "NVIDIA_A100_80GB", 2, 32},
      {"a2-ultragpu-4g", "NVIDIA_A100_80GB", 4, 50},
      {"a2-ultragpu-8g", "NVIDIA_A100_80GB", 8, 100},
      {"a3-highgpu-1g", "NVIDIA_H100_80GB", 1, 25},
      {"a3-highgpu-2g", "NVIDIA_H100_80GB", 2, 50},
      {"a3-highgpu-4g", "NVIDIA_H100_80GB", 4, 100},
      {"a3-highgpu-8g", "NVIDIA_H100_80GB", 8, 200},
      {"a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 8, 200},
      {"g2-standard-4", "NVIDIA_L4", 1, 10},
      {"g2-standard-8", "NVIDIA_L4", 1, 16},
      {"g2-standard-12", "NVIDIA_L4", 1, 16},
      {"g2-standard-16", "NVIDIA_L4", 1, 32},
      {"g2-standard-24", "NVIDIA_L4", 2, 32},
      {"g2-standard-32", "NVIDIA_L4", 1, 32},
      {"g2-standard-48", "NVIDIA_L4", 4, 50},
      {"g2-standard-96", "NVIDIA_L4", 8, 100},
      // N1 with T4s or V100s: the figure for the GPU count once the vCPUs reach its minimum.
      {"n1-standard-32", "NVIDIA_TESLA_T4", 1, 50},
      {"n1-highmem-64", "NVIDIA_TESLA_T4", 2, 50},
      {"n1-standard-96", "NVIDIA_TESLA_T4", 4, 100},
      {"n1-standard-16", "NVIDIA_TESLA_V100", 1, 24},
      {"n1-highmem-32", "NVIDIA_TESLA_V100", 2, 32},
      {"n1-highcpu-64", "NVIDIA_TESLA_V100", 4, 100},
      // Under the minimum, and with P100s: the N1 machine type's own figure.
      {"n1-standard-16", "NVIDIA_TESLA_T4", 1, 32},
      {"n1-standard-8", "NVIDIA_TESLA_V100", 1, 16},
      {"n1-standard-16", "NVIDIA_TESLA_P100", 1, 32},
  };
  for (const Row& row : rows) {
    Egress egress;
    Status s = machineEgress(row.machine, row.gpu, row.count, {}, &egress);
    ASSERT_TRUE(s.isOk()) << row.machine << " + " << row.count << " x " << row.gpu << ": "
                          << s.toString();
    EXPECT_EQ(egress.gbps, row.gbps) << row.machine << " + " << row.count << " x " << row.gpu;
    EXPECT_FALSE(egress.source.empty()) << row.machine;
  }
}

TEST(PlanPredictInputs, EveryInputSaysWhereItCameFrom) {
  test::CommandRun run = runTally(kExample);
  ASSERT_EQ(run.status, 0) << run.out;
  for (const char* line :
       {"host link            100 Gbps", "n1-highmem-96 + 8 x NVIDIA_TESLA_V100 (table: ",
        "reducer cores        16", "n1-highcpu-16's vCPUs", "rs worker CPU     *  0.98 CPU-s/GiB",
        "uncalibrated", "tally bench --sizes 64M,4K --algo rs,ring", "--worker-cpu-s-per-gib",
        "--reducer-call-cpu-us", "bound by worker CPU: an uncalibrated input"}) {
    EXPECT_TRUE(has(run.out, line)) << "want \"" << line << "\" in:\n" << run.out;
  }

  // Given on the command line, an input is no longer marked.
  test::CommandRun given = runTally(kExample +
                                    " --worker-cpu-s-per-gib 0.3 --reducer-cpu-s-per-gib 0.2 "
                                    "--ring-cpu-s-per-gib 0.25 --reducer-call-cpu-us 40");
  ASSERT_EQ(given.status, 0) << given.out;
  EXPECT_TRUE(has(given.out, "rs worker CPU        0.3 CPU-s/GiB")) << given.out;
  EXPECT_TRUE(has(given.out, "--worker-cpu-s-per-gib")) << given.out;
  EXPECT_FALSE(has(given.out, "*  ")) << given.out;

  test::CommandRun json_run = runTally(kExample + " --json");
  ASSERT_EQ(json_run.status, 0) << json_run.out;
  json doc = json::parse(json_run.out);
  const json& inputs = doc["prediction"]["inputs"];
  ASSERT_TRUE(inputs.is_array()) << doc["prediction"].dump(2);
  bool found = false;
  for (const json& input : inputs) {
    if (input["name"] == "rsWorkerCpuSecondsPerGib") {
      found = true;
      EXPECT_EQ(input["value"], 0.98);
      EXPECT_EQ(input["uncalibrated"], true);
    }
  }
  EXPECT_TRUE(found) << inputs.dump(2);
  EXPECT_TRUE(has(doc["prediction"]["calibrate"].value("command", ""), "tally bench --sizes"))
      << doc["prediction"].dump(2);

  test::CommandRun only = runTally("--predict-only --hosts 8 --reducers 8 --link 100gbit");
  ASSERT_EQ(only.status, 0) << only.out;
  EXPECT_TRUE(has(only.out, "host link            100 Gbps         --link")) << only.out;
}

}  // namespace
}  // namespace tally::plan
