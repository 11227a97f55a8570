// SPDX-License-Identifier: Apache-2.0
// tally plan: the CustomJob parser, the rules, the reducer recommendation, the gcloud command and
// the JSON document (plan_model.h), then the built `tally plan` end to end.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test/support/command_run.h"
#include "test/tools/commands/plan_test_specs.h"
#include "tools/commands/machine_types.h"
#include "tools/commands/plan_model.h"
#include "tools/commands/spec_keys.h"

namespace tally::plan {
namespace {

using nlohmann::json;

using namespace test_specs;

TEST(PlanModel, FiveGpuHostsNeedSixteenReducers) {
  Plan plan = planOf(specOf({v100Pool("1"), v100Pool("4"), reducerPool("16")}));
  EXPECT_DOUBLE_EQ(plan.worker_gbps, 500);
  EXPECT_EQ(plan.reducer_machine, "n1-highcpu-16");
  EXPECT_DOUBLE_EQ(plan.reducer_machine_egress.gbps, 32);
  EXPECT_EQ(plan.recommended_reducers, 16);
  EXPECT_DOUBLE_EQ(plan.reducer_pool_gbps, 512);
  EXPECT_TRUE(plan.ok());
  EXPECT_EQ(plan.planned.pools[2].replica_count, 16);
}

TEST(PlanModel, EightGpuHostsNeedTwentyFiveReducers) {
  Plan plan = planOf(specOf({v100Pool("1"), v100Pool("7"), reducerPool("25")}));
  EXPECT_DOUBLE_EQ(plan.worker_gbps, 800);
  EXPECT_EQ(plan.recommended_reducers, 25);  // exactly 800 / 32: no extra reducer
  EXPECT_TRUE(plan.ok());
  EXPECT_FALSE(planOf(specOf({v100Pool("1"), v100Pool("7"), reducerPool("24")})).ok());
}

TEST(PlanModel, PrimaryPoolWithTwoReplicasFails) {
  Plan plan = planOf(specOf({v100Pool("2"), v100Pool("3"), reducerPool("16")}));
  EXPECT_FALSE(plan.ok());
  const Rule& rule = ruleNamed(plan, "primary-pool");
  EXPECT_FALSE(rule.pass);
  EXPECT_NE(rule.detail.find("replicaCount 2"), std::string::npos) << rule.detail;
  EXPECT_TRUE(ruleNamed(plan, "reducer-bandwidth").pass);
  // The planned job keeps the five hosts, as 1 + 4.
  EXPECT_EQ(plan.planned.pools[0].replica_count, 1);
  EXPECT_EQ(plan.planned.pools[1].replica_count, 4);
  EXPECT_EQ(plan.recommended_reducers, 16);
  ASSERT_GE(plan.gcloud.size(), 8u);
  EXPECT_NE(plan.gcloud[6].find(",replica-count=1,"), std::string::npos) << plan.gcloud[6];
  EXPECT_NE(plan.gcloud[7].find(",replica-count=4,"), std::string::npos) << plan.gcloud[7];

  // Pool 1 on other machines: the extra primary cannot move, so there is no command to give.
  std::string other = v100Pool("3");
  other.replace(other.find("n1-highmem-96"), 13, "a2-highgpu-8g");
  Plan stuck = planOf(specOf({v100Pool("2"), other, reducerPool("16")}));
  EXPECT_FALSE(ruleNamed(stuck, "primary-pool").pass);
  EXPECT_TRUE(stuck.gcloud.empty());
  EXPECT_EQ(stuck.planned.pools[0].replica_count, 2);
}

TEST(PlanModel, ReducerPoolWithGpusFails) {
  Plan plan = planOf(specOf(
      {v100Pool("1"), v100Pool("4"),
       reducerPool("16", R"(, "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1)")}));
  EXPECT_FALSE(plan.ok());
  const Rule& rule = ruleNamed(plan, "reducers-cpu-only");
  EXPECT_FALSE(rule.pass);
  EXPECT_NE(rule.detail.find("NVIDIA_TESLA_T4"), std::string::npos) << rule.detail;
  EXPECT_TRUE(ruleNamed(plan, "primary-pool").pass);
  EXPECT_FALSE(plan.planned.pools[2].hasAccelerators());  // the planned pool drops them
}

TEST(PlanModel, ReducerBandwidthTooLowFails) {
  Plan plan = planOf(specOf({v100Pool("1"), v100Pool("4"), reducerPool("8")}));
  EXPECT_FALSE(plan.ok());
  const Rule& rule = ruleNamed(plan, "reducer-bandwidth");
  EXPECT_FALSE(rule.pass);
  EXPECT_NE(rule.detail.find("256 Gbps < 500 Gbps"), std::string::npos) << rule.detail;
  EXPECT_NE(rule.detail.find("use 16 x n1-highcpu-16"), std::string::npos) << rule.detail;
  EXPECT_EQ(plan.planned.pools[2].replica_count, 16);
  // No reducer pool at all fails the same rule.
  Plan none = planOf(specOf({v100Pool("1"), v100Pool("4")}));
  EXPECT_FALSE(ruleNamed(none, "reducer-bandwidth").pass);
  EXPECT_TRUE(ruleNamed(none, "reducers-cpu-only").pass);
  EXPECT_EQ(none.recommended_reducers, 16);
}

TEST(PlanModel, EmptyPoolsAreSkipped) {
  // Two hosts in pool 1 and no pool 0 entry but a skipped pool 2: gcloud gets the reducers.
  Plan plan = planOf(specOf({v100Pool("1"), v100Pool("1"), "{}", evaluatorPool("1")}));
  EXPECT_FALSE(plan.input.pools[2].present);
  EXPECT_EQ(plan.recommended_reducers, 7);  // ceil(200 / 32)
  ASSERT_GE(plan.gcloud.size(), 10u);
  EXPECT_EQ(plan.gcloud[8].rfind("--worker-pool-spec=machine-type=n1-highcpu-16,", 0), 0u)
      << plan.gcloud[8];
  EXPECT_EQ(plan.gcloud[9].rfind("--worker-pool-spec=machine-type=n1-highcpu-8,", 0), 0u)
      << plan.gcloud[9];
  // An empty pool 0 fails the primary rule and leaves no gcloud command.
  Plan headless = planOf(specOf({"{}", v100Pool("4"), reducerPool("13")}));
  EXPECT_FALSE(ruleNamed(headless, "primary-pool").pass);
  EXPECT_TRUE(headless.gcloud.empty());
}

TEST(PlanModel, OneHostFailsCollnetHostsAndGetsNoReducers) {
  // One GPU host: CollNet has no network reduction to do, so no reducers are recommended.
  Plan plan = planOf(specOf({v100Pool("1"), "{}", reducerPool("4"), evaluatorPool("1")}));
  EXPECT_FALSE(plan.ok());
  const Rule& rule = ruleNamed(plan, "collnet-hosts");
  EXPECT_FALSE(rule.pass);
  EXPECT_EQ(rule.detail,
            "pools 0 and 1 hold 1 host: CollNet needs two or more hosts (within one host NCCL "
            "reduces without the network, so reducers would sit idle); add hosts in pool 1, or "
            "run without a reducer pool");
  EXPECT_EQ(plan.recommended_reducers, 0);
  EXPECT_FALSE(plan.planned.pools[2].present);
  // The planned job skips pools 1 and 2 with empty specs and keeps the evaluator.
  ASSERT_EQ(plan.gcloud.size(), 12u);
  EXPECT_EQ(plan.gcloud[7], "--worker-pool-spec=");
  EXPECT_EQ(plan.gcloud[8], "--worker-pool-spec=");
  EXPECT_NE(renderText(plan).find("Recommended reducers: none"), std::string::npos);
  json doc = json::parse(renderJson(plan));
  EXPECT_EQ(doc["recommendedReducers"], 0);

  // Two hosts pass, in one pool or across pools 0 and 1.
  EXPECT_TRUE(
      ruleNamed(planOf(specOf({v100Pool("1"), v100Pool("1"), reducerPool("7")})), "collnet-hosts")
          .pass);
  EXPECT_FALSE(ruleNamed(planOf(specOf({v100Pool("1"), v100Pool("0")})), "collnet-hosts").pass);
}

TEST(PlanModel, VertexReductionServerImageFails) {
  const std::string vertex =
      "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest";
  std::string pool = reducerPool("16");
  pool.replace(pool.find("gcr.io/p/tally-reducer"), 22, vertex);
  Plan plan = planOf(specOf({v100Pool("1"), v100Pool("4"), pool}));
  EXPECT_FALSE(plan.ok());
  const Rule& rule = ruleNamed(plan, "reducer-image");
  EXPECT_FALSE(rule.pass);
  EXPECT_EQ(rule.detail, "pool 2's image " + vertex +
                             " is Vertex AI's own Reduction Server, a closed reducer that speaks "
                             "neither Tally's protocol nor has `tally launch`; use the Tally "
                             "reducer image (built from docker/reducer.Dockerfile) with "
                             "--reducer-image or containerSpec.imageUri");
  // The planned command does not run `tally launch` in Vertex's image.
  EXPECT_EQ(plan.planned.pools[2].image_uri, kReducerImagePlaceholder);
  for (const auto& word : plan.gcloud) EXPECT_EQ(word.find("reductionserver"), std::string::npos);

  // --reducer-image replaces it, and the rule passes.
  PlanOptions options;
  options.reducer_image = "gcr.io/p/tally-reducer:1";
  Plan fixed = planOf(specOf({v100Pool("1"), v100Pool("4"), pool}), options);
  EXPECT_TRUE(ruleNamed(fixed, "reducer-image").pass);
  EXPECT_EQ(fixed.planned.pools[2].image_uri, "gcr.io/p/tally-reducer:1");
}

TEST(PlanModel, ReducerUnderSixteenVcpusFails) {
  std::string small = reducerPool("32");
  small.replace(small.find("n1-highcpu-16"), 13, "n1-highcpu-8");
  Plan plan = planOf(specOf({v100Pool("1"), v100Pool("4"), small}));
  const Rule& rule = ruleNamed(plan, "reducer-vcpus");
  EXPECT_FALSE(rule.pass);
  EXPECT_EQ(rule.detail,
            "n1-highcpu-8 has 8 vCPUs; a reducer needs at least 16 (Vertex AI's reduction-server "
            "guidance), e.g. n1-highcpu-16");
  EXPECT_TRUE(ruleNamed(plan, "reducer-bandwidth").pass);  // 32 x 16 = 512 >= 500
  EXPECT_FALSE(plan.ok());

  // The machine asked for with --reducer-machine is checked too; 16 vCPUs and more pass.
  PlanOptions options;
  options.reducer_machine = "n2-highcpu-8";
  EXPECT_FALSE(
      ruleNamed(planOf(specOf({v100Pool("1"), v100Pool("4")}), options), "reducer-vcpus").pass);
  options.reducer_machine = "n2-highcpu-32";
  Rule big = ruleNamed(planOf(specOf({v100Pool("1"), v100Pool("4")}), options), "reducer-vcpus");
  EXPECT_TRUE(big.pass);
  EXPECT_EQ(big.detail, "n2-highcpu-32 has 32 vCPUs (at least 16)");
  // A GPU machine type as a reducer fails with the reason.
  options.reducer_machine = "a2-highgpu-1g";
  options.bandwidth["a2-highgpu-1g"] = 24;
  Rule gpu = ruleNamed(planOf(specOf({v100Pool("1"), v100Pool("4")}), options), "reducer-vcpus");
  EXPECT_FALSE(gpu.pass);
  EXPECT_NE(gpu.detail.find("a2-highgpu-1g comes with 1 GPUs"), std::string::npos) << gpu.detail;
}

TEST(PlanModel, MoreThanOneEvaluatorWarns) {
  Plan plan = planOf(specOf({v100Pool("1"), v100Pool("4"), reducerPool("16"), evaluatorPool("2")}));
  const Rule& rule = ruleNamed(plan, "evaluators");
  EXPECT_TRUE(rule.pass);
  EXPECT_TRUE(rule.warn);
  EXPECT_EQ(rule.detail,
            "pool 3 has replicaCount 2: TensorFlow runs one evaluator, so the others repeat its "
            "work; set it to 1 (pool 3 never joins the all-reduce, so Tally is not affected)");
  EXPECT_TRUE(plan.ok());
  EXPECT_FALSE(ruleNamed(planOf(specOf({v100Pool("1"), v100Pool("4"), reducerPool("16"),
                                        evaluatorPool("1")})),
                         "evaluators")
                   .warn);
}

TEST(PlanModel, ReplicaCountIsANumberOrAString) {
  JobSpec as_number, as_string;
  ASSERT_TRUE(parseJobSpec(specOf({v100Pool("1"), v100Pool("4")}), &as_number).isOk());
  ASSERT_TRUE(parseJobSpec(specOf({v100Pool("\"1\""), v100Pool("\"4\"")}), &as_string).isOk());
  EXPECT_EQ(as_number.pools[1].replica_count, 4);
  EXPECT_EQ(as_string.pools[1].replica_count, 4);
  EXPECT_EQ(as_string.pools[0].accelerator_count, 8);
}

TEST(PlanModel, MalformedSpecNamesTheField) {
  struct Case {
    std::string text;
    std::string field;
  } cases[] = {
      {"{\"workerPoolSpecs\": [", "not valid JSON"},
      {"[]", "(top level): expected an object"},
      {"{}", "workerPoolSpecs: missing"},
      {"{\"workerPoolSpecs\": {}}", "workerPoolSpecs: expected an array of 1 to 4 pools"},
      {specOf({"{}", "{}", "{}", "{}", "{}"}), "workerPoolSpecs: expected an array of 1 to 4"},
      {specOf({"3"}), "workerPoolSpecs[0]: expected an object"},
      {specOf({R"({"replicaCount": 1})"}), "workerPoolSpecs[0].machineSpec: missing"},
      {specOf({R"({"machineSpec": {"machineType": 16}})"}),
       "workerPoolSpecs[0].machineSpec.machineType: expected a string, got 16"},
      {specOf({v100Pool("1"), v100Pool("\"two\"")}),
       "workerPoolSpecs[1].replicaCount: expected a non-negative integer"},
      {specOf({v100Pool("-1")}), "workerPoolSpecs[0].replicaCount: expected a non-negative"},
      {specOf({v100Pool("1.5")}), "workerPoolSpecs[0].replicaCount"},
      {specOf({R"({"machineSpec": {"machineType": "n1-highcpu-16", "acceleratorCount": "x"}})"}),
       "workerPoolSpecs[0].machineSpec.acceleratorCount"},
      {specOf({R"({"machineSpec": {"machineType": "n1-highcpu-16"},
                   "containerSpec": {"args": ["ok", 7]}})"}),
       "workerPoolSpecs[0].containerSpec.args[1]: expected a string, got 7"},
      {R"({"displayName": "j", "jobSpec": {"workerPoolSpecs": [)" + v100Pool("1") + ", " +
           v100Pool("true") + "]}}",
       "jobSpec.workerPoolSpecs[1].replicaCount"},
  };
  for (const auto& c : cases) {
    JobSpec job;
    job.display_name = "untouched";
    Status s = parseJobSpec(c.text, &job);
    EXPECT_FALSE(s.isOk()) << c.text;
    EXPECT_NE(s.message().find(c.field), std::string::npos)
        << "want \"" << c.field << "\" in: " << s.message();
    EXPECT_EQ(job.display_name, "untouched");
  }
}

TEST(PlanModel, JsonWithCommentsParses) {
  // Vertex AI's examples annotate their JSON with // lines.
  std::string text = "// a reduction-server job\n{\"workerPoolSpecs\": [ /* primary */ " +
                     v100Pool("1") + ",\n  // workers\n  " + v100Pool("4") + ", " +
                     reducerPool("16") + "]}\n";
  Plan plan = planOf(text);
  EXPECT_EQ(plan.input.pools[1].replica_count, 4);
  EXPECT_EQ(plan.recommended_reducers, 16);
}

// What `gcloud ai custom-jobs create --config` takes: a CustomJobSpec in YAML.
constexpr const char* kYamlSpec = R"(# the five-host job
workerPoolSpecs:
  - machineSpec:
      machineType: n1-highmem-96
      acceleratorType: NVIDIA_TESLA_V100
      acceleratorCount: 8
    replicaCount: 1
    containerSpec:
      imageUri: gcr.io/p/train
      command: [tally, launch, --]
      args: ["python", "train.py", "--epochs", "90"]
  - machineSpec: {machineType: n1-highmem-96, acceleratorType: NVIDIA_TESLA_V100, acceleratorCount: 8}
    replicaCount: "4"
    containerSpec: {imageUri: gcr.io/p/train}
  - machineSpec:
      machineType: n1-highcpu-16
    replicaCount: 16
    containerSpec:
      imageUri: gcr.io/p/tally-reducer
)";

TEST(PlanModel, YamlSpecParsesLikeJson) {
  Plan plan = planOf(kYamlSpec);
  EXPECT_EQ(plan.input.pools[0].accelerator_count, 8);
  EXPECT_EQ(plan.input.pools[1].replica_count, 4);  // a quoted number reads as REST's string
  EXPECT_EQ(plan.input.pools[2].machine_type, "n1-highcpu-16");
  EXPECT_EQ(plan.recommended_reducers, 16);
  EXPECT_TRUE(plan.ok());
  EXPECT_EQ(plan.train_command, (std::vector<std::string>{"python", "train.py", "--epochs", "90"}));

  // A full CustomJob in YAML gives its displayName too.
  Plan full = planOf(
      "displayName: resnet\njobSpec:\n  workerPoolSpecs:\n"
      "    - machineSpec: {machineType: n1-highcpu-16}\n");
  EXPECT_EQ(full.display_name, "resnet");
  EXPECT_EQ(full.input.pools[0].machine_type, "n1-highcpu-16");
}

TEST(PlanModel, YamlErrorsNameTheLineOrTheField) {
  struct Case {
    std::string text;
    std::string error;
  } cases[] = {
      {"workerPoolSpecs:\n  - machineSpec: [a,\n", "not valid YAML: line "},
      // The same field checks as JSON: an unquoted 90 is a number, not a string.
      {"workerPoolSpecs:\n  - machineSpec: {machineType: n1-highcpu-16}\n"
       "    containerSpec: {args: [--epochs, 90]}\n",
       "workerPoolSpecs[0].containerSpec.args[1]: expected a string, got 90"},
      {"workerPoolSpecs:\n  - machineSpec: {machineType: n1-highcpu-16}\n    replicaCount: two\n",
       "workerPoolSpecs[0].replicaCount: expected a non-negative integer"},
      {"just text", "(top level): expected an object"},
  };
  for (const auto& c : cases) {
    JobSpec job;
    Status s = parseJobSpec(c.text, &job);
    EXPECT_FALSE(s.isOk()) << c.text;
    EXPECT_NE(s.message().find(c.error), std::string::npos)
        << "want \"" << c.error << "\" in: " << s.message();
  }
}

TEST(PlanModel, UnknownKeysAreErrorsWithTheNearestKnownKey) {
  struct Case {
    std::string text;
    std::string error;
  } cases[] = {
      {specOf({R"({"machineSpec": {"machineType": "n1-highcpu-16"}, "replicaCont": 4})"}),
       "workerPoolSpecs[0].replicaCont: unknown key in a WorkerPoolSpec (did you mean "
       "replicaCount?)"},
      {specOf({R"({"machineSpec": {"machineTyp": "n1-highcpu-16"}})"}),
       "workerPoolSpecs[0].machineSpec.machineTyp: unknown key in a MachineSpec (did you mean "
       "machineType?)"},
      {specOf({R"({"machineSpec": {"machineType": "n1-highcpu-16"},
                   "containerSpec": {"imageURI": "x"}})"}),
       "workerPoolSpecs[0].containerSpec.imageURI: unknown key in a ContainerSpec (did you mean "
       "imageUri?)"},
      {specOf({R"({"machineSpec": {"machineType": "n1-highcpu-16"}, "replica_count": 4})"}),
       "(did you mean replicaCount?)"},
      {R"({"workerPoolSpec": []})",
       "workerPoolSpec: unknown key in a CustomJobSpec (did you mean workerPoolSpecs?)"},
      {R"({"displayname": "j", "jobSpec": {"workerPoolSpecs": [{}]}})",
       "displayname: unknown key in a CustomJob (did you mean displayName?)"},
      {R"({"jobSpec": {"workerPoolSpecs": [{}], "serviceAcount": "a"}})",
       "jobSpec.serviceAcount: unknown key in a CustomJobSpec (did you mean serviceAccount?)"},
      // Nothing near: the known keys are listed instead.
      {specOf({R"({"machineSpec": {"machineType": "n1-highcpu-16"}, "colour": "red"})"}),
       "workerPoolSpecs[0].colour: unknown key in a WorkerPoolSpec (known keys: containerSpec "},
  };
  for (const auto& c : cases) {
    JobSpec job;
    Status s = parseJobSpec(c.text, &job);
    EXPECT_FALSE(s.isOk()) << c.text;
    EXPECT_NE(s.message().find(c.error), std::string::npos)
        << "want \"" << c.error << "\" in: " << s.message();
  }
}

TEST(PlanModel, KnownVertexKeysTallyDoesNotReadAreAccepted) {
  std::string pool = R"({"machineSpec": {"machineType": "n1-highcpu-16", "reservationAffinity": {}},
      "replicaCount": 1, "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
      "nfsMounts": [], "pythonPackageSpec": {},
      "containerSpec": {"imageUri": "i", "command": ["c"], "args": ["a"],
                        "env": [{"name": "A", "value": "1"}]}})";
  std::string text = R"({"displayName": "j", "labels": {"team": "ml"}, "jobSpec": {
      "workerPoolSpecs": [)" +
                     pool + R"(], "scheduling": {"timeout": "3600s"},
      "serviceAccount": "sa@p.iam.gserviceaccount.com", "network": "projects/1/global/networks/n",
      "baseOutputDirectory": {"outputUriPrefix": "gs://b/o"}, "enableWebAccess": false}})";
  JobSpec job;
  Status s = parseJobSpec(text, &job);
  EXPECT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(job.pools[0].machine_type, "n1-highcpu-16");
  EXPECT_EQ(nearestKey("env", SpecObject::kContainerSpec), "env");
  EXPECT_EQ(nearestKey("xyz", SpecObject::kContainerSpec), "");
}

