// SPDX-License-Identifier: Apache-2.0
// tally plan: size a Vertex AI CustomJob's reducer pool and print the gcloud command for it.
//
//   tally plan --spec job.json [--reducer-machine M] [--reducer-image URI] [--tier1] [--json]
//              [--format gcloud|jobset|slurm]
//   tally plan --primary-machine n1-highmem-96 --accelerator NVIDIA_TESLA_V100:8 --workers 4
//              [--reducers R] [--image URI] [-- python train.py]
//   tally plan --predict-only --hosts 4 --reducers 4 --link 200mbit [--bucket 64M]
//
// Every plan ends with the expected all-reduce of one bucket (plan_predict.h); --predict-only
// prints only that, for links given as rates instead of machine types.
//
// Exit status: 0 when every rule passes, 1 when one fails, 2 for bad input. The logic is in
// plan_model.h; this file turns flags into a JobSpec and prints.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
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
  // The prediction (plan_predict.h).
  std::string bucket = "64M";
  std::string latency = "50us";
  bool predict_only = false;
  std::string hosts;         // --predict-only: GPU hosts
  std::string link;          // --predict-only: every host's rate, e.g. 200mbit
  std::string reducer_link;  // --predict-only: a reducer's rate (default: --link)
  plan::PredictInput model;  // CPU costs, cores and MTU as given
  double reducer_call_cpu_us = plan::kDefaultReducerCpuSecondsPerRankCall * 1e6;
  bool reducer_cores_given = false;
  std::set<std::string> given;  // the model's flags given on the command line (plan_predict.h)
};

// A machine type from a flag: a known shape, or an error that names the flag.
Status checkMachineFlag(const char* flag, const std::string& machine_type) {
  plan::MachineShape shape;
  Status s = plan::parseMachineType(machine_type, &shape);
  return s.isOk() ? s : Status::invalidUsage(std::string(flag) + ": " + s.message());
}

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
  TALLY_RETURN_IF_ERROR(checkMachineFlag("--primary-machine", flags.primary_machine));
  if (!flags.worker_machine.empty()) {
    TALLY_RETURN_IF_ERROR(checkMachineFlag("--worker-machine", flags.worker_machine));
  }
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
    if (Status s = plan::checkAcceleratorType(host.accelerator_type); !s.isOk()) {
      return Status::invalidUsage("--accelerator: " + s.message());
    }
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

// The model's inputs common to both modes: the flags' CPU costs, cores, MTU, bucket, latency.
Status predictInputFromFlags(const PlanFlags& flags, plan::PredictInput* out) {
  plan::PredictInput in = flags.model;
  in.reducer_cpu_s_per_rank_call = flags.reducer_call_cpu_us * 1e-6;
  TALLY_RETURN_IF_ERROR(plan::parseBucketBytes(flags.bucket, &in.bucket_bytes));
  Status s = plan::parseLatency(flags.latency, &in.latency_s);
  if (!s.isOk()) return Status::invalidUsage("--latency: " + s.message());
  *out = in;
  return Status::ok();
}

// --predict-only: hosts, reducers and link rates from the flags.
Status predictFromFlags(const PlanFlags& flags, plan::Prediction* out,
                        plan::PredictProvenance* provenance) {
  provenance->given = flags.given;
  if (flags.reducer_link.empty()) provenance->reducer_link = "--link";
  plan::PredictInput in;
  TALLY_RETURN_IF_ERROR(predictInputFromFlags(flags, &in));
  if (flags.hosts.empty() || flags.link.empty()) {
    return Status::invalidUsage("--predict-only needs --hosts N and --link RATE (e.g. 200mbit)");
  }
  TALLY_RETURN_IF_ERROR(parseCount("--hosts", flags.hosts, 2, &in.hosts));
  if (!flags.reducers.empty()) {
    TALLY_RETURN_IF_ERROR(parseCount("--reducers", flags.reducers, 0, &in.reducers));
  }
  Status s = plan::parseLinkRate(flags.link, &in.host_gbps);
  if (!s.isOk()) return Status::invalidUsage("--link: " + s.message());
  in.reducer_gbps = in.host_gbps;
  if (!flags.reducer_link.empty()) {
    s = plan::parseLinkRate(flags.reducer_link, &in.reducer_gbps);
    if (!s.isOk()) return Status::invalidUsage("--reducer-link: " + s.message());
  }
  return plan::predictAllReduce(in, out);
}

