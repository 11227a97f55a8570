// SPDX-License-Identifier: Apache-2.0
// tally launch: the plan for every pool from CLUSTER_SPEC and TF_CONFIG (launch_plan.h), the shell
// text of --dry-run, and the built `tally` binary run with an explicit environment: --dry-run for
// every pool, real execs, a real tally-reducer in pool 2, and the error exits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "test/tools/commands/launch_test_util.h"
#include "tools/commands/launch_plan.h"

namespace tally::commands {
namespace {

using test::clusterSpec;
using test::tfConfig;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kPlugin = "/opt/tally/lib/libnccl-net-tally.so";
constexpr const char* kReducer = "/opt/tally/bin/tally-reducer";
const std::vector<std::string> kCommand = {"python", "train.py", "--lr", "1"};

LaunchPlan plan(const std::map<std::string, std::string>& env,
                const std::vector<std::string>& command = kCommand) {
  LaunchPlan out;
  Status st = planLaunchFromEnvironment(MapParamSource(env), kPlugin, kReducer, command, &out);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return out;
}

// "NAME=value" for each change of `kind`, in order.
std::vector<std::string> changes(const LaunchPlan& p, EnvChange::Kind kind) {
  std::vector<std::string> out;
  for (const EnvChange& c : p.env) {
    if (c.kind == kind) out.push_back(c.name + "=" + c.value);
  }
  return out;
}
std::vector<std::string> sets(const LaunchPlan& p) { return changes(p, EnvChange::Kind::kSet); }

const std::string kReducerList = "reducer-0:2222,reducer-1:2222";

TEST(LaunchPlan, PrimaryFromClusterSpec) {
  LaunchPlan p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool0", 0)}});
  EXPECT_TRUE(p.has_spec);
  EXPECT_EQ(p.role, ClusterRole::kPrimary);
  EXPECT_EQ(p.summary,
            "primary (CLUSTER_SPEC workerpool0 index 0, trial 7), CollNet rank 0 of 3, reducers "
            "from CLUSTER_SPEC workerpool2");
  EXPECT_THAT(sets(p),
              ElementsAre(std::string("NCCL_NET_PLUGIN=") + kPlugin, "NCCL_NET_PLUGIN_REF_COUNT=1",
                          "NCCL_COLLNET_ENABLE=1", "TALLY_REDUCERS=" + kReducerList,
                          "MASTER_ADDR=primary-0", "MASTER_PORT=2222", "WORLD_SIZE=3", "RANK=0"));
  EXPECT_EQ(p.argv, kCommand);
  EXPECT_TRUE(p.notes.empty());
}

TEST(LaunchPlan, WorkersFromClusterSpec) {
  for (int index : {0, 1}) {
    LaunchPlan p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool1", index)}});
    EXPECT_EQ(p.role, ClusterRole::kWorker);
    EXPECT_THAT(p.summary,
                HasSubstr("worker (CLUSTER_SPEC workerpool1 index " + std::to_string(index) +
                          ", trial 7), CollNet rank " + std::to_string(index + 1) + " of 3"));
    EXPECT_THAT(sets(p), ElementsAre(std::string("NCCL_NET_PLUGIN=") + kPlugin,
                                     "NCCL_NET_PLUGIN_REF_COUNT=1", "NCCL_COLLNET_ENABLE=1",
                                     "TALLY_REDUCERS=" + kReducerList, "MASTER_ADDR=primary-0",
                                     "MASTER_PORT=2222", "WORLD_SIZE=3",
                                     "RANK=" + std::to_string(index + 1)));
    EXPECT_EQ(p.argv, kCommand);
  }
}

TEST(LaunchPlan, ReducerRunsTallyReducerOnItsOwnPort) {
  LaunchPlan p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool2", 1)}});
  EXPECT_EQ(p.role, ClusterRole::kReducer);
  EXPECT_THAT(p.argv, ElementsAre(kReducer, "--listen", "0.0.0.0:2222"));
  EXPECT_TRUE(p.env.empty());
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_THAT(p.notes[0], HasSubstr("(python train.py --lr 1) is not run"));
  // Without a command there is nothing to warn about.
  p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool2", 0)}}, {});
  EXPECT_THAT(p.argv, ElementsAre(kReducer, "--listen", "0.0.0.0:2222"));
  EXPECT_TRUE(p.notes.empty());
}

// The reducer listens on every address at the port its spec gives it: the replica's host name
// may not resolve yet when its container starts. The workers still reach it by that name, and
// the summary says which name that is.
TEST(LaunchPlan, ReducerListensOnEveryAddressAtTheSpecsPort) {
  const std::string reducers = R"("reducer-0:2222", "reducer-1:7000")";
  LaunchPlan p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool2", 1, reducers)}}, {});
  EXPECT_THAT(p.argv, ElementsAre(kReducer, "--listen", "0.0.0.0:7000"));
  EXPECT_THAT(p.summary, HasSubstr("tally-reducer on reducer-1:7000, listening on 0.0.0.0:7000"));
  p = plan({{"TF_CONFIG", tfConfig("ps", 0)}}, {});
  EXPECT_THAT(p.argv, ElementsAre(kReducer, "--listen", "0.0.0.0:2222"));
  // An IPv6 literal in the spec: every IPv6 address.
  p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool2", 0, R"("[fd00::7]:2222")")}}, {});
  EXPECT_THAT(p.argv, ElementsAre(kReducer, "--listen", "[::]:2222"));
  // The workers are given the names.
  for (const char* pool : {"workerpool0", "workerpool1"}) {
    p = plan({{"CLUSTER_SPEC", clusterSpec(pool, 0, reducers)}});
    EXPECT_THAT(sets(p), ::testing::Contains("TALLY_REDUCERS=reducer-0:2222,reducer-1:7000"));
  }
}

TEST(LaunchPlan, ReducerArgsAreSplitAsAShellWould) {
  LaunchPlan p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool2", 1)},
                       {"TALLY_REDUCER_ARGS", " --threads 8\t--token-file \"/a b/t\" x\\ y '' "}},
                      {});
  EXPECT_THAT(p.argv, ElementsAre(kReducer, "--listen", "0.0.0.0:2222", "--threads", "8",
                                  "--token-file", "/a b/t", "x y", ""));
  // Pools 0, 1 and 3 do not run the reducer: the variable is not theirs.
  p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool1", 0)}, {"TALLY_REDUCER_ARGS", "--bad"}});
  EXPECT_EQ(p.argv, kCommand);
}