TEST(PlanModel, FullCustomJobGivesTheDisplayName) {
  Plan plan = planOf(R"({"displayName": "resnet", "jobSpec": )" +
                     specOf({v100Pool("1"), v100Pool("4"), reducerPool("16")}) + "}");
  EXPECT_EQ(plan.display_name, "resnet");
  EXPECT_TRUE(plan.ok());
}

TEST(PlanModel, UnknownEgressAsksForBandwidth) {
  JobSpec job;
  ASSERT_TRUE(parseJobSpec(specOf({R"({"machineSpec": {"machineType": "c2-standard-60"}})",
                                   R"({"machineSpec": {"machineType": "c2-standard-60"}})"}),
                           &job)
                  .isOk());
  Plan plan;
  Status s = makePlan(job, {}, &plan);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(),
            "no egress bandwidth known for c2-standard-60: pass --bandwidth c2-standard-60=GBPS "
            "with its published maximum egress in Gbps");

  PlanOptions options;
  ASSERT_TRUE(parseBandwidthOverride("c2-standard-60=64", &options.bandwidth).isOk());
  ASSERT_TRUE(makePlan(job, options, &plan).isOk());
  EXPECT_DOUBLE_EQ(plan.worker_gbps, 128);
  EXPECT_EQ(plan.recommended_reducers, 4);
}

