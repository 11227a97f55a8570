// SPDX-License-Identifier: Apache-2.0
// The flags and rendering of plan_predict.h; the model is model/allreduce.cc.
#include "tools/commands/plan_predict.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>
#include <vector>

#include "common/params.h"
#include "common/sizes.h"

namespace tally::plan {
namespace {

using Units = std::vector<std::pair<std::string, double>>;

// A non-negative decimal number followed by one of `units` (case-insensitive), times its factor.
Status parseWithUnit(const std::string& text, const Units& units, const std::string& expected,
                     double* out) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  double value = 0;
  auto [rest, ec] = std::from_chars(begin, end, value);
  if (text.empty() || ec != std::errc() || !std::isfinite(value) || value < 0) {
    return Status::invalidUsage("expected " + expected + ", got \"" + text + "\"");
  }
  std::string suffix(rest, end);
  for (char& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& [unit, scale] : units) {
    if (suffix == unit) {
      *out = value * scale;
      return Status::ok();
    }
  }
  return Status::invalidUsage("expected " + expected + ", got \"" + text + "\"");
}

std::string numberText(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// Three significant digits in the largest unit under the value: "2.87 s", "30.7 ms", "410 us".
std::string timeText(double seconds) {
  double value = seconds * 1e6;
  const char* unit = "us";
  if (seconds >= 1) {
    value = seconds;
    unit = "s";
  } else if (seconds >= 1e-3) {
    value = seconds * 1e3;
    unit = "ms";
  }
  char text[32];
  int decimals = value >= 100 ? 0 : value >= 10 ? 1 : 2;
  if (value == 0) decimals = 0;
  std::snprintf(text, sizeof(text), "%.*f %s", decimals, value, unit);
  return text;
}

// Three significant digits, trailing zeros kept: "0.0150", "4.30", "22.6", "118".
std::string rateText(double gbs) {
  char text[32];
  if (gbs >= 100) {
    std::snprintf(text, sizeof(text), "%.0f", gbs);
  } else {
    std::snprintf(text, sizeof(text), "%#.3g", gbs);
  }
  return text;
}

nlohmann::ordered_json algoJson(const AlgoPrediction& p, bool rs) {
  nlohmann::ordered_json j;
  j["seconds"] = p.seconds;
  j["algbwGBs"] = p.algbw_gbs;
  j["busbwGBs"] = p.busbw_gbs;
  j["bound"] = p.bound;
  j["hostLinkSeconds"] = p.host_link_s;
  if (rs) j["reducerLinkSeconds"] = p.reducer_link_s;
  j["workerCpuSeconds"] = p.worker_cpu_s;
  if (rs) j["reducerCpuSeconds"] = p.reducer_cpu_s;
  j["latencySeconds"] = p.latency_s;
  return j;
}

}  // namespace

Status parseBucketBytes(const std::string& text, uint64_t* out) {
  uint64_t bytes = 0;
  Status s = parseBytes(text, &bytes);
  if (!s.isOk() || bytes == 0) {
    return Status::invalidUsage(
        "--bucket: expected a size above 0 such as 64M, 512K or 1G (K, M, "
        "G: binary units), got \"" +
        text + "\"");
  }
  *out = bytes;
  return Status::ok();
}

Status parseLinkRate(const std::string& text, double* gbps) {
  double value = 0;
  Status s = parseWithUnit(text, {{"kbit", 1e-6}, {"mbit", 1e-3}, {"gbit", 1}, {"tbit", 1e3}},
                           "a rate as tc writes it, e.g. 200mbit, 1gbit or 100gbit", &value);
  if (!s.isOk()) return s;
  if (!(value > 0)) return Status::invalidUsage("expected a rate above 0, got \"" + text + "\"");
  *gbps = value;
  return Status::ok();
}

Status parseLatency(const std::string& text, double* seconds) {
  int64_t ns = 0;
  TALLY_RETURN_IF_ERROR(parseDuration(text, DurationUnit::kNone, &ns));
  *seconds = static_cast<double>(ns) * 1e-9;
  return Status::ok();
}

namespace {

std::string inputValueText(const PredictInputSource& input) {
  if (input.unit == "bytes") return formatBytes(static_cast<uint64_t>(input.value));
  if (input.unit == "s") return timeText(input.value);
  return numberText(input.value) + (input.unit.empty() ? "" : " " + input.unit);
}

// The inputs with their sources, a line on a bound that rests on an uncalibrated input, and the
// bench run that calibrates them.
std::string renderInputs(const Prediction& p, const PredictProvenance& provenance) {
  std::vector<PredictInputSource> inputs = predictionInputs(p, provenance);
  std::ostringstream out;
  out << "  inputs (* uncalibrated: a default measured on loopback on a 2-vCPU VM, not on these "
         "hosts)\n";
  char line[512];
  for (const auto& input : inputs) {
    std::snprintf(line, sizeof(line), "    %-17s %s  %-16s %s\n", input.label.c_str(),
                  input.uncalibrated ? "*" : " ", inputValueText(input).c_str(),
                  input.source.c_str());
    out << line;
  }
  // A CPU bound rests on the CPU inputs of that side.
  auto uncalibrated = [&inputs](const std::string& name) {
    for (const auto& input : inputs) {
      if (input.name == name) return input.uncalibrated;
    }
    return false;
  };
  std::set<std::string> said;
  auto checkBound = [&](const AlgoPrediction& a, const char* cost) {
    if ((a.bound == "worker CPU" || a.bound == "reducer CPU") && uncalibrated(cost) &&
        said.insert(a.bound).second) {
      out << "  bound by " << a.bound
          << ": an uncalibrated input (*) decides this time; calibrate before trusting it\n";
    }
  };
  checkBound(p.ring, "ringCpuSecondsPerGib");
  if (p.has_rs) {
    checkBound(
        p.rs, p.rs.bound == "reducer CPU" ? "reducerCpuSecondsPerGib" : "rsWorkerCpuSecondsPerGib");
  }
  Calibration calibrate = calibration(inputs);
  if (!calibrate.flags.empty()) {
    out << "  calibrate the * inputs: on one of your GPU hosts run\n    " << calibrate.command
        << "\n  and pass\n";
    for (const auto& flag : calibrate.flags) out << "    " << flag << "\n";
  }
  return out.str();
}

}  // namespace

std::string renderPredictionText(const Prediction& p, const PredictProvenance& provenance) {
  const PredictInput& in = p.input;
  std::ostringstream out;
  out << "\nPredicted all-reduce of one " << formatBytes(in.bucket_bytes) << " bucket\n";
  out << "  links: " << in.hosts << " hosts at " << numberText(in.host_gbps) << " Gbps";
  if (p.has_rs) {
    out << ", " << in.reducers << " reducers at " << numberText(in.reducer_gbps) << " Gbps";
  }
  char line[256];
  std::snprintf(line, sizeof(line), "; %.1f%% payload at MTU %d; latency %s one way\n",
                p.payload_fraction * 100, in.mtu, timeText(in.latency_s).c_str());
  out << line;
  std::snprintf(line, sizeof(line),
                "  CPU: ring worker %s, rs worker %s on %s cores, reducer %s on %s cores "
                "(CPU-s/GiB)\n",
                numberText(in.ring_cpu_s_per_gib).c_str(),
                numberText(in.worker_cpu_s_per_gib).c_str(), numberText(in.worker_cores).c_str(),
                numberText(in.reducer_cpu_s_per_gib).c_str(), numberText(in.reducer_cores).c_str());
  out << line;
  std::snprintf(line, sizeof(line), "  %-17s %10s %12s %12s  %s\n", "", "time", "algbw GB/s",
                "busbw GB/s", "bound by");
  out << line;
  auto row = [&](const char* name, const AlgoPrediction& a) {
    std::snprintf(line, sizeof(line), "  %-17s %10s %12s %12s  %s\n", name,
                  timeText(a.seconds).c_str(), rateText(a.algbw_gbs).c_str(),
                  rateText(a.busbw_gbs).c_str(), a.bound.c_str());
    out << line;
  };
  row("ring", p.ring);
  if (p.has_rs) {
    row("reduction server", p.rs);
    std::snprintf(line, sizeof(line), "  rs/ring: %.2f (ring time / reduction-server time)\n",
                  p.speedup);
    out << line;
  } else {
    out << "  reduction server: no reducers\n";
  }
  out << renderInputs(p, provenance);
  return out.str();
}

nlohmann::ordered_json predictionJson(const Prediction& p, const PredictProvenance& provenance) {
  const PredictInput& in = p.input;
  nlohmann::ordered_json j;
  j["bucketBytes"] = in.bucket_bytes;
  j["hosts"] = in.hosts;
  j["reducers"] = in.reducers;
  j["hostGbps"] = in.host_gbps;
  j["reducerGbps"] = in.reducer_gbps;
  j["latencySeconds"] = in.latency_s;
  j["mtu"] = in.mtu;
  j["payloadFraction"] = p.payload_fraction;
  j["cpuSecondsPerGib"] = {{"ringWorker", in.ring_cpu_s_per_gib},
                           {"rsWorker", in.worker_cpu_s_per_gib},
                           {"reducer", in.reducer_cpu_s_per_gib}};
  j["workerCores"] = in.worker_cores;
  j["reducerCores"] = in.reducer_cores;
  j["ring"] = algoJson(p.ring, false);
  j["rs"] = p.has_rs ? algoJson(p.rs, true) : nlohmann::ordered_json(nullptr);
  j["rsOverRing"] = p.has_rs ? nlohmann::ordered_json(p.speedup) : nlohmann::ordered_json(nullptr);
  std::vector<PredictInputSource> inputs = predictionInputs(p, provenance);
  j["inputs"] = nlohmann::ordered_json::array();
  for (const auto& input : inputs) {
    j["inputs"].push_back({{"name", input.name},
                           {"value", input.value},
                           {"unit", input.unit},
                           {"source", input.source},
                           {"uncalibrated", input.uncalibrated}});
  }
  Calibration calibrate = calibration(inputs);
  j["calibrate"] = calibrate.flags.empty() ? nlohmann::ordered_json(nullptr)
                                           : nlohmann::ordered_json{{"command", calibrate.command},
                                                                    {"flags", calibrate.flags}};
  return j;
}

}  // namespace tally::plan
