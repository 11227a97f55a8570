// SPDX-License-Identifier: Apache-2.0
// ClusterEnv::load from a ParamSource and reducer discovery order.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/cluster.h"

namespace tally {
namespace {

const char* const kClusterSpec =
    R"({"cluster": {"workerpool0": ["cmle-training-workerpool0-ab-0:2222"],)"
    R"( "workerpool1": ["cmle-training-workerpool1-ab-0:2222"],)"
    R"( "workerpool2": ["cmle-training-workerpool2-ab-0:2222",)"
    R"( "cmle-training-workerpool2-ab-1:2222"]},)"
    R"( "task": {"type": "workerpool1", "index": 0}})";

const char* const kTfConfig =
    R"({"cluster": {"chief": ["tf-chief-0:2222"], "worker": ["tf-worker-0:2222"],)"
    R"( "ps": ["tf-ps-0:2222"]}, "task": {"type": "chief", "index": 0}})";

// The same cluster without reducers, in each format.
const char* const kClusterSpecNoReducers =
    R"({"cluster": {"workerpool0": ["p:2222"]}, "task": {"type": "workerpool0", "index": 0}})";
const char* const kTfConfigNoReducers =
    R"({"cluster": {"chief": ["c:2222"]}, "task": {"type": "chief", "index": 0}})";

ClusterEnv loadEnv(std::map<std::string, std::string> values) {
  ClusterEnv env;
  Status st = ClusterEnv::load(MapParamSource(std::move(values)), &env);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return env;
}

Params paramsWithReducers(const std::string& reducers) {
  Params params = Params::defaults();
  params.reducers = reducers;
  return params;
}

TEST(ClusterEnv, UnsetAndEmptyAreAbsent) {
  ClusterEnv env = loadEnv({});
  EXPECT_FALSE(env.cluster_spec);
  EXPECT_FALSE(env.tf_config);
  EXPECT_EQ(env.primary(), nullptr);
  env = loadEnv({{"CLUSTER_SPEC", ""}, {"TF_CONFIG", ""}});
  EXPECT_FALSE(env.cluster_spec);
  EXPECT_FALSE(env.tf_config);
}

TEST(ClusterEnv, PrimaryPrefersClusterSpec) {
  ClusterEnv env = loadEnv({{"CLUSTER_SPEC", kClusterSpec}, {"TF_CONFIG", kTfConfig}});
  ASSERT_TRUE(env.cluster_spec && env.tf_config);
  ASSERT_NE(env.primary(), nullptr);
  EXPECT_EQ(env.primary()->variable, "CLUSTER_SPEC");
  EXPECT_EQ(env.primary()->role(), ClusterRole::kWorker);
  env = loadEnv({{"TF_CONFIG", kTfConfig}});
  ASSERT_NE(env.primary(), nullptr);
  EXPECT_EQ(env.primary()->variable, "TF_CONFIG");
  EXPECT_EQ(env.primary()->role(), ClusterRole::kPrimary);
}

TEST(ClusterEnv, MalformedVariableFailsEvenWhenTheOtherIsGood) {
  const std::map<std::string, std::map<std::string, std::string>> cases = {
      {"CLUSTER_SPEC", {{"CLUSTER_SPEC", "{"}, {"TF_CONFIG", kTfConfig}}},
      {"TF_CONFIG", {{"CLUSTER_SPEC", kClusterSpec}, {"TF_CONFIG", "[]"}}},
  };
  for (const auto& [variable, values] : cases) {
    SCOPED_TRACE(variable);
    ClusterEnv env;
    env.cluster_spec = ClusterSpec{};
    env.cluster_spec->trial = "untouched";
    Status st = ClusterEnv::load(MapParamSource(values), &env);
    EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
    EXPECT_EQ(st.message().rfind(variable + ": ", 0), 0u) << st.message();
    ASSERT_TRUE(env.cluster_spec);
    EXPECT_EQ(env.cluster_spec->trial, "untouched");
  }
}

TEST(ResolveReducers, EveryCombinationOfSources) {
  struct Case {
    bool tally, cluster_spec, tf_config;
    std::vector<std::string> addresses;
    const char* origin;
  };
  const std::vector<std::string> from_tally = {"r1:9000", "r2:9000"};
  const std::vector<std::string> from_cs = {"cmle-training-workerpool2-ab-0:2222",
                                            "cmle-training-workerpool2-ab-1:2222"};
  const std::vector<std::string> from_tf = {"tf-ps-0:2222"};
  const Case cases[] = {
      {false, false, false, {}, "none"},
      {false, false, true, from_tf, "TF_CONFIG ps"},
      {false, true, false, from_cs, "CLUSTER_SPEC workerpool2"},
      {false, true, true, from_cs, "CLUSTER_SPEC workerpool2"},
      {true, false, false, from_tally, "TALLY_REDUCERS"},
      {true, false, true, from_tally, "TALLY_REDUCERS"},
      {true, true, false, from_tally, "TALLY_REDUCERS"},
      {true, true, true, from_tally, "TALLY_REDUCERS"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.tally) + std::to_string(c.cluster_spec) +
                 std::to_string(c.tf_config));
    std::map<std::string, std::string> values;
    if (c.cluster_spec) values["CLUSTER_SPEC"] = kClusterSpec;
    if (c.tf_config) values["TF_CONFIG"] = kTfConfig;
    ReducerList list =
        resolveReducers(paramsWithReducers(c.tally ? " r1:9000 ,r2:9000," : ""), loadEnv(values));
    EXPECT_EQ(list.addresses, c.addresses);
    EXPECT_EQ(list.origin, c.origin);
  }
}

TEST(ResolveReducers, EmptySourcesFallThrough) {
  // A blank TALLY_REDUCERS and a CLUSTER_SPEC without workerpool2 leave TF_CONFIG's ps.
  ReducerList list = resolveReducers(
      paramsWithReducers(" , "),
      loadEnv({{"CLUSTER_SPEC", kClusterSpecNoReducers}, {"TF_CONFIG", kTfConfig}}));
  EXPECT_EQ(list.origin, "TF_CONFIG ps");
  EXPECT_EQ(list.addresses, std::vector<std::string>{"tf-ps-0:2222"});
  list = resolveReducers(paramsWithReducers(""), loadEnv({{"CLUSTER_SPEC", kClusterSpecNoReducers},
                                                          {"TF_CONFIG", kTfConfigNoReducers}}));
  EXPECT_EQ(list.origin, "none");
  EXPECT_TRUE(list.addresses.empty());
}

TEST(ClusterRoleName, Names) {
  EXPECT_STREQ(clusterRoleName(ClusterRole::kPrimary), "primary");
  EXPECT_STREQ(clusterRoleName(ClusterRole::kWorker), "worker");
  EXPECT_STREQ(clusterRoleName(ClusterRole::kReducer), "reducer");
  EXPECT_STREQ(clusterRoleName(ClusterRole::kEvaluator), "evaluator");
}

}  // namespace
}  // namespace tally