// The planned job's prediction: its GPU hosts at the slower of pools 0 and 1, its planned
// reducers at the reducer machine's egress and vCPUs. Nothing for fewer than two hosts.
Status predictForPlan(const PlanFlags& flags, plan::Plan* plan) {
  plan::PredictInput in;
  TALLY_RETURN_IF_ERROR(predictInputFromFlags(flags, &in));
  plan::PredictProvenance provenance;
  provenance.given = flags.given;
  provenance.hosts = "pools 0 and 1";
  in.host_gbps = 0;
  for (int i : {0, 1}) {
    const plan::PoolSpec& pool = plan->input.pools[i];
    if (!pool.present || pool.replica_count == 0) continue;
    in.hosts += pool.replica_count;
    double gbps = plan->egress[i].per_replica.gbps;
    if (in.host_gbps == 0 || gbps < in.host_gbps) {
      in.host_gbps = gbps;
      std::string host = pool.machine_type;
      if (pool.hasAccelerators()) {
        host += " + " + std::to_string(pool.accelerator_count) + " x " + pool.accelerator_type;
      }
      provenance.host_link = host + " (" + plan->egress[i].per_replica.source + ")";
    }
  }
  if (in.hosts < 2) return Status::ok();
  const plan::PoolSpec& reducers = plan->planned.pools[2];
  in.reducers = reducers.present ? reducers.replica_count : 0;
  in.reducer_gbps = plan->reducer_machine_egress.gbps;
  provenance.reducers = "the planned pool 2";
  provenance.reducer_link =
      plan->reducer_machine + " (" + plan->reducer_machine_egress.source + ")";
  plan::MachineShape shape;
  if (!flags.reducer_cores_given && plan::parseMachineType(plan->reducer_machine, &shape).isOk() &&
      shape.vcpus > 0) {
    in.reducer_cores = shape.vcpus;
    provenance.reducer_cores = plan->reducer_machine + "'s vCPUs";
  }
  plan::Prediction prediction;
  TALLY_RETURN_IF_ERROR(plan::predictAllReduce(in, &prediction));
  plan->prediction = prediction;
  plan->prediction_sources = provenance;
  return Status::ok();
}

// With --json, stdout gets {"error": "..."} as well as stderr's line.
void printJsonError(const std::string& message) {
  const std::string text =
      nlohmann::json(message).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::printf("{\"error\": %s}\n", text.c_str());
}