TEST(PlanModel, MadeUpMachineTypesAreRefusedEvenWithBandwidth) {
  const std::string families =
      "expected a predefined Compute Engine machine type of a known family: n1, n2, n2d, e2, c2, "
      "c2d, c3, g2 (<family>-<type>-<vCPUs>, e.g. n1-highcpu-16); a2, a3 "
      "(<family>-<type>-<GPUs>g, e.g. a2-highgpu-8g)";
  for (const char* machine : {"z9-mystery-8", "n1-superfast-16", "n1-highcpu-7", "n1-highcpu-016",
                              "a2-highgpu-3g", "a2-highgpu-8", "e2-standard-64", "c2-standard-"}) {
    // In a spec, the field is named.
    JobSpec job;
    Status s = parseJobSpec(
        specOf({std::string(R"({"machineSpec": {"machineType": ")") + machine + "\"}}"}), &job);
    ASSERT_FALSE(s.isOk()) << machine;
    EXPECT_EQ(s.message(), "workerPoolSpecs[0].machineSpec.machineType: unknown machine type " +
                               std::string(machine) + ": " + families);
    // Given to makePlan some other way, even with a figure for it.
    job = JobSpec{};
    job.pools[0].present = true;
    job.pools[0].machine_type = machine;
    job.pools[0].replica_count = 1;
    PlanOptions options;
    ASSERT_TRUE(parseBandwidthOverride(std::string(machine) + "=64", &options.bandwidth).isOk());
    Plan plan;
    s = makePlan(job, options, &plan);
    ASSERT_FALSE(s.isOk()) << machine;
    EXPECT_EQ(s.message(), "unknown machine type " + std::string(machine) + ": " + families);
  }
  // The reducer machine asked for and an evaluator's machine are checked too.
  PlanOptions options;
  options.reducer_machine = "n1-highcpu-17";
  Plan plan;
  JobSpec job;
  ASSERT_TRUE(parseJobSpec(specOf({v100Pool("1"), v100Pool("1")}), &job).isOk());
  EXPECT_FALSE(makePlan(job, options, &plan).isOk());
  Status s = parseJobSpec(specOf({v100Pool("1"), v100Pool("1"), reducerPool("8"),
                                  R"({"machineSpec": {"machineType": "made-up-4"}})"}),
                          &job);
  EXPECT_NE(s.message().find("workerPoolSpecs[3].machineSpec.machineType: unknown machine type "
                             "made-up-4"),
            std::string::npos)
      << s.message();

  MachineShape shape;
  ASSERT_TRUE(parseMachineType("c2d-highcpu-112", &shape).isOk());
  EXPECT_EQ(shape.family, "c2d");
  EXPECT_EQ(shape.vcpus, 112);
  ASSERT_TRUE(parseMachineType("a2-megagpu-16g", &shape).isOk());
  EXPECT_EQ(shape.gpus, 16);
  EXPECT_EQ(shape.vcpus, 0);
}

