// tally plan: size a Vertex AI CustomJob's reducer pool and print the gcloud command for it.
//
//   tally plan --spec job.json [--reducer-machine M] [--reducer-image URI] [--tier1] [--json]
//              [--format gcloud|jobset|slurm]
//   tally plan --primary-machine n1-highmem-96 --accelerator NVIDIA_TESLA_V100:8 --workers 4
//              [--reducers R] [--image URI] [-- python train.py]
//
// Exit status: 0 when every rule passes, 1 when one fails, 2 for bad input. The logic is in
// plan_model.h; this file turns flags into a JobSpec and prints.
#include <charconv>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/commands/command.h"
#include "tools/commands/plan_formats.h"
#include "tools/commands/plan_model.h"

namespace tally::commands {
namespace {

struct PlanFlags {
  std::string spec;
  std::string primary_machine;
  std::string accelerator;  // TYPE:COUNT
  std::string workers;      // pool 1 replicas; parsed here so bad input exits 2
  std::string worker_machine;
  std::string reducer_machine;
  std::string reducers;
  std::string image;
  std::string reducer_image;
  std::string region = plan::kDefaultRegion;
  std::string display_name;
  std::vector<std::string> bandwidth;
  std::vector<std::string> command;
  std::string format = "gcloud";
  bool json = false;
  bool tier1 = false;
};

Status parseCount(const std::string& flag, const std::string& text, int64_t min, int64_t* out) {
  int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < min) {
    return Status::invalidUsage(flag + ": expected an integer >= " + std::to_string(min) +
                                ", got \"" + text + "\"");
  }
  *out = n;
  return Status::ok();
}

// The job described by flags instead of a spec file. Pool 2 is left out unless --reducers is
// given; run() then sizes it as recommended.
Status jobFromFlags(const PlanFlags& flags, plan::JobSpec* out) {
  plan::JobSpec job;
  plan::PoolSpec host;
  host.present = true;
  host.machine_type = flags.primary_machine;
  host.replica_count = 1;
  host.image_uri = flags.image;
  if (!flags.accelerator.empty()) {
    size_t colon = flags.accelerator.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return Status::invalidUsage(
          "--accelerator: expected TYPE:COUNT, e.g. NVIDIA_TESLA_V100:8, "
          "got \"" +
          flags.accelerator + "\"");
    }
    host.accelerator_type = flags.accelerator.substr(0, colon);
    TALLY_RETURN_IF_ERROR(parseCount("--accelerator", flags.accelerator.substr(colon + 1), 1,
                                     &host.accelerator_count));
  }
  job.pools[0] = host;
  int64_t workers = 0;
  if (!flags.workers.empty())
    TALLY_RETURN_IF_ERROR(parseCount("--workers", flags.workers, 0, &workers));
  if (workers > 0) {
    job.pools[1] = host;
    if (!flags.worker_machine.empty()) job.pools[1].machine_type = flags.worker_machine;
    job.pools[1].replica_count = workers;
  }
  if (!flags.reducers.empty()) {
    int64_t reducers = 0;
    TALLY_RETURN_IF_ERROR(parseCount("--reducers", flags.reducers, 1, &reducers));
    plan::PoolSpec& pool = job.pools[2];
    pool.present = true;
    pool.machine_type =
        flags.reducer_machine.empty() ? plan::kDefaultReducerMachine : flags.reducer_machine;
    pool.replica_count = reducers;
    pool.image_uri = flags.reducer_image;
  }
  job.display_name = flags.display_name;
  *out = std::move(job);
  return Status::ok();
}

