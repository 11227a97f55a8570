// SPDX-License-Identifier: Apache-2.0
// CLUSTER_SPEC and TF_CONFIG parsing (common/cluster.h), table-driven, and the order in which
// reducers are discovered.
#include "common/cluster.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tally {
namespace {

// A job shaped like the Vertex AI documentation's example: one primary, two workers, two reducers,
// three evaluators, a hyperparameter trial.
const char* const kPools = R"({
  "workerpool0": ["cmle-training-workerpool0-ab-0:2222"],
  "workerpool1": ["cmle-training-workerpool1-ab-0:2222", "cmle-training-workerpool1-ab-1:2222"],
  "workerpool2": ["cmle-training-workerpool2-ab-0:2222", "cmle-training-workerpool2-ab-1:2222"],
  "workerpool3": ["cmle-training-workerpool3-ab-0:2222", "cmle-training-workerpool3-ab-1:2222",
                  "cmle-training-workerpool3-ab-2:2222"]})";

const char* const kTfCluster = R"({
  "chief": ["cmle-training-workerpool0-ab-0:2222"],
  "worker": ["cmle-training-workerpool1-ab-0:2222", "cmle-training-workerpool1-ab-1:2222"],
  "ps": ["cmle-training-workerpool2-ab-0:2222", "cmle-training-workerpool2-ab-1:2222"]})";

const char* const kJob = R"({"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"},)"
                         R"( "replicaCount": "1"}]})";

std::string clusterSpec(const std::string& cluster, const std::string& task) {
  return R"({"cluster": )" + cluster + R"(, "environment": "cloud", "task": )" + task +
         R"(, "job": )" + kJob + "}";
}

std::string task(const std::string& type, int index) {
  return R"({"type": ")" + type + R"(", "index": )" + std::to_string(index) + R"(, "trial": "17"})";
}

std::string tfConfig(const std::string& cluster, const std::string& task_json) {
  return R"({"cluster": )" + cluster + R"(, "task": )" + task_json +
         R"(, "environment": "cloud", "job": )" + kJob + "}";
}

TEST(ClusterSpec, DocumentationShape) {
  ClusterSpec spec;
  Status st = parseClusterSpec(clusterSpec(kPools, task("workerpool0", 0)), &spec);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_EQ(spec.variable, "CLUSTER_SPEC");
  EXPECT_EQ(spec.pools[0].size(), 1u);
  EXPECT_EQ(spec.pools[1].size(), 2u);
  EXPECT_EQ(spec.pools[2], (std::vector<std::string>{"cmle-training-workerpool2-ab-0:2222",
                                                     "cmle-training-workerpool2-ab-1:2222"}));
  EXPECT_EQ(spec.pools[3].size(), 3u);
  EXPECT_EQ(spec.environment, "cloud");
  EXPECT_EQ(spec.task_type, "workerpool0");
  EXPECT_EQ(spec.trial, "17");
  EXPECT_EQ(spec.cloud, "");
  EXPECT_NE(spec.job_json.find("\"workerPoolSpecs\""), std::string::npos) << spec.job_json;
}

TEST(ClusterSpec, OptionalFieldsMayBeAbsent) {
  ClusterSpec spec;
  Status st = parseClusterSpec(
      R"({"cluster": {"workerpool0": ["h:1"]}, "task": {"type": "workerpool0", "index": 0},)"
      R"( "extra": [1, 2]})",
      &spec);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_EQ(spec.trial, "");
  EXPECT_EQ(spec.environment, "");
  EXPECT_EQ(spec.job_json, "");
  EXPECT_EQ(spec.collRanks(), 1);
  EXPECT_EQ(spec.collRank(), 0);
}

struct TaskCase {
  const char* type;
  int index;
  int pool;
  ClusterRole role;
  int coll_rank;
  const char* address;  // "" when the pool is not listed
};

