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
  if (text == "0") {
    *seconds = 0;
    return Status::ok();
  }
  return parseWithUnit(text, {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}},
                       "a time such as 50us, 0.2ms or 0", seconds);
}

std::string renderPredictionText(const Prediction& p) {
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
  return out.str();
}

nlohmann::ordered_json predictionJson(const Prediction& p) {
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
  return j;
}

}  // namespace tally::plan
