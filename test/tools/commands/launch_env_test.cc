// SPDX-License-Identifier: Apache-2.0
// tally launch under a Kubernetes JobSet and a Slurm heterogeneous job (launch_env.h): every pod
// or node gets the role, the command and the variables it would get under a CLUSTER_SPEC of the
// same hosts, and a malformed environment is a clear error.
#include "tools/commands/launch_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tools/commands/launch_plan.h"

namespace tally::commands {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Env = std::map<std::string, std::string>;

constexpr const char* kPlugin = "/opt/tally/lib/libnccl-net-tally.so";
constexpr const char* kReducer = "/opt/tally/bin/tally-reducer";
const std::vector<std::string> kCommand = {"python", "train.py"};

LaunchPlan planOf(const Env& env) {
  LaunchPlan out;
  Status st = planLaunchFromEnvironment(MapParamSource(env), kPlugin, kReducer, kCommand, &out);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return out;
}

std::string errorOf(const Env& env) {
  LaunchPlan out;
  Status st = planLaunchFromEnvironment(MapParamSource(env), kPlugin, kReducer, kCommand, &out);
  EXPECT_FALSE(st.isOk()) << "planned: " << out.summary;
  EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
  return st.message();
}

std::vector<std::string> changesOf(const LaunchPlan& p) {
  std::vector<std::string> out;
  for (const EnvChange& c : p.env) {
    out.push_back(std::to_string(static_cast<int>(c.kind)) + " " + c.name + "=" + c.value);
  }
  return out;
}

std::string quotedList(const std::vector<std::string>& hosts, size_t begin, size_t end) {
  std::string text;
  for (size_t i = begin; i < end; ++i)
    text += (text.empty() ? "\"" : ", \"") + hosts[i] + ":2222\"";
  return "[" + text + "]";
}

// The CLUSTER_SPEC of the same job: GPU host 0 is workerpool0, the others workerpool1, the
// reducers workerpool2; `host` and `reducer` pick this replica.
std::string equivalentClusterSpec(const std::vector<std::string>& gpus,
                                  const std::vector<std::string>& reducers, bool reducer,
                                  size_t index) {
  std::string type = reducer ? "workerpool2" : (index == 0 ? "workerpool0" : "workerpool1");
  size_t task_index = reducer || index == 0 ? index : index - 1;
  return R"({"cluster": {"workerpool0": )" + quotedList(gpus, 0, 1) + R"(, "workerpool1": )" +
         quotedList(gpus, 1, gpus.size()) + R"(, "workerpool2": )" +
         quotedList(reducers, 0, reducers.size()) + R"(}, "task": {"type": ")" + type +
         R"(", "index": )" + std::to_string(task_index) + "}}";
}

// Same role, same command, same variables set or kept as under the equivalent CLUSTER_SPEC. With
// `own_listen`, a reducer listens on its own address rather than on every address (Slurm).
void expectSameAsClusterSpec(const LaunchPlan& got, const std::vector<std::string>& gpus,
                             const std::vector<std::string>& reducers, bool reducer, size_t index,
                             bool own_listen = false) {
  LaunchPlan want =
      planOf({{"CLUSTER_SPEC", equivalentClusterSpec(gpus, reducers, reducer, index)}});
  if (own_listen) {
    ASSERT_EQ(want.argv.size(), 3u);
    want.argv[2] = reducers[index] + ":2222";
  }
  EXPECT_EQ(got.role, want.role) << got.summary;
  EXPECT_EQ(got.argv, want.argv) << got.summary;
  EXPECT_EQ(changesOf(got), changesOf(want)) << got.summary;
  EXPECT_TRUE(got.has_spec);
}

// --- JobSet ---------------------------------------------------------------------------------

Env jobSetEnv(const std::string& job, int pod, int workers = 3, int reducers = 2) {
  return {{"TALLY_JOBSET_NAME", "train"},
          {"TALLY_JOBSET_REPLICATED_JOB", job},
          {"TALLY_JOBSET_JOB_INDEX", "0"},
          {"TALLY_JOBSET_POD_INDEX", std::to_string(pod)},
          {"TALLY_JOBSET_WORKERS", std::to_string(workers)},
          {"TALLY_JOBSET_REDUCERS", std::to_string(reducers)},
          {"TALLY_JOBSET_SUBDOMAIN", "train"}};
}