TEST(PlanModel, BandwidthOverrideWinsOverTheTable) {
  PlanOptions options;
  ASSERT_TRUE(parseBandwidthOverride("n1-highcpu-16=16", &options.bandwidth).isOk());
  Plan plan = planOf(specOf({v100Pool("1"), v100Pool("4"), reducerPool("16")}), options);
  EXPECT_DOUBLE_EQ(plan.reducer_machine_egress.gbps, 16);
  EXPECT_EQ(plan.recommended_reducers, 32);                 // ceil(500 / 16)
  EXPECT_FALSE(ruleNamed(plan, "reducer-bandwidth").pass);  // 16 x 16 = 256 < 500
  EXPECT_NE(plan.reducer_machine_egress.source.find("--bandwidth"), std::string::npos);

  // A different reducer machine changes the recommendation.
  PlanOptions n2;
  n2.reducer_machine = "n2-highcpu-16";
  n2.bandwidth["n2-highcpu-16"] = 20;
  EXPECT_EQ(planOf(specOf({v100Pool("1"), v100Pool("4")}), n2).recommended_reducers, 25);

  BandwidthOverrides overrides;
  for (const char* bad :
       {"n1-highcpu-16", "n1-highcpu-16=", "=32", "x=abc", "x=-1", "x=0", "x=12gbps"}) {
    EXPECT_FALSE(parseBandwidthOverride(bad, &overrides).isOk()) << bad;
  }
  EXPECT_TRUE(overrides.empty());
  ASSERT_TRUE(parseBandwidthOverride("x=12.5", &overrides).isOk());
  EXPECT_DOUBLE_EQ(overrides["x"], 12.5);
}