TEST(LaunchPlan, BadReducerArgsAreAUsageError) {
  for (const char* bad : {"--threads '8", "--metrics \"x", "a\\", "--listen h:1", "--listen=h:1"}) {
    LaunchPlan out;
    Status st =
        planLaunchFromEnvironment(MapParamSource({{"CLUSTER_SPEC", clusterSpec("workerpool2", 0)},
                                                  {"TALLY_REDUCER_ARGS", bad}}),
                                  kPlugin, kReducer, {}, &out);
    EXPECT_EQ(st.code(), StatusCode::kInvalidUsage) << bad;
    EXPECT_THAT(st.message(), HasSubstr("TALLY_REDUCER_ARGS")) << bad;
  }
  std::vector<std::string> words;
  EXPECT_TRUE(splitShellWords("a \"b \\\" c\" 'd\\e'", &words).isOk());
  EXPECT_THAT(words, ElementsAre("a", "b \" c", "d\\e"));
}

TEST(LaunchPlan, EvaluatorRunsWithoutThePlugin) {
  LaunchPlan p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool3", 2)}, {"NCCL_ALGO", "ring"}});
  EXPECT_EQ(p.role, ClusterRole::kEvaluator);
  // Unset, NCCL would open libnccl-net.so, which an image may link to Tally.
  EXPECT_THAT(sets(p), ElementsAre("NCCL_NET_PLUGIN=none"));
  EXPECT_TRUE(changes(p, EnvChange::Kind::kUnset).empty());
  EXPECT_EQ(p.argv, kCommand);
  // A Tally plugin set for the whole image is replaced; another plugin is none of our business.
  p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool3", 0)}, {"NCCL_NET_PLUGIN", "tally"}});
  EXPECT_THAT(sets(p), ElementsAre("NCCL_NET_PLUGIN=none"));
  p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool3", 0)}, {"NCCL_NET_PLUGIN", "gib"}});
  EXPECT_TRUE(p.env.empty());
  // The LD_PRELOAD way: Tally leaves LD_PRELOAD, other preloaded libraries stay.
  p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool3", 0)},
            {"NCCL_NET_PLUGIN", "STATIC_PLUGIN"},
            {"LD_PRELOAD", "/usr/lib/libnccl-net-tally.so"}});
  EXPECT_THAT(changes(p, EnvChange::Kind::kUnset),
              ElementsAre("LD_PRELOAD=/usr/lib/libnccl-net-tally.so"));
  EXPECT_THAT(sets(p), ElementsAre("NCCL_NET_PLUGIN=none"));
  p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool3", 0)},
            {"NCCL_NET_PLUGIN", "STATIC_PLUGIN"},
            {"LD_PRELOAD", "libjemalloc.so /usr/lib/libnccl-net-tally.so:libx.so"}});
  EXPECT_THAT(sets(p), ElementsAre("LD_PRELOAD=libjemalloc.so:libx.so", "NCCL_NET_PLUGIN=none"));
  EXPECT_TRUE(changes(p, EnvChange::Kind::kUnset).empty());
  // STATIC_PLUGIN with another preloaded plugin is not ours.
  p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool3", 0)},
            {"NCCL_NET_PLUGIN", "STATIC_PLUGIN"},
            {"LD_PRELOAD", "/opt/other/libnccl-net.so"}});
  EXPECT_TRUE(p.env.empty());
}