const std::vector<std::string> kJobSetGpus = {"train-workers-0-0.train", "train-workers-0-1.train",
                                              "train-workers-0-2.train"};
const std::vector<std::string> kJobSetReducers = {"train-reducers-0-0.train",
                                                  "train-reducers-0-1.train"};

TEST(LaunchJobSet, EveryPodMatchesTheClusterSpecOfTheSameHosts) {
  for (int pod = 0; pod < 3; ++pod) {
    LaunchPlan p = planOf(jobSetEnv("workers", pod));
    expectSameAsClusterSpec(p, kJobSetGpus, kJobSetReducers, false, static_cast<size_t>(pod));
  }
  for (int pod = 0; pod < 2; ++pod) {
    LaunchPlan p = planOf(jobSetEnv("reducers", pod));
    expectSameAsClusterSpec(p, kJobSetGpus, kJobSetReducers, true, static_cast<size_t>(pod));
  }
}

TEST(LaunchJobSet, RolesAddressesAndSummary) {
  LaunchPlan primary = planOf(jobSetEnv("workers", 0));
  EXPECT_EQ(primary.role, ClusterRole::kPrimary);
  EXPECT_EQ(primary.summary,
            "primary (JobSet workers pod 0), CollNet rank 0 of 3, reducers from JobSet reducers");
  LaunchPlan worker = planOf(jobSetEnv("workers", 2));
  EXPECT_EQ(worker.role, ClusterRole::kWorker);
  EXPECT_THAT(changesOf(worker),
              ElementsAre(std::string("0 NCCL_NET_PLUGIN=") + kPlugin,
                          "0 NCCL_NET_PLUGIN_REF_COUNT=1", "0 NCCL_COLLNET_ENABLE=1",
                          "0 TALLY_REDUCERS=train-reducers-0-0.train:2222,"
                          "train-reducers-0-1.train:2222",
                          "0 MASTER_ADDR=train-workers-0-0.train", "0 MASTER_PORT=2222",
                          "0 WORLD_SIZE=3", "0 RANK=2"));
  LaunchPlan reducer = planOf(jobSetEnv("reducers", 1));
  EXPECT_EQ(reducer.role, ClusterRole::kReducer);
  EXPECT_THAT(reducer.argv, ElementsAre(kReducer, "--listen", "0.0.0.0:2222"));
  EXPECT_THAT(reducer.summary, HasSubstr("tally-reducer on train-reducers-0-1.train:2222"));
}

TEST(LaunchJobSet, CompletionIndexAndDefaultSubdomain) {
  Env env = jobSetEnv("workers", 0);
  env.erase("TALLY_JOBSET_POD_INDEX");
  env.erase("TALLY_JOBSET_SUBDOMAIN");
  env["JOB_COMPLETION_INDEX"] = "1";  // what Kubernetes sets in every Indexed Job's pods
  env["TALLY_JOBSET_NAME"] = "job7";
  LaunchPlan p = planOf(env);
  EXPECT_EQ(p.role, ClusterRole::kWorker);
  EXPECT_THAT(changesOf(p), testing::Contains("0 RANK=1"));
  EXPECT_THAT(changesOf(p), testing::Contains("0 MASTER_ADDR=job7-workers-0-0.job7"));
}

TEST(LaunchJobSet, NoReducersWarns) {
  LaunchPlan p = planOf(jobSetEnv("workers", 1, 2, 0));
  EXPECT_THAT(p.summary, HasSubstr("no reducers"));
  ASSERT_FALSE(p.notes.empty());
  EXPECT_THAT(p.notes[0], HasSubstr("TALLY_REDUCERS and the JobSet job's reducers are both empty"));
}

TEST(LaunchJobSet, TallyReducersWins) {
  Env env = jobSetEnv("workers", 1);
  env["TALLY_REDUCERS"] = "r:1";
  LaunchPlan p = planOf(env);
  EXPECT_THAT(p.summary, HasSubstr("reducers from TALLY_REDUCERS"));
  EXPECT_THAT(changesOf(p), testing::Contains("1 TALLY_REDUCERS=r:1"));
}

TEST(LaunchJobSet, ClusterSpecWinsOverJobSet) {
  Env env = jobSetEnv("workers", 1);
  env["CLUSTER_SPEC"] = equivalentClusterSpec({"a", "b"}, {"r"}, false, 1);
  EXPECT_THAT(planOf(env).summary, HasSubstr("CLUSTER_SPEC workerpool1 index 0"));
}

