// SPDX-License-Identifier: Apache-2.0
// CustomJob specs for the tests of `tally plan` (plan_test.cc, plan_rules_test.cc): pools written
// as JSON, a spec made of them, a plan made from it, and a rule found by name.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test/support/command_run.h"
#include "tools/commands/plan_model.h"

namespace tally::plan::test_specs {

// A pool of n1-highmem-96 hosts with 8 V100s each, running `tally launch -- python train.py`.
inline std::string v100Pool(const std::string& replicas) {
  return R"({"machineSpec": {"machineType": "n1-highmem-96", "acceleratorType": "NVIDIA_TESLA_V100",
        "acceleratorCount": 8}, "replicaCount": )" +
         replicas + R"(,
        "containerSpec": {"imageUri": "gcr.io/p/train", "command": ["tally", "launch", "--"],
                          "args": ["python", "train.py"]}})";
}

// A pool of n1-highcpu-16 reducers on the Tally reducer image; `extra` goes into machineSpec.
inline std::string reducerPool(const std::string& replicas, const std::string& extra = "") {
  return R"({"machineSpec": {"machineType": "n1-highcpu-16")" + extra + R"(}, "replicaCount": )" +
         replicas + R"(, "containerSpec": {"imageUri": "gcr.io/p/tally-reducer"}})";
}

inline std::string evaluatorPool(const std::string& replicas) {
  return R"({"machineSpec": {"machineType": "n1-highcpu-8"}, "replicaCount": )" + replicas +
         R"(, "containerSpec": {"imageUri": "gcr.io/p/train"}})";
}

// `text` with the first `from` replaced by `to`.
inline std::string replaced(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from << " in " << text;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// A bare CustomJobSpec with the given pool entries.
inline std::string specOf(const std::vector<std::string>& pools) {
  std::string text = R"({"workerPoolSpecs": [)";
  for (size_t i = 0; i < pools.size(); ++i) text += (i ? ", " : "") + pools[i];
  return text + "]}";
}

inline Plan planOf(const std::string& text, const PlanOptions& options = {}) {
  JobSpec job;
  Status s = parseJobSpec(text, &job);
  EXPECT_TRUE(s.isOk()) << s.toString();
  Plan plan;
  s = makePlan(job, options, &plan);
  EXPECT_TRUE(s.isOk()) << s.toString();
  return plan;
}

inline const Rule& ruleNamed(const Plan& plan, const std::string& name) {
  for (const auto& rule : plan.rules) {
    if (rule.name == name) return rule;
  }
  static const Rule missing{"missing", false, "no such rule"};
  ADD_FAILURE() << "no rule " << name;
  return missing;
}

// `tally plan ARGS` of the built binary, stdout and stderr together.
inline test::CommandRun runTally(const std::string& args) {
  return test::runCommand(std::string("'") + TALLY_BIN + "' plan " + args);
}

}  // namespace tally::plan::test_specs