TEST(LaunchPlan, EveryTfConfigRole) {
  struct Case {
    const char* type;
    int index;
    ClusterRole role;
    std::string rank;  // RANK, empty when not a CollNet rank
  };
  for (const Case& c :
       {Case{"chief", 0, ClusterRole::kPrimary, "0"}, Case{"master", 0, ClusterRole::kPrimary, "0"},
        Case{"worker", 1, ClusterRole::kWorker, "2"}, Case{"ps", 0, ClusterRole::kReducer, ""},
        Case{"evaluator", 0, ClusterRole::kEvaluator, ""}}) {
    SCOPED_TRACE(c.type);
    LaunchPlan p = plan({{"TF_CONFIG", tfConfig(c.type, c.index)}});
    EXPECT_EQ(p.role, c.role);
    EXPECT_THAT(p.summary, HasSubstr(std::string("(TF_CONFIG ") + c.type + " index "));
    if (c.role == ClusterRole::kReducer) {
      EXPECT_THAT(p.argv, ElementsAre(kReducer, "--listen", "0.0.0.0:2222"));
      EXPECT_THAT(p.summary, HasSubstr("tally-reducer on tf-ps-0:2222"));
    } else if (c.role == ClusterRole::kEvaluator) {
      EXPECT_THAT(sets(p), ElementsAre("NCCL_NET_PLUGIN=none"));
      EXPECT_EQ(p.argv, kCommand);
    } else {
      EXPECT_THAT(p.summary, HasSubstr("reducers from TF_CONFIG ps"));
      EXPECT_THAT(sets(p), ElementsAre(std::string("NCCL_NET_PLUGIN=") + kPlugin,
                                       "NCCL_NET_PLUGIN_REF_COUNT=1", "NCCL_COLLNET_ENABLE=1",
                                       "TALLY_REDUCERS=tf-ps-0:2222", "MASTER_ADDR=tf-chief-0",
                                       "MASTER_PORT=2222", "WORLD_SIZE=3", "RANK=" + c.rank));
    }
  }
}

TEST(LaunchPlan, TfConfigWithoutChiefMakesWorkerZeroTheMaster) {
  const std::string tf =
      R"({"cluster": {"worker": ["w-0:3333", "w-1:3333"]}, "task": {"type": "worker", "index": 1}})";
  LaunchPlan p = plan({{"TF_CONFIG", tf}});
  EXPECT_THAT(sets(p),
              ElementsAre(std::string("NCCL_NET_PLUGIN=") + kPlugin, "NCCL_NET_PLUGIN_REF_COUNT=1",
                          "NCCL_COLLNET_ENABLE=1", "MASTER_ADDR=w-0", "MASTER_PORT=3333",
                          "WORLD_SIZE=2", "RANK=1"));
}

TEST(LaunchPlan, ClusterSpecWinsOverTfConfig) {
  LaunchPlan p =
      plan({{"CLUSTER_SPEC", clusterSpec("workerpool1", 0)}, {"TF_CONFIG", tfConfig("ps", 0)}});
  EXPECT_EQ(p.role, ClusterRole::kWorker);
  EXPECT_THAT(p.summary, HasSubstr("reducers from CLUSTER_SPEC workerpool2"));
}