void expectTask(const ClusterSpec& spec, const TaskCase& c) {
  EXPECT_EQ(spec.task_type, c.type);
  EXPECT_EQ(spec.pool, c.pool);
  EXPECT_EQ(spec.index, c.index);
  EXPECT_EQ(spec.role(), c.role);
  EXPECT_EQ(spec.collRank(), c.coll_rank);
  EXPECT_EQ(spec.collRanks(), 3);
  EXPECT_EQ(spec.ownAddress(), c.address);
}

TEST(ClusterSpec, EveryTaskOfEveryPool) {
  const TaskCase cases[] = {
      {"workerpool0", 0, 0, ClusterRole::kPrimary, 0, "cmle-training-workerpool0-ab-0:2222"},
      {"workerpool1", 0, 1, ClusterRole::kWorker, 1, "cmle-training-workerpool1-ab-0:2222"},
      {"workerpool1", 1, 1, ClusterRole::kWorker, 2, "cmle-training-workerpool1-ab-1:2222"},
      {"workerpool2", 0, 2, ClusterRole::kReducer, -1, "cmle-training-workerpool2-ab-0:2222"},
      {"workerpool2", 1, 2, ClusterRole::kReducer, -1, "cmle-training-workerpool2-ab-1:2222"},
      {"workerpool3", 0, 3, ClusterRole::kEvaluator, -1, "cmle-training-workerpool3-ab-0:2222"},
      {"workerpool3", 1, 3, ClusterRole::kEvaluator, -1, "cmle-training-workerpool3-ab-1:2222"},
      {"workerpool3", 2, 3, ClusterRole::kEvaluator, -1, "cmle-training-workerpool3-ab-2:2222"},
  };
  for (const TaskCase& c : cases) {
    SCOPED_TRACE(std::string(c.type) + " " + std::to_string(c.index));
    ClusterSpec spec;
    Status st = parseClusterSpec(clusterSpec(kPools, task(c.type, c.index)), &spec);
    ASSERT_TRUE(st.isOk()) << st.toString();
    expectTask(spec, c);
  }
}

TEST(TfConfig, EveryTaskType) {
  const TaskCase cases[] = {
      {"chief", 0, 0, ClusterRole::kPrimary, 0, "cmle-training-workerpool0-ab-0:2222"},
      {"worker", 0, 1, ClusterRole::kWorker, 1, "cmle-training-workerpool1-ab-0:2222"},
      {"worker", 1, 1, ClusterRole::kWorker, 2, "cmle-training-workerpool1-ab-1:2222"},
      {"ps", 0, 2, ClusterRole::kReducer, -1, "cmle-training-workerpool2-ab-0:2222"},
      {"ps", 1, 2, ClusterRole::kReducer, -1, "cmle-training-workerpool2-ab-1:2222"},
      // The evaluator is not listed: no address, and its index is not range-checked.
      {"evaluator", 0, 3, ClusterRole::kEvaluator, -1, ""},
      {"evaluator", 2, 3, ClusterRole::kEvaluator, -1, ""},
  };
  for (const TaskCase& c : cases) {
    SCOPED_TRACE(std::string(c.type) + " " + std::to_string(c.index));
    ClusterSpec spec;
    std::string task_json = R"({"type": ")" + std::string(c.type) + R"(", "index": )" +
                            std::to_string(c.index) + R"(, "trial": "17", "cloud": "ab"})";
    Status st = parseTfConfig(tfConfig(kTfCluster, task_json), &spec);
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_EQ(spec.variable, "TF_CONFIG");
    EXPECT_EQ(spec.trial, "17");
    EXPECT_EQ(spec.cloud, "ab");
    EXPECT_EQ(spec.environment, "cloud");
    EXPECT_FALSE(spec.job_json.empty());
    expectTask(spec, c);
  }
}

TEST(TfConfig, MasterInsteadOfChief) {
  ClusterSpec spec;
  Status st = parseTfConfig(R"({"cluster": {"master": ["cmle-training-master-ab-0:2222"],)"
                            R"( "worker": ["cmle-training-worker-ab-0:2222"]},)"
                            R"( "task": {"type": "master", "index": 0}})",
                            &spec);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_EQ(spec.pool, 0);
  EXPECT_EQ(spec.role(), ClusterRole::kPrimary);
  EXPECT_EQ(spec.ownAddress(), "cmle-training-master-ab-0:2222");
  EXPECT_EQ(spec.collRanks(), 2);
  EXPECT_EQ(spec.collRank(), 0);
  EXPECT_TRUE(spec.pools[2].empty());
}