int fail(const PlanFlags& flags, const Status& s) {
  std::fprintf(stderr, "tally plan: %s\n", s.message().c_str());
  if (flags.json) {
    std::string message =
        nlohmann::json(s.message()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::printf("{\"error\": %s}\n", message.c_str());
  }
  return 2;
}

// What stdout gets: the text report (gcloud) or the manifest or script alone, so it can be saved
// and submitted; with --json the document, carrying the manifest or script as a string too.
std::string renderOutput(const plan::Plan& result, plan::Format format, bool json) {
  std::string body;
  const char* key = nullptr;
  if (format == plan::Format::kJobSet) {
    body = plan::renderJobSet(result);
    key = "jobset";
  } else if (format == plan::Format::kSlurm) {
    body = plan::renderSlurm(result);
    key = "slurm";
  }
  if (!json) return key == nullptr ? plan::renderText(result) : body;
  std::string document = plan::renderJson(result);
  if (key == nullptr) return document;
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(document);
  j[key] = body;
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace

Subcommand addPlanCommand(CLI::App& parent) {
  auto flags = std::make_shared<PlanFlags>();
  Subcommand cmd;
  CLI::App* app = parent.add_subcommand(
      "plan", "Check a Vertex AI CustomJob with a Tally reducer pool and size the reducer pool");
  cmd.app = app;
  app->add_option(
      "--spec", flags->spec,
      "CustomJob or CustomJobSpec JSON file (workerPoolSpecs[]); or use the flags below");
  app->add_option("--primary-machine", flags->primary_machine, "Pool 0 machine type");
  app->add_option("--accelerator", flags->accelerator,
                  "GPUs of pools 0 and 1 as TYPE:COUNT, e.g. NVIDIA_TESLA_V100:8");
  app->add_option("--workers", flags->workers, "Pool 1 replicas (0: no pool 1)");
  app->add_option("--worker-machine", flags->worker_machine,
                  "Pool 1 machine type (default: the primary's)");
  app->add_option("--reducers", flags->reducers,
                  "Pool 2 replicas to check (default: size it as recommended)");
  app->add_option("--image", flags->image, "Training container image of pools 0 and 1");
  app->add_option("--reducer-machine", flags->reducer_machine,
                  std::string("Reducer machine type to plan for (default: pool 2's, else ") +
                      plan::kDefaultReducerMachine + ")");
  app->add_option("--reducer-image", flags->reducer_image,
                  "Tally reducer container image for pool 2 (default: pool 2's)");
  app->add_option("--region", flags->region, "Region of the gcloud command")->capture_default_str();
  app->add_option("--display-name", flags->display_name,
                  "Job display name (default: the spec's, else tally-job)");
  app->add_option("--bandwidth", flags->bandwidth,
                  "MACHINE=GBPS egress of a machine type, over the built-in table (repeatable)")
      ->allow_extra_args(false);
  app->add_flag("--tier1", flags->tier1,
                "The VMs use Tier_1 networking: n2, n2d, c2 and c2d shapes large enough for it "
                "count at their Tier_1 egress (50 to 100 Gbps)");
  app->add_flag("--json", flags->json, "Print a JSON document instead of text");
  app->add_option("--format", flags->format,
                  "gcloud: the report with Vertex AI's gcloud command; jobset: a Kubernetes "
                  "JobSet manifest; slurm: an sbatch script of a heterogeneous job")
      ->capture_default_str();
  app->add_option("command", flags->command, "Training command, after --");

  cmd.run = [flags, app] {
    PlanFlags& f = *flags;
    plan::Format format = plan::Format::kGcloud;
    if (!plan::parseFormat(f.format, &format)) {
      return fail(f, Status::invalidUsage("--format: expected gcloud, jobset or slurm, got \"" +
                                          f.format + "\""));
    }
    plan::PlanOptions options;
    options.region = f.region;
    options.display_name = f.display_name;
    options.reducer_machine = f.reducer_machine;
    options.reducer_image = f.reducer_image;
    options.train_command = f.command;
    options.tier1 = f.tier1;
    for (const auto& text : f.bandwidth) {
      Status s = plan::parseBandwidthOverride(text, &options.bandwidth);
      if (!s.isOk()) return fail(f, s);
    }

    plan::JobSpec job;
    bool size_reducers = false;
    if (!f.spec.empty()) {
      for (const char* flag : {"--primary-machine", "--accelerator", "--workers",
                               "--worker-machine", "--reducers", "--image"}) {
        if (app->count(flag) > 0) {
          return fail(f, Status::invalidUsage(std::string(flag) + " describes the job that " +
                                              "--spec already describes; give one or the other"));
        }
      }
      Status s = plan::readJobSpecFile(f.spec, &job);
      if (!s.isOk()) return fail(f, s);
    } else {
      if (f.primary_machine.empty()) {
        return fail(f, Status::invalidUsage("give --spec FILE, or --primary-machine and the "
                                            "other pool flags (see tally plan --help)"));
      }
      Status s = jobFromFlags(f, &job);
      if (!s.isOk()) return fail(f, s);
      size_reducers = f.reducers.empty();
    }

    plan::Plan result;
    Status s = plan::makePlan(job, options, &result);
    if (!s.isOk()) return fail(f, s);
    if (size_reducers && result.recommended_reducers > 0) {
      // No --reducers: check the job with its reducer pool sized as recommended.
      plan::PoolSpec& pool = job.pools[2];
      pool.present = true;
      pool.machine_type = result.reducer_machine;
      pool.replica_count = result.recommended_reducers;
      pool.image_uri = f.reducer_image;
      s = plan::makePlan(job, options, &result);
      if (!s.isOk()) return fail(f, s);
    }
    std::string text = renderOutput(result, format, f.json);
    std::fputs(text.c_str(), stdout);
    return result.ok() ? 0 : 1;
  };
  return cmd;
}

}  // namespace tally::commands