TEST(PlanModel, Tier1RaisesEligibleMachines) {
  auto gbps = [](const std::string& machine, bool tier1, int64_t gpus = 0) {
    Egress egress;
    EgressOptions options;
    options.tier1 = tier1;
    Status s = machineEgress(machine, gpus ? "NVIDIA_TESLA_V100" : "", gpus, options, &egress);
    return s.isOk() ? egress.gbps : -1;
  };
  EXPECT_EQ(gbps("n2-highcpu-32", false), 32);
  EXPECT_EQ(gbps("n2-highcpu-32", true), 50);
  EXPECT_EQ(gbps("n2-standard-48", true), 75);
  EXPECT_EQ(gbps("n2-standard-64", true), 100);
  EXPECT_EQ(gbps("n2-standard-128", true), 100);
  EXPECT_EQ(gbps("c2-standard-30", true), 50);
  EXPECT_EQ(gbps("c2-standard-60", true), 100);
  EXPECT_EQ(gbps("c2-standard-60", false), -1);  // no default figure in the table
  EXPECT_EQ(gbps("c2d-highcpu-56", true), 50);
  EXPECT_EQ(gbps("c2d-highcpu-112", true), 100);
  EXPECT_EQ(gbps("n2d-highcpu-96", true), 100);
  EXPECT_EQ(gbps("n2-highcpu-16", true), 32);  // too small for Tier_1: the default figure
  EXPECT_EQ(gbps("n1-highcpu-96", true), 32);  // N1 has no Tier_1
  EXPECT_EQ(gbps("n1-highmem-96", true, 8), 100);

  // 5 V100 hosts (500 Gbps) over n2-highcpu-64 reducers: 32 Gbps each by default, 100 with Tier_1.
  PlanOptions options;
  options.reducer_machine = "n2-highcpu-64";
  EXPECT_EQ(planOf(specOf({v100Pool("1"), v100Pool("4")}), options).recommended_reducers, 16);
  options.tier1 = true;
  Plan plan = planOf(specOf({v100Pool("1"), v100Pool("4")}), options);
  EXPECT_EQ(plan.recommended_reducers, 5);
  EXPECT_EQ(plan.reducer_machine_egress.source, "Tier_1: n2 with 64 vCPUs");
}