int fail(const PlanFlags& flags, const Status& s) {
  std::fprintf(stderr, "tally plan: %s\n", s.message().c_str());
  if (flags.json) printJsonError(s.message());
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
  app->add_option("--bucket", flags->bucket,
                  "Bytes of the all-reduce to predict, K/M/G binary units (default 64M)");
  app->add_option("--latency", flags->latency,
                  "One-way latency of a message between hosts, with a unit: 50us, 0.2ms, or 0 "
                  "(default 50us; a bare number is refused)");
  app->add_option("--mtu", flags->model.mtu, "MTU of the links (sets the framing overhead)")
      ->capture_default_str();
  app->add_option("--worker-cpu-s-per-gib", flags->model.worker_cpu_s_per_gib,
                  "Reduction-server worker CPU-seconds per GiB of its input (tally bench's wcpu)")
      ->capture_default_str();
  app->add_option("--reducer-cpu-s-per-gib", flags->model.reducer_cpu_s_per_gib,
                  "Reducer CPU-seconds per GiB received (tally bench's rcpu)")
      ->capture_default_str();
  app->add_option(
         "--ring-cpu-s-per-gib", flags->model.ring_cpu_s_per_gib,
         "Ring worker CPU-seconds per GiB it sends (tally bench's ring wcpu x n / (2(n-1)))")
      ->capture_default_str();
  app->add_option("--reducer-call-cpu-us", flags->reducer_call_cpu_us,
                  "Reducer CPU-microseconds per rank and call (from tally bench's 4K rows)")
      ->capture_default_str();
  app->add_option("--worker-cores", flags->model.worker_cores, "Cores a worker's data path runs on")
      ->capture_default_str();
  app->add_option("--reducer-cores", flags->model.reducer_cores,
                  "Cores of a reducer (default: the reducer machine's vCPUs)");
  app->add_flag("--predict-only", flags->predict_only,
                "Print only the prediction, for --hosts at --link (no machine types)");
  app->add_option("--hosts", flags->hosts, "--predict-only: GPU hosts in the all-reduce");
  app->add_option("--link", flags->link,
                  "--predict-only: every host's link rate as tc writes it, e.g. 200mbit, 100gbit");
  app->add_option("--reducer-link", flags->reducer_link,
                  "--predict-only: a reducer's link rate (default: --link)");
  app->add_option("command", flags->command, "Training command, after --");
  // A command line that does not parse is an error like any other: with --json (wherever it
  // stands before `--`), in the JSON too.
  cmd.usage_error = [](const std::string& message, const std::vector<std::string>& args) {
    for (const std::string& arg : args) {
      if (arg == "--") return;
      if (arg == "--json") {
        printJsonError(message);
        return;
      }
    }
  };

  cmd.run = [flags, app] {
    PlanFlags& f = *flags;
    plan::Format format = plan::Format::kGcloud;
    if (!plan::parseFormat(f.format, &format)) {
      return fail(f, Status::invalidUsage("--format: expected gcloud, jobset or slurm, got \"" +
                                          f.format + "\""));
    }
    f.reducer_cores_given = app->count("--reducer-cores") > 0;
    for (const char* flag :
         {plan::kBucketFlag, plan::kLatencyFlag, plan::kMtuFlag, plan::kWorkerCpuFlag,
          plan::kReducerCpuFlag, plan::kRingCpuFlag, plan::kReducerCallFlag, plan::kWorkerCoresFlag,
          plan::kReducerCoresFlag}) {
      if (app->count(flag) > 0) f.given.insert(flag);
    }
    if (f.predict_only) {
      for (const char* flag : {"--spec", "--primary-machine", "--accelerator", "--workers",
                               "--worker-machine", "--reducer-machine", "--bandwidth", "--tier1"}) {
        if (app->count(flag) > 0) {
          return fail(f, Status::invalidUsage(std::string(flag) + " does not apply to " +
                                              "--predict-only, which takes --hosts and --link"));
        }
      }
      plan::Prediction prediction;
      plan::PredictProvenance provenance;
      Status s = predictFromFlags(f, &prediction, &provenance);
      if (!s.isOk()) return fail(f, s);
      std::string text = f.json ? plan::predictionJson(prediction, provenance).dump(2) + "\n"
                                : plan::renderPredictionText(prediction, provenance).substr(1);
      std::fputs(text.c_str(), stdout);
      return 0;
    }
    for (const char* flag : {"--hosts", "--link", "--reducer-link"}) {
      if (app->count(flag) > 0) {
        return fail(f, Status::invalidUsage(std::string(flag) + " is for --predict-only; a " +
                                            "plan takes its hosts and rates from the job"));
      }
    }
    plan::PlanOptions options;
    options.region = f.region;
    options.display_name = f.display_name;
    options.reducer_machine = f.reducer_machine;
    if (!f.reducer_machine.empty()) {
      if (Status s = checkMachineFlag("--reducer-machine", f.reducer_machine); !s.isOk()) {
        return fail(f, s);
      }
    }
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
    s = predictForPlan(f, &result);
    if (!s.isOk()) return fail(f, s);
    std::string text = renderOutput(result, format, f.json);
    std::fputs(text.c_str(), stdout);
    return result.ok() ? 0 : 1;
  };
  return cmd;
}

}  // namespace tally::commands
