// `tally plan`'s prediction: the expected time of one all-reduce of a bucket of S bytes over n
// GPU hosts, with a ring and with m reducers. The model itself is model/allreduce.h, which the
// plugin's tuner uses too; this file parses the flags that feed it and renders what it predicts.
// docs/plan.md gives the formulas and checks them against emulated runs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"
#include "model/allreduce.h"

namespace tally::plan {

using model::AlgoPrediction;
using model::kDefaultBucketBytes;
using model::kDefaultLatencySeconds;
using model::kDefaultMtu;
using model::kDefaultReducerCpuSecondsPerGib;
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
// A one-way latency in seconds: "50us" -> 5e-5, "1ms", "0.5ms", "2s", "0".
Status parseLatency(const std::string& text, double* seconds);

// The text section `tally plan` prints, starting with a blank line.
std::string renderPredictionText(const Prediction& prediction);
// The same as a JSON object, for renderJson (docs/plan.md lists its fields).
nlohmann::ordered_json predictionJson(const Prediction& prediction);

}  // namespace tally::plan