TEST(PlanModel, MachineTable) {
  auto gbps = [](const std::string& machine, const std::string& type = "", int64_t count = 0) {
    Egress egress;
    Status s = machineEgress(machine, type, count, {}, &egress);
    return s.isOk() ? egress.gbps : -1;
  };
  EXPECT_EQ(gbps("n1-highcpu-16"), 32);
  EXPECT_EQ(gbps("n2-highcpu-16"), 32);
  EXPECT_EQ(gbps("n1-highcpu-8"), 16);
  EXPECT_EQ(gbps("n2-standard-48"), 32);
  EXPECT_EQ(gbps("n1-highmem-96", "NVIDIA_TESLA_V100", 8), 100);
  EXPECT_EQ(gbps("a2-highgpu-8g", "NVIDIA_TESLA_A100", 8), 100);
  EXPECT_EQ(gbps("a2-megagpu-16g", "NVIDIA_TESLA_A100", 16), 100);
  EXPECT_EQ(gbps("n1-highmem-96", "NVIDIA_TESLA_V100", 4), 100);  // 4 V100s from 48 vCPUs
  EXPECT_EQ(gbps("n1-highmem-96", "NVIDIA_TESLA_V100", 3), -1);   // no such row
  EXPECT_EQ(gbps("n1-standard-4"), -1);                           // below the per-vCPU rule
  EXPECT_EQ(gbps("n1-highcpu-7"), -1);                            // not a predefined shape
  EXPECT_EQ(gbps("n1-highcpu-016"), -1);
  EXPECT_EQ(gbps("e2-standard-16"), -1);
}