TEST(LaunchPlan, UserValuesAreKept) {
  LaunchPlan p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool1", 1)},
                       {"NCCL_NET_PLUGIN_REF_COUNT", "2"},
                       {"MASTER_PORT", "29500"},
                       {"TALLY_REDUCERS", "10.0.0.9:7000"},
                       {"NCCL_NET_PLUGIN", ""}});  // empty counts as unset
  EXPECT_THAT(changes(p, EnvChange::Kind::kKept),
              ElementsAre("NCCL_NET_PLUGIN_REF_COUNT=2", "TALLY_REDUCERS=10.0.0.9:7000",
                          "MASTER_PORT=29500"));
  EXPECT_THAT(sets(p),
              ElementsAre(std::string("NCCL_NET_PLUGIN=") + kPlugin, "NCCL_COLLNET_ENABLE=1",
                          "MASTER_ADDR=primary-0", "WORLD_SIZE=3", "RANK=2"));
  EXPECT_THAT(p.summary, HasSubstr("reducers from TALLY_REDUCERS"));
  EXPECT_THAT(reportLines(p),
              ::testing::Contains("kept NCCL_NET_PLUGIN_REF_COUNT=2, set by the environment"));
  // NCCL_ALGO is the tuner's business, never launch's: a user's value is not even mentioned.
  p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool1", 1)}, {"NCCL_ALGO", "ring"}});
  for (const EnvChange& c : p.env) EXPECT_NE(c.name, "NCCL_ALGO");
  EXPECT_TRUE(p.notes.empty());

  p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool0", 0)}, {"NCCL_COLLNET_ENABLE", "0"}});
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_THAT(p.notes[0],
              HasSubstr("NCCL_COLLNET_ENABLE=0 from the environment turns CollNet off"));
}

// NCCL 2.27 to 2.29 forget the plugin when the last communicator is destroyed: launch keeps it
// loaded with a reference count of 1, and says so when the environment sets 0.
TEST(LaunchPlan, KeepsThePluginLoadedAcrossCommunicators) {
  LaunchPlan p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool1", 0)}});
  EXPECT_THAT(sets(p), ::testing::Contains("NCCL_NET_PLUGIN_REF_COUNT=1"));
  EXPECT_TRUE(p.notes.empty());

  p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool1", 0)}, {"NCCL_NET_PLUGIN_REF_COUNT", "0"}});
  EXPECT_THAT(changes(p, EnvChange::Kind::kKept),
              ::testing::Contains("NCCL_NET_PLUGIN_REF_COUNT=0"));
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_THAT(p.notes[0], HasSubstr("NCCL 2.27 to 2.29 then cannot load Tally again"));

  p = plan({{"CLUSTER_SPEC", clusterSpec("workerpool1", 0)}, {"NCCL_NET_PLUGIN_REF_COUNT", "2"}});
  EXPECT_TRUE(p.notes.empty());
}

TEST(LaunchPlan, NoReducersSaysCollNetIsOffAndLeavesTheAlgorithm) {
  const std::string spec = R"({"cluster": {"workerpool0": ["p:2222"], "workerpool1": ["w:2222"]},)"
                           R"( "task": {"type": "workerpool1", "index": 0}})";
  LaunchPlan p = plan({{"CLUSTER_SPEC", spec}, {"TALLY_REDUCERS", " , "}});
  EXPECT_THAT(p.summary, HasSubstr("CollNet rank 1 of 2, no reducers"));
  EXPECT_THAT(sets(p), ElementsAre(std::string("NCCL_NET_PLUGIN=") + kPlugin,
                                   "NCCL_NET_PLUGIN_REF_COUNT=1", "NCCL_COLLNET_ENABLE=1",
                                   "MASTER_ADDR=p", "MASTER_PORT=2222", "WORLD_SIZE=2", "RANK=1"));
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_THAT(p.notes[0], HasSubstr("WARNING: no reducers known"));
  EXPECT_THAT(p.notes[0], HasSubstr("CollNet will be off"));
}