TEST(TfConfig, WorkersOnlyMakeWorkerZeroRankZero) {
  ClusterSpec spec;
  Status st = parseTfConfig(
      R"({"cluster": {"worker": ["w0:2222", "w1:2222"]}, "task": {"type": "worker", "index": 1}})",
      &spec);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_EQ(spec.collRanks(), 2);
  EXPECT_EQ(spec.collRank(), 1);
}

TEST(ClusterSpec, AddressForms) {
  const char* good[] = {"h:1",
                        "10.0.0.2:65535",
                        "[::1]:2222",
                        "[fe80::1%eth0]:80",
                        "cmle-training-workerpool2-ab-0:2222",
                        "a.b_c:8"};
  for (const char* address : good) {
    SCOPED_TRACE(address);
    ClusterSpec spec;
    Status st = parseClusterSpec(std::string(R"({"cluster": {"workerpool0": [")") + address +
                                     R"("]}, "task": {"type": "workerpool0", "index": 0}})",
                                 &spec);
    EXPECT_TRUE(st.isOk()) << st.toString();
    EXPECT_EQ(spec.ownAddress(), address);
  }
}

// A malformed variable and the words its error must contain besides the variable's name.
struct BadCase {
  const char* variable;  // "CLUSTER_SPEC" or "TF_CONFIG"
  std::string text;
  std::vector<std::string> mentions;
};