TEST(PlanModel, GcloudCommandForTheSixteenReducerJob) {
  Plan plan = planOf(specOf({v100Pool("1"), v100Pool("4"), reducerPool("16")}));
  const std::string host =
      "machine-type=n1-highmem-96,replica-count=REPLICAS,accelerator-type=NVIDIA_TESLA_V100,"
      "accelerator-count=8,container-image-uri=gcr.io/p/train";
  auto hostSpec = [&](const char* replicas) {
    std::string spec = host;
    spec.replace(spec.find("REPLICAS"), 8, replicas);
    return "--worker-pool-spec=" + spec;
  };
  std::vector<std::string> want = {"gcloud",
                                   "ai",
                                   "custom-jobs",
                                   "create",
                                   "--region=us-central1",
                                   "--display-name=tally-job",
                                   hostSpec("1"),
                                   hostSpec("4"),
                                   "--worker-pool-spec=machine-type=n1-highcpu-16,replica-count=16,"
                                   "container-image-uri=gcr.io/p/tally-reducer",
                                   "--command=tally,launch,--",
                                   "--args=python,train.py"};
  EXPECT_EQ(plan.gcloud, want);
  EXPECT_EQ(plan.train_command, (std::vector<std::string>{"python", "train.py"}));
  std::string shell = renderShellCommand(plan.gcloud);
  EXPECT_EQ(shell.rfind("gcloud ai custom-jobs create \\\n    --region=us-central1 \\\n", 0), 0u)
      << shell;
}

TEST(PlanModel, GcloudListsWithCommasUseAnotherDelimiter) {
  PlanOptions options;
  options.train_command = {"python", "train.py", "--layers=1,2"};
  options.reducer_image = "gcr.io/p/r";
  Plan plan = planOf(specOf({v100Pool("1"), v100Pool("1")}), options);
  EXPECT_EQ(plan.gcloud.back(), "--args=^:^python:train.py:--layers=1,2");
  EXPECT_EQ(plan.planned.pools[2].image_uri, "gcr.io/p/r");
  std::string shell = renderShellCommand({"gcloud", "--args=it's"});
  EXPECT_EQ(shell, "gcloud \\\n    '--args=it'\\''s'\n");
}

TEST(PlanModel, JsonOutputParsesAndHasTheNumbers) {
  Plan plan = planOf(specOf({v100Pool("1"), v100Pool("7"), reducerPool("\"20\"")}));
  json doc = json::parse(renderJson(plan));
  EXPECT_EQ(doc["recommendedReducers"], 25);
  EXPECT_EQ(doc["workerEgressGbps"], 800.0);
  EXPECT_EQ(doc["reducerPoolEgressGbps"], 640.0);
  EXPECT_EQ(doc["reducerMachineEgressGbps"], 32.0);
  EXPECT_EQ(doc["ok"], false);
  ASSERT_EQ(doc["rules"].size(), 9u);
  EXPECT_EQ(doc["rules"][1]["name"], "worker-gpus");
  EXPECT_EQ(doc["rules"][2]["name"], "worker-image");
  EXPECT_EQ(doc["rules"][5]["name"], "collnet-hosts");
  EXPECT_EQ(doc["rules"][8]["name"], "evaluators");
  EXPECT_EQ(doc["rules"][4]["name"], "reducer-bandwidth");
  EXPECT_EQ(doc["rules"][4]["pass"], false);
  EXPECT_EQ(doc["rules"][4]["warn"], false);
  EXPECT_EQ(doc["pools"][1]["replicaCount"], 7);
  EXPECT_EQ(doc["pools"][1]["egressGbpsTotal"], 700.0);
  EXPECT_EQ(doc["pools"][3]["present"], false);
  EXPECT_EQ(doc["fusion"]["HOROVOD_FUSION_THRESHOLD"], 134217728);
  EXPECT_EQ(doc["fusion"]["ddpBucketCapMb"], 64);
  const json& planned = doc["customJobSpec"]["workerPoolSpecs"];
  ASSERT_EQ(planned.size(), 3u);
  EXPECT_EQ(planned[2]["replicaCount"], "25");
  EXPECT_EQ(planned[2]["containerSpec"]["command"], json({"tally", "launch", "--"}));
  EXPECT_EQ(planned[0]["containerSpec"]["args"], json({"python", "train.py"}));
  EXPECT_EQ(doc["gcloud"]["argv"][8],
            "--worker-pool-spec=machine-type=n1-highcpu-16,replica-count=25,"
            "container-image-uri=gcr.io/p/tally-reducer");
}

// --- the built binary ---------------------------------------------------------------------

using TallyRun = test::CommandRun;

std::string writeTemp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/tally_plan_" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(PlanCommand, ExampleSpecPasses) {
  TallyRun run = runTally(std::string("--spec '") + TALLY_SOURCE_DIR +
                          "/examples/customjob-reduction-server.json'");
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("PASS  reducer-bandwidth"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Recommended reducers: 16 x n1-highcpu-16"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("gcloud ai custom-jobs create"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("HOROVOD_FUSION_THRESHOLD=134217728"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("bucket_cap_mb=64"), std::string::npos) << run.out;
}

TEST(PlanCommand, YamlSpecFileRuns) {
  std::string path = writeTemp("job.yaml", kYamlSpec);
  TallyRun run = runTally("--spec '" + path + "'");
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("Recommended reducers: 16 x n1-highcpu-16"), std::string::npos) << run.out;
  std::remove(path.c_str());
}

TEST(PlanCommand, TwoPrimaryReplicasExitOne) {
  std::string path =
      writeTemp("two_primaries.json", specOf({v100Pool("2"), v100Pool("3"), reducerPool("16")}));
  TallyRun run = runTally("--spec '" + path + "'");
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_NE(run.out.find("FAIL  primary-pool"), std::string::npos) << run.out;
  std::remove(path.c_str());
}