TEST(LaunchPlan, NoSpecRunsTheCommandUnchanged) {
  LaunchPlan p = plan({{"NCCL_ALGO", "ring"}});
  EXPECT_FALSE(p.has_spec);
  EXPECT_TRUE(p.env.empty());
  EXPECT_EQ(p.argv, kCommand);
  EXPECT_THAT(p.summary, HasSubstr("no CLUSTER_SPEC or TF_CONFIG"));
}

TEST(LaunchPlan, MissingCommandIsAUsageError) {
  for (const auto& env : std::vector<std::map<std::string, std::string>>{
           {},
           {{"CLUSTER_SPEC", clusterSpec("workerpool0", 0)}},
           {{"CLUSTER_SPEC", clusterSpec("workerpool1", 1)}},
           {{"TF_CONFIG", tfConfig("evaluator", 0)}}}) {
    LaunchPlan out;
    out.summary = "untouched";
    Status st = planLaunchFromEnvironment(MapParamSource(env), kPlugin, kReducer, {}, &out);
    EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
    EXPECT_THAT(st.message(), HasSubstr("no command to run"));
    EXPECT_EQ(out.summary, "untouched");
  }
}

TEST(LaunchPlan, MalformedSpecNamesTheVariableAndField) {
  struct Case {
    const char* variable;
    std::string text;
    const char* field;
  };
  for (const Case& c : {Case{"CLUSTER_SPEC", "{", "CLUSTER_SPEC"},
                        Case{"CLUSTER_SPEC", clusterSpec("workerpool1", 2), "task.index"},
                        Case{"TF_CONFIG",
                             R"({"cluster": {"chief": ["c:1"]}, "task": {"type": "chief",)"
                             R"( "index": "one"}})",
                             "task.index"}}) {
    LaunchPlan out;
    out.summary = "untouched";
    Status st = planLaunchFromEnvironment(MapParamSource({{c.variable, c.text}}), kPlugin, kReducer,
                                          kCommand, &out);
    EXPECT_EQ(st.code(), StatusCode::kInvalidUsage) << c.text;
    EXPECT_THAT(st.message(), HasSubstr(c.variable));
    EXPECT_THAT(st.message(), HasSubstr(c.field));
    EXPECT_EQ(out.summary, "untouched");
  }
}

TEST(LaunchText, ShellQuoting) {
  EXPECT_EQ(shellQuote("plain"), "'plain'");
  EXPECT_EQ(shellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(shellQuote(""), "''");
  EXPECT_EQ(shellWord("train.py"), "train.py");
  EXPECT_EQ(shellWord("--lr=0.1"), "--lr=0.1");
  EXPECT_EQ(shellWord("a b"), "'a b'");
  EXPECT_EQ(shellWord("$HOME"), "'$HOME'");
  EXPECT_EQ(shellWord(""), "''");
}

TEST(LaunchText, DryRunIsAShellScriptThatDoesWhatItSays) {
  // Values and notes with quotes, newlines and expansions must reach the command verbatim, and a
  // note's second line must stay a comment.
  const std::string weird = "it's \"$HOME\" `id`\nsecond line \\";
  LaunchPlan p;
  p.summary = "test\necho INJECTED-SUMMARY";
  p.env = {{EnvChange::Kind::kSet, "TALLY_LAUNCH_TEST_VALUE", weird},
           {EnvChange::Kind::kKept, "KEPT", "x\necho INJECTED-KEPT"},
           {EnvChange::Kind::kUnset, "TALLY_LAUNCH_TEST_GONE", "y\necho INJECTED-UNSET"}};
  p.notes = {"WARNING: note\necho INJECTED-NOTE"};
  p.argv = {"sh", "-c",
            "printf '%s|%s|%s' \"$TALLY_LAUNCH_TEST_VALUE\" \"${TALLY_LAUNCH_TEST_GONE-unset}\" "
            "\"$1\"",
            "sh", "arg 'one'"};
  const std::string script = dryRunText(p);
  test::RunResult r = test::runScript(script, {"TALLY_LAUNCH_TEST_GONE=present"});
  EXPECT_EQ(r.out, weird + "|unset|arg 'one'") << script;
  EXPECT_EQ(r.out.find("INJECTED"), std::string::npos) << script;
  EXPECT_THAT(script, HasSubstr("# kept KEPT='x\n# echo INJECTED-KEPT', set by the environment\n"));
}

}  // namespace
}  // namespace tally::commands