TEST(LaunchJobSet, MalformedEnvironmentIsAClearError) {
  auto with = [](const std::string& name, const std::string& value) {
    Env env = jobSetEnv("workers", 1);
    if (value == "<unset>") {
      env.erase(name);
    } else {
      env[name] = value;
    }
    return env;
  };
  EXPECT_THAT(errorOf(with("TALLY_JOBSET_NAME", "Train_1")), HasSubstr("expected a JobSet name"));
  EXPECT_THAT(errorOf(with("TALLY_JOBSET_REPLICATED_JOB", "leader")),
              HasSubstr("expected workers or reducers, got \"leader\""));
  EXPECT_THAT(errorOf(with("TALLY_JOBSET_REPLICATED_JOB", "<unset>")),
              HasSubstr("TALLY_JOBSET_REPLICATED_JOB is not set"));
  EXPECT_THAT(errorOf(with("TALLY_JOBSET_JOB_INDEX", "1")), HasSubstr("replicas: 1"));
  EXPECT_THAT(errorOf(with("TALLY_JOBSET_JOB_INDEX", "x")), HasSubstr("expected an integer"));
  EXPECT_THAT(errorOf(with("TALLY_JOBSET_POD_INDEX", "<unset>")), HasSubstr("Indexed Job"));
  EXPECT_THAT(errorOf(with("TALLY_JOBSET_POD_INDEX", "3")),
              HasSubstr("out of range: TALLY_JOBSET_WORKERS is 3"));
  EXPECT_THAT(errorOf(with("TALLY_JOBSET_POD_INDEX", "-1")), HasSubstr("expected an integer"));
  EXPECT_THAT(errorOf(with("TALLY_JOBSET_WORKERS", "0")), HasSubstr("TALLY_JOBSET_WORKERS"));
  EXPECT_THAT(errorOf(with("TALLY_JOBSET_REDUCERS", "2x")), HasSubstr("got \"2x\""));
  EXPECT_THAT(errorOf(with("TALLY_JOBSET_SUBDOMAIN", "a..b")), HasSubstr("expected a DNS name"));
  EXPECT_THAT(errorOf(with("TALLY_JOBSET_NAME", std::string(55, 'a'))), HasSubstr("too long"));
}

// --- Slurm ----------------------------------------------------------------------------------

Env slurmEnv(const std::string& node, const std::string& group) {
  Env env = {{"SLURM_JOB_ID", "4242"},
             {"SLURM_HET_SIZE", "2"},
             {"SLURM_JOB_NODELIST_HET_GROUP_0", "gpu[08-10]"},
             {"SLURM_JOB_NODELIST_HET_GROUP_1", "cpu[1-2]"},
             {"SLURM_LOCALID", "0"}};
  if (!node.empty()) env["SLURMD_NODENAME"] = node;
  if (!group.empty()) env["TALLY_SLURM_HET_GROUP"] = group;
  return env;
}

const std::vector<std::string> kSlurmGpus = {"gpu08", "gpu09", "gpu10"};
const std::vector<std::string> kSlurmReducers = {"cpu1", "cpu2"};

TEST(LaunchSlurm, EveryNodeMatchesTheClusterSpecOfTheSameHosts) {
  for (size_t i = 0; i < kSlurmGpus.size(); ++i) {
    expectSameAsClusterSpec(planOf(slurmEnv(kSlurmGpus[i], "0")), kSlurmGpus, kSlurmReducers, false,
                            i);
    // Without TALLY_SLURM_HET_GROUP the component is the one whose list holds the node.
    expectSameAsClusterSpec(planOf(slurmEnv(kSlurmGpus[i], "")), kSlurmGpus, kSlurmReducers, false,
                            i);
  }
  for (size_t i = 0; i < kSlurmReducers.size(); ++i) {
    // A Slurm node is not the reducer's alone: it listens on the node's own address.
    expectSameAsClusterSpec(planOf(slurmEnv(kSlurmReducers[i], "1")), kSlurmGpus, kSlurmReducers,
                            true, i, /*own_listen=*/true);
  }
}

