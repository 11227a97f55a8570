// SPDX-License-Identifier: Apache-2.0
// What `tally plan --format jobset` and `--format slurm` share (plan_formats.h).
#include "tools/commands/plan_formats.h"

namespace tally::plan {
namespace {

// `text` with every line break turned into a blank, so one note stays one comment line.
std::string oneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

}  // namespace

bool parseFormat(const std::string& text, Format* out) {
  if (text == "gcloud") {
    *out = Format::kGcloud;
  } else if (text == "jobset") {
    *out = Format::kJobSet;
  } else if (text == "slurm") {
    *out = Format::kSlurm;
  } else {
    return false;
  }
  return true;
}

std::string planComment(const Plan& plan) {
  std::string text = "# Planned by tally plan for " + oneLine(plan.display_name) + ": ";
  text += resultText(plan) + "\n";
  for (const Rule& rule : plan.rules) {
    if (!rule.pass || rule.warn) {
      text += std::string("#   ") + ruleVerdict(rule) + " " + rule.name + ": " +
              oneLine(rule.detail) + "\n";
    }
  }
  std::vector<std::string> notes = plan.notes;
  const JobSpec& job = plan.planned;
  if (job.pools[3].present && job.pools[3].replica_count > 0) {
    notes.push_back("pool 3 (evaluators) is left out: run the evaluator as a job of its own");
  }
  const PoolSpec& primary = job.pools[0];
  const PoolSpec& workers = job.pools[1];
  if (workers.present && workers.replica_count > 0 &&
      (workers.machine_type != primary.machine_type ||
       workers.accelerator_count != primary.accelerator_count ||
       workers.image_uri != primary.image_uri)) {
    notes.push_back(
        "pool 1 differs from pool 0 (machine, GPUs or image): every GPU host gets "
        "pool 0's");
  }
  for (const std::string& note : notes) text += "# Note: " + oneLine(note) + "\n";
  return text;
}

}  // namespace tally::plan