std::vector<BadCase> badCases() {
  const std::string primary = R"({"workerpool0": ["p:1"], "workerpool1": ["w:1"]})";
  const std::string ok_task = R"({"type": "workerpool1", "index": 0})";
  const std::string tf_cluster = R"({"chief": ["c:1"], "worker": ["w:1"], "ps": ["r:1"]})";
  const std::string tf_task = R"({"type": "worker", "index": 0})";
  auto cs = [](const std::string& c, const std::string& t) {
    return R"({"cluster": )" + c + R"(, "task": )" + t + "}";
  };
  return {
      // Not a JSON object at all.
      {"CLUSTER_SPEC", "not json", {"not JSON"}},
      {"CLUSTER_SPEC", R"({"cluster": )", {"not JSON"}},
      {"CLUSTER_SPEC", R"([{"cluster": {}}])", {"expected a JSON object"}},
      {"TF_CONFIG", "42", {"expected a JSON object", "42"}},
      // Missing fields.
      {"CLUSTER_SPEC", R"({"task": )" + ok_task + "}", {"cluster:", "missing"}},
      {"CLUSTER_SPEC", R"({"cluster": )" + primary + "}", {"task:", "missing"}},
      {"CLUSTER_SPEC", cs(primary, R"({"index": 0})"), {"task.type:", "missing"}},
      {"CLUSTER_SPEC", cs(primary, R"({"type": "workerpool1"})"), {"task.index:", "missing"}},
      {"TF_CONFIG", R"({"cluster": )" + tf_cluster + "}", {"task:", "missing"}},
      {"TF_CONFIG", R"({"task": )" + tf_task + "}", {"cluster:", "missing"}},
      {"TF_CONFIG", cs(tf_cluster, R"({"type": "worker"})"), {"task.index:", "missing"}},
      // Wrong types.
      {"CLUSTER_SPEC", cs("[]", ok_task), {"cluster:", "expected an object"}},
      {"CLUSTER_SPEC", cs(primary, R"("workerpool1")"), {"task:", "expected an object"}},
      {"CLUSTER_SPEC",
       cs(primary, R"({"type": "workerpool1", "index": "one"})"),
       {"task.index:", "expected a non-negative integer", "\"one\""}},
      {"CLUSTER_SPEC",
       cs(primary, R"({"type": "workerpool1", "index": 0.5})"),
       {"task.index:", "integer"}},
      {"CLUSTER_SPEC", cs(primary, R"({"type": 1, "index": 0})"), {"task.type:", "a string"}},
      {"CLUSTER_SPEC",
       cs(primary, R"({"type": "workerpool1", "index": 0, "trial": 7})"),
       {"task.trial:", "a string"}},
      {"CLUSTER_SPEC",
       cs(R"({"workerpool0": "p:1"})", R"({"type": "workerpool0", "index": 0})"),
       {"cluster.workerpool0:", "array"}},
      {"CLUSTER_SPEC",
       cs(R"({"workerpool0": ["p:1", 5]})", R"({"type": "workerpool0", "index": 0})"),
       {"cluster.workerpool0[1]:", "host:port"}},
      {"CLUSTER_SPEC",
       R"({"cluster": )" + primary + R"(, "task": )" + ok_task + R"(, "environment": 1})",
       {"environment:", "a string"}},
      {"CLUSTER_SPEC",
       R"({"cluster": )" + primary + R"(, "task": )" + ok_task + R"(, "job": "x"})",
       {"job:", "an object"}},
      {"TF_CONFIG",
       cs(tf_cluster, R"({"type": "worker", "index": 0, "cloud": []})"),
       {"task.cloud:", "a string"}},
      {"TF_CONFIG", cs(R"({"worker": {"a": 1}})", tf_task), {"cluster.worker:", "array"}},
      // Unknown task types and pools.
      {"CLUSTER_SPEC",
       cs(primary, R"({"type": "workerpool4", "index": 0})"),
       {"task.type:", "workerpool4"}},
      {"CLUSTER_SPEC",
       cs(primary, R"({"type": "chief", "index": 0})"),
       {"task.type:", "\"chief\""}},
      {"TF_CONFIG", cs(tf_cluster, R"({"type": "reducer", "index": 0})"), {"task.type:"}},
      {"CLUSTER_SPEC",
       cs(R"({"workerpool0": ["p:1"], "chief": ["c:1"]})", ok_task),
       {"cluster.chief:", "unknown pool"}},
      {"TF_CONFIG",
       cs(R"({"chief": ["c:1"], "workerpool1": ["w:1"]})", tf_task),
       {"cluster.workerpool1:", "unknown pool"}},
      {"TF_CONFIG",
       cs(R"({"chief": ["c:1"], "worker": ["w:1"], "evaluator": ["e:1"]})", tf_task),
       {"cluster.evaluator:"}},
      {"TF_CONFIG",
       cs(R"({"chief": ["c:1"], "master": ["m:1"], "worker": ["w:1"]})", tf_task),
       {"cluster.master:", "chief"}},
      // Index out of range, negative, or into an empty pool.
      {"CLUSTER_SPEC",
       cs(primary, R"({"type": "workerpool1", "index": 1})"),
       {"task.index:", "out of range", "cluster.workerpool1"}},
      {"CLUSTER_SPEC",
       cs(primary, R"({"type": "workerpool1", "index": -1})"),
       {"task.index:", "non-negative", "-1"}},
      {"CLUSTER_SPEC",
       cs(primary, R"({"type": "workerpool0", "index": 99999999999})"),
       {"task.index:", "out of range"}},
      {"CLUSTER_SPEC",
       cs(primary, R"({"type": "workerpool2", "index": 0})"),
       {"task.index:", "cluster.workerpool2", "empty"}},
      {"TF_CONFIG", cs(tf_cluster, R"({"type": "ps", "index": 1})"), {"task.index:", "cluster.ps"}},
      {"TF_CONFIG",
       cs(R"({"master": ["m:1"], "worker": ["w:1"]})", R"({"type": "chief", "index": 1})"),
       {"task.index:", "cluster.master"}},
      {"TF_CONFIG",
       cs(tf_cluster, R"({"type": "evaluator", "index": -2})"),
       {"task.index:", "non-negative"}},
      // Empty pools.
      {"CLUSTER_SPEC",
       cs(R"({"workerpool1": ["w:1"]})", ok_task),
       {"cluster.workerpool0:", "missing"}},
      {"CLUSTER_SPEC",
       cs(R"({"workerpool0": [], "workerpool1": ["w:1"]})", ok_task),
       {"cluster.workerpool0:", "empty"}},
      {"TF_CONFIG",
       cs(R"({"chief": [], "ps": ["r:1"]})", R"({"type": "ps", "index": 0})"),
       {"cluster:", "chief, master or worker"}},
      // Bad addresses.
      {"CLUSTER_SPEC",
       cs(R"({"workerpool0": ["p:1"], "workerpool2": ["r"]})", ok_task),
       {"cluster.workerpool2[0]:", "\"r\""}},
      {"CLUSTER_SPEC",
       cs(R"({"workerpool0": ["p:0"]})", R"({"type": "workerpool0", "index": 0})"),
       {"cluster.workerpool0[0]:", "port 1 to 65535"}},
      {"CLUSTER_SPEC",
       cs(R"({"workerpool0": ["p:65536"]})", R"({"type": "workerpool0", "index": 0})"),
       {"cluster.workerpool0[0]:", "p:65536"}},
      {"CLUSTER_SPEC",
       cs(R"({"workerpool0": [":22"]})", R"({"type": "workerpool0", "index": 0})"),
       {"cluster.workerpool0[0]:"}},
      {"CLUSTER_SPEC",
       cs(R"({"workerpool0": ["p :22"]})", R"({"type": "workerpool0", "index": 0})"),
       {"cluster.workerpool0[0]:"}},
      {"TF_CONFIG",
       cs(R"({"chief": ["::1:22"], "worker": ["w:1"]})", tf_task),
       {"cluster.chief[0]:", "::1:22"}},
      {"TF_CONFIG",
       cs(R"({"chief": ["c:1"], "worker": ["w:+1"]})", tf_task),
       {"cluster.worker[0]:"}},
      {"TF_CONFIG",
       cs(R"({"chief": ["[c]:1"], "worker": ["w:1"]})", tf_task),
       {"cluster.chief[0]:"}},
  };
}

