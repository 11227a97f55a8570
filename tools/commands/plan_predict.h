// SPDX-License-Identifier: Apache-2.0
// `tally plan`'s prediction: the expected time of one all-reduce of a bucket of S bytes over n
// GPU hosts, with a ring and with m reducers. The model itself is model/allreduce.h, which the
// plugin's tuner uses too; this file parses the flags that feed it and renders what it predicts.
// docs/plan.md gives the formulas and checks them against emulated runs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/allreduce.h"

namespace tally::plan {

using model::AlgoPrediction;
using model::kDefaultBucketBytes;
using model::kDefaultLatencySeconds;
using model::kDefaultMtu;
using model::kDefaultReducerCpuSecondsPerGib;
using model::kDefaultReducerCpuSecondsPerRankCall;
using model::kDefaultRingCpuSecondsPerGib;
using model::kDefaultWorkerCores;
using model::kDefaultWorkerCpuSecondsPerGib;
using model::predictAllReduce;
using model::PredictInput;
using model::Prediction;

// "64M" -> 67108864 (binary K, M, G, T); rejects 0 and anything parseBytes does not accept.
Status parseBucketBytes(const std::string& text, uint64_t* out);
// A tc-style rate in Gbit/s: "200mbit" -> 0.2, "1gbit" -> 1, "500kbit", "100gbit", "1tbit".
Status parseLinkRate(const std::string& text, double* gbps);
// A one-way latency in seconds: "50us" -> 5e-5, "1ms", "0.5ms", "2s", "0"; parseDuration's
// grammar (common/sizes.h), a bare number other than 0 refused.
Status parseLatency(const std::string& text, double* seconds);

// The flags that give the model's inputs directly.
inline constexpr const char* kBucketFlag = "--bucket";
inline constexpr const char* kLatencyFlag = "--latency";
inline constexpr const char* kMtuFlag = "--mtu";
inline constexpr const char* kWorkerCpuFlag = "--worker-cpu-s-per-gib";
inline constexpr const char* kReducerCpuFlag = "--reducer-cpu-s-per-gib";
inline constexpr const char* kRingCpuFlag = "--ring-cpu-s-per-gib";
inline constexpr const char* kReducerCallFlag = "--reducer-call-cpu-us";
inline constexpr const char* kWorkerCoresFlag = "--worker-cores";
inline constexpr const char* kReducerCoresFlag = "--reducer-cores";

// Where the inputs of a prediction came from, beyond their values: the caller's words for the
// ones it worked out (from machine types, or --hosts and --link), and which of the flags above
// were given. An input neither given nor worked out is the model's default; the CPU costs and
// the per-call cost among those were measured on loopback on a 2-vCPU VM, not on the job's
// hosts, and are marked uncalibrated.
struct PredictProvenance {
  std::string hosts = "--hosts";
  std::string host_link = "--link";
  std::string reducers = "--reducers";
  std::string reducer_link = "--reducer-link";
  std::string reducer_cores;  // empty: the model's default, unless --reducer-cores was given
  std::set<std::string> given;
};

// One input as `tally plan` reports it.
struct PredictInputSource {
  std::string name;   // the JSON name, e.g. "rsWorkerCpuSecondsPerGib"
  std::string label;  // the text's, e.g. "rs worker CPU"
  double value = 0;
  std::string unit;    // "Gbps", "CPU-s/GiB", ... ("" for a count)
  std::string source;  // "--worker-cpu-s-per-gib", "n1-highcpu-16's vCPUs", "default: ..."
  bool uncalibrated = false;
};

// The inputs of `prediction`, in the order they are printed.
std::vector<PredictInputSource> predictionInputs(const Prediction& prediction,
                                                 const PredictProvenance& provenance);
// The `tally bench` run that measures the uncalibrated inputs on the user's own host, and for
// each such input the flag that passes it and which of the bench's numbers it takes. Empty when
// every input is calibrated.
struct Calibration {
  std::string command;             // "tally bench --sizes 64M,4K ..."
  std::vector<std::string> flags;  // "--worker-cpu-s-per-gib <rs wcpu at 64M>", ...
};
Calibration calibration(const std::vector<PredictInputSource>& inputs);

// The text section `tally plan` prints, starting with a blank line: the prediction, then its
// inputs with their sources, and how to calibrate the uncalibrated ones.
std::string renderPredictionText(const Prediction& prediction,
                                 const PredictProvenance& provenance = {});
// The same as a JSON object, for renderJson (docs/plan.md lists its fields).
nlohmann::ordered_json predictionJson(const Prediction& prediction,
                                      const PredictProvenance& provenance = {});

}  // namespace tally::plan