TEST(PlanCommand, JobsThatCannotWorkExitOne) {
  TallyRun one = runTally("--primary-machine n1-highmem-96 --accelerator NVIDIA_TESLA_V100:8");
  EXPECT_EQ(one.status, 1) << one.out;
  EXPECT_NE(one.out.find("FAIL  collnet-hosts"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("Recommended reducers: none"), std::string::npos) << one.out;
  EXPECT_EQ(one.out.find("n1-highcpu-16,replica-count"), std::string::npos) << one.out;

  TallyRun vertex = runTally(
      "--primary-machine n1-highmem-96 --accelerator NVIDIA_TESLA_V100:8 --workers 4 "
      "--reducer-image us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest");
  EXPECT_EQ(vertex.status, 1) << vertex.out;
  EXPECT_NE(vertex.out.find("FAIL  reducer-image"), std::string::npos) << vertex.out;

  TallyRun small = runTally(
      "--primary-machine n1-highmem-96 --accelerator NVIDIA_TESLA_V100:8 --workers 4 "
      "--reducer-machine n1-highcpu-8");
  EXPECT_EQ(small.status, 1) << small.out;
  EXPECT_NE(small.out.find("FAIL  reducer-vcpus      n1-highcpu-8 has 8 vCPUs"), std::string::npos)
      << small.out;
}

TEST(PlanCommand, BadInputExitsTwo) {
  TallyRun missing = runTally("--spec /nonexistent/tally-plan.json");
  EXPECT_EQ(missing.status, 2) << missing.out;
  EXPECT_NE(missing.out.find("tally plan: /nonexistent/tally-plan.json: cannot read the file: " +
                             std::string(std::strerror(ENOENT))),
            std::string::npos)
      << missing.out;
  // A directory is not "not valid JSON": the reason is the one strerror gives.
  TallyRun dir = runTally("--spec /tmp");
  EXPECT_EQ(dir.status, 2) << dir.out;
  EXPECT_NE(
      dir.out.find("tally plan: /tmp: cannot read the file: " + std::string(std::strerror(EISDIR))),
      std::string::npos)
      << dir.out;
  EXPECT_EQ(dir.out.find("JSON"), std::string::npos) << dir.out;

  std::string path = writeTemp("bad_count.json", specOf({v100Pool("\"one\"")}));
  TallyRun bad = runTally("--spec '" + path + "'");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("workerPoolSpecs[0].replicaCount"), std::string::npos) << bad.out;
  std::remove(path.c_str());

  TallyRun both = runTally("--spec x.json --workers 3");
  EXPECT_EQ(both.status, 2) << both.out;
  TallyRun workers = runTally("--primary-machine n1-highcpu-16 --workers three");
  EXPECT_EQ(workers.status, 2) << workers.out;
  EXPECT_NE(workers.out.find("--workers"), std::string::npos) << workers.out;

  TallyRun unknown = runTally("--primary-machine c2-standard-60");
  EXPECT_EQ(unknown.status, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("--bandwidth c2-standard-60=GBPS"), std::string::npos) << unknown.out;
  TallyRun made_up = runTally("--primary-machine z9-mystery-8 --bandwidth z9-mystery-8=64");
  EXPECT_EQ(made_up.status, 2) << made_up.out;
  EXPECT_NE(made_up.out.find("unknown machine type z9-mystery-8: expected a predefined Compute "
                             "Engine machine type of a known family: n1, n2"),
            std::string::npos)
      << made_up.out;
}

TEST(PlanCommand, FlagsAndJson) {
  TallyRun run = runTally(
      "--primary-machine n1-highmem-96 --accelerator NVIDIA_TESLA_V100:8 --workers 7 --json");
  ASSERT_EQ(run.status, 0) << run.out;
  json doc = json::parse(run.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << run.out;
  EXPECT_EQ(doc["recommendedReducers"], 25);
  EXPECT_EQ(doc["pools"][2]["replicaCount"], 25);
  EXPECT_EQ(doc["ok"], true);

  TallyRun low = runTally(
      "--primary-machine n1-highmem-96 --accelerator NVIDIA_TESLA_V100:8 --workers 4 "
      "--reducers 8");
  EXPECT_EQ(low.status, 1) << low.out;  // 8 x 32 = 256 < 500
  EXPECT_NE(low.out.find("FAIL  reducer-bandwidth"), std::string::npos) << low.out;

  // Repeated --bandwidth: 5 x 50 = 250 Gbps of hosts, 8 x 64 = 512 of reducers, 4 recommended.
  TallyRun overridden = runTally(
      "--primary-machine n1-highmem-96 --accelerator NVIDIA_TESLA_V100:8 --workers 4 "
      "--reducers 8 --bandwidth n1-highcpu-16=64 --bandwidth n1-highmem-96=50 --json");
  EXPECT_EQ(overridden.status, 0) << overridden.out;
  json over = json::parse(overridden.out, nullptr, false);
  ASSERT_FALSE(over.is_discarded()) << overridden.out;
  EXPECT_EQ(over["workerEgressGbps"], 250.0);
  EXPECT_EQ(over["reducerPoolEgressGbps"], 512.0);
  EXPECT_EQ(over["recommendedReducers"], 4);

  TallyRun tier1 = runTally(
      "--primary-machine n1-highmem-96 --accelerator NVIDIA_TESLA_V100:8 --workers 4 "
      "--reducer-machine n2-highcpu-64 --tier1 --json");
  json t1 = json::parse(tier1.out, nullptr, false);
  ASSERT_FALSE(t1.is_discarded()) << tier1.out;
  EXPECT_EQ(t1["reducerMachineEgressGbps"], 100.0);
  EXPECT_EQ(t1["recommendedReducers"], 5);
  EXPECT_EQ(t1["tier1"], true);
}

}  // namespace
}  // namespace tally::plan