TEST(ClusterParse, MalformedInputNamesVariableAndField) {
  for (const BadCase& c : badCases()) {
    SCOPED_TRACE(std::string(c.variable) + " = " + c.text);
    ClusterSpec spec;
    spec.task_type = "untouched";
    Status st = std::string(c.variable) == "CLUSTER_SPEC" ? parseClusterSpec(c.text, &spec)
                                                          : parseTfConfig(c.text, &spec);
    ASSERT_FALSE(st.isOk());
    EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
    EXPECT_EQ(st.message().rfind(std::string(c.variable) + ": ", 0), 0u) << st.message();
    for (const std::string& word : c.mentions) {
      EXPECT_NE(st.message().find(word), std::string::npos)
          << "\"" << word << "\" not in: " << st.message();
    }
    EXPECT_EQ(spec.task_type, "untouched");
  }
}

TEST(ClusterParse, ExactMessage) {
  ClusterSpec spec;
  Status st = parseClusterSpec(
      R"({"cluster": {"workerpool0": ["p:1"]}, "task": {"type": "workerpool0", "index": "one"}})",
      &spec);
  EXPECT_EQ(st.message(), "CLUSTER_SPEC: task.index: expected a non-negative integer, got \"one\"");
}

TEST(ClusterParse, InvalidUtf8IsAnErrorNotACrash) {
  ClusterSpec spec;
  Status st = parseClusterSpec("{\"cluster\": {\"workerpool0\": [\"\xff\xfe:1\"]}}", &spec);
  EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(st.message().rfind("CLUSTER_SPEC: ", 0), 0u) << st.message();
  // The parser's quote of the input is cleaned: a log line carries only printable ASCII.
  for (char c : st.message()) EXPECT_TRUE(c >= 0x20 && c <= 0x7e) << st.message();
}

}  // namespace
}  // namespace tally
