// The all-reduce model of plan_predict.h and its text and JSON rendering.
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

constexpr double kGib = 1024.0 * 1024.0 * 1024.0;
// Per packet: IPv4 and TCP headers with timestamps (52 bytes) inside the MTU, and the Ethernet
// header (14) outside it, which is what a tc rate limit counts. Both algorithms move data both
// ways on every link at once, so each direction also carries the ACKs of the data coming the
// other way: a 66-byte frame (those headers, no payload) for every second full segment, TCP's
// delayed ACK.
constexpr int kTcpIpHeaderBytes = 52;
constexpr int kEthernetHeaderBytes = 14;
constexpr int kAckFrameBytes = kTcpIpHeaderBytes + kEthernetHeaderBytes;
constexpr double kSegmentsPerAck = 2;

// Bytes of payload per second over a link of `gbps` at the given payload fraction.
double payloadRate(double gbps, double payload_fraction) {
  return gbps * 1e9 / 8.0 * payload_fraction;
}

// The name of the largest of the terms (the first one on a tie).
std::string largest(const std::vector<std::pair<const char*, double>>& terms) {
  auto it = std::max_element(terms.begin(), terms.end(),
                             [](const auto& a, const auto& b) { return a.second < b.second; });
  return it->first;
}

void finish(const PredictInput& in, AlgoPrediction* p) {
  double body = std::max({p->host_link_s, p->reducer_link_s, p->worker_cpu_s, p->reducer_cpu_s});
  p->seconds = body + p->latency_s;
  p->bound = largest({{"host link", p->host_link_s},
                      {"reducer link", p->reducer_link_s},
                      {"worker CPU", p->worker_cpu_s},
                      {"reducer CPU", p->reducer_cpu_s},
                      {"latency", p->latency_s}});
  double n = static_cast<double>(in.hosts);
  p->algbw_gbs = static_cast<double>(in.bucket_bytes) / p->seconds / 1e9;
  p->busbw_gbs = p->algbw_gbs * 2.0 * (n - 1.0) / n;
}

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

Status predictAllReduce(const PredictInput& in, Prediction* out) {
  auto bad = [](const std::string& what) { return Status::invalidUsage("prediction: " + what); };
  if (in.hosts < 2) {
    return bad("needs two or more hosts (one host all-reduces without the network), got " +
               std::to_string(in.hosts));
  }
  if (in.reducers < 0) return bad("reducers must be 0 or more");
  if (!(in.host_gbps > 0) || (in.reducers > 0 && !(in.reducer_gbps > 0))) {
    return bad("link rates must be above 0");
  }
  if (in.mtu < 576 || in.mtu > 65536) {
    return bad("MTU must be 576 to 65536, got " + std::to_string(in.mtu));
  }
  if (in.bucket_bytes == 0) return bad("the bucket must hold at least one byte");
  if (!(in.latency_s >= 0) || !(in.worker_cpu_s_per_gib >= 0) || !(in.reducer_cpu_s_per_gib >= 0) ||
      !(in.ring_cpu_s_per_gib >= 0)) {
    return bad("latency and CPU costs must be 0 or more");
  }
  if (!(in.worker_cores > 0) || !(in.reducer_cores > 0)) return bad("cores must be above 0");

  Prediction p;
  p.input = in;
  p.payload_fraction = static_cast<double>(in.mtu - kTcpIpHeaderBytes) /
                       (in.mtu + kEthernetHeaderBytes + kAckFrameBytes / kSegmentsPerAck);
  double n = static_cast<double>(in.hosts);
  double s = static_cast<double>(in.bucket_bytes);
  double host_rate = payloadRate(in.host_gbps, p.payload_fraction);

  // Ring: reduce-scatter then all-gather, n - 1 steps each, every step S / n each way.
  p.ring.host_link_s = 2.0 * (n - 1.0) / n * s / host_rate;
  p.ring.worker_cpu_s = in.ring_cpu_s_per_gib * 2.0 * (n - 1.0) / n * s / kGib / in.worker_cores;
  p.ring.latency_s = 2.0 * (n - 1.0) * in.latency_s;
  finish(in, &p.ring);

  if (in.reducers > 0) {
    double m = static_cast<double>(in.reducers);
    double reducer_rate = payloadRate(in.reducer_gbps, p.payload_fraction);
    double per_reducer = n * s / m;  // in from the n workers at once, and out again
    p.has_rs = true;
    p.rs.host_link_s = s / host_rate;
    p.rs.reducer_link_s = per_reducer / reducer_rate;
    p.rs.worker_cpu_s = in.worker_cpu_s_per_gib * s / kGib / in.worker_cores;
    p.rs.reducer_cpu_s = in.reducer_cpu_s_per_gib * per_reducer / kGib / in.reducer_cores;
    p.rs.latency_s = 2.0 * in.latency_s;
    finish(in, &p.rs);
    p.speedup = p.ring.seconds / p.rs.seconds;
  }
  *out = std::move(p);
  return Status::ok();
}

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