TEST(LaunchSlurm, RolesAndSummary) {
  LaunchPlan primary = planOf(slurmEnv("gpu08", "0"));
  EXPECT_EQ(primary.role, ClusterRole::kPrimary);
  EXPECT_EQ(primary.summary,
            "primary (Slurm het group 0 node gpu08), CollNet rank 0 of 3, reducers from Slurm "
            "reducers");
  LaunchPlan worker = planOf(slurmEnv("gpu10", "0"));
  EXPECT_EQ(worker.role, ClusterRole::kWorker);
  EXPECT_THAT(changesOf(worker), testing::Contains("0 RANK=2"));
  EXPECT_THAT(changesOf(worker), testing::Contains("0 TALLY_REDUCERS=cpu1:2222,cpu2:2222"));
  EXPECT_THAT(changesOf(worker), testing::Contains("0 MASTER_ADDR=gpu08"));
  LaunchPlan reducer = planOf(slurmEnv("cpu2", "1"));
  EXPECT_EQ(reducer.role, ClusterRole::kReducer);
  EXPECT_THAT(reducer.argv, ElementsAre(kReducer, "--listen", "cpu2:2222"));
}

TEST(LaunchSlurm, NodeIdWhenNodeNameIsUnset) {
  Env env = slurmEnv("", "0");
  env["SLURM_NODEID"] = "1";
  LaunchPlan p = planOf(env);
  EXPECT_EQ(p.role, ClusterRole::kWorker);
  EXPECT_THAT(changesOf(p), testing::Contains("0 RANK=1"));
}

TEST(LaunchSlurm, PlainSlurmJobRunsTheCommandWithANote) {
  LaunchPlan p = planOf({{"SLURM_JOB_ID", "4242"}, {"SLURM_NODEID", "0"}});
  EXPECT_FALSE(p.has_spec);
  EXPECT_EQ(p.argv, kCommand);
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_THAT(p.notes[0], HasSubstr("Slurm job 4242 is not a heterogeneous job"));
}

TEST(LaunchSlurm, MalformedEnvironmentIsAClearError) {
  auto with = [](const std::string& name, const std::string& value) {
    Env env = slurmEnv("gpu09", "0");
    if (value == "<unset>") {
      env.erase(name);
    } else {
      env[name] = value;
    }
    return env;
  };
  EXPECT_THAT(errorOf(with("SLURM_HET_SIZE", "3")), HasSubstr("expects a heterogeneous job of 2"));
  EXPECT_THAT(errorOf(with("SLURM_HET_SIZE", "two")), HasSubstr("SLURM_HET_SIZE: expected"));
  EXPECT_THAT(errorOf(with("SLURM_JOB_NODELIST_HET_GROUP_1", "<unset>")),
              HasSubstr("SLURM_JOB_NODELIST_HET_GROUP_1 is not set"));
  EXPECT_THAT(errorOf(with("SLURM_JOB_NODELIST_HET_GROUP_0", "gpu[08-10")),
              HasSubstr("SLURM_JOB_NODELIST_HET_GROUP_0: hostlist \"gpu[08-10\""));
  EXPECT_THAT(errorOf(with("SLURM_LOCALID", "1")), HasSubstr("one task per node"));
  EXPECT_THAT(errorOf(with("TALLY_SLURM_HET_GROUP", "2")), HasSubstr("TALLY_SLURM_HET_GROUP"));
  EXPECT_THAT(errorOf(with("TALLY_SLURM_HET_GROUP", "1")),
              HasSubstr("SLURMD_NODENAME gpu09 is not in SLURM_JOB_NODELIST_HET_GROUP_1"));
  EXPECT_THAT(errorOf(with("SLURMD_NODENAME", "login1")), HasSubstr("not in"));
  Env neither = with("SLURMD_NODENAME", "<unset>");
  neither.erase("TALLY_SLURM_HET_GROUP");
  EXPECT_THAT(errorOf(neither), HasSubstr("cannot tell this task's component"));
  Env no_node = with("SLURMD_NODENAME", "<unset>");
  EXPECT_THAT(errorOf(no_node), HasSubstr("neither SLURMD_NODENAME nor SLURM_NODEID"));
  no_node["SLURM_NODEID"] = "3";
  EXPECT_THAT(errorOf(no_node), HasSubstr("SLURM_NODEID: expected an integer from 0 to 2"));
  Env both = slurmEnv("shared", "");
  both["SLURM_JOB_NODELIST_HET_GROUP_0"] = "shared,gpu2";
  both["SLURM_JOB_NODELIST_HET_GROUP_1"] = "shared";
  EXPECT_THAT(errorOf(both), HasSubstr("in both components"));
}

}  // namespace
}  // namespace tally::commands
