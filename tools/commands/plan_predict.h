// `tally plan`'s prediction: the expected time of one all-reduce of a bucket of S bytes over n
// GPU hosts, with a ring and with m reducers, from a model of the links and of the CPU each byte
// costs. No I/O; docs/plan.md gives the formulas and checks them against emulated runs.
//
// Each link is full duplex at rate B (bytes of payload per second: the rate in bits / 8, less
// TCP/IP and Ethernet framing at the MTU and the ACKs of the data coming the other way; 93.6% at
// MTU 1500). Per host and call:
//   ring:  each host sends and receives 2(n-1)/n S, in 2(n-1) steps that each wait for a
//          neighbour: link = 2(n-1)/n S / B_host, latency = 2(n-1) L.
//   rs:    each host sends S and receives S: S / B_host; each reducer receives n S / m (n
//          workers sending to it at once: the incast) and sends n S / m: n S / (m B_reducer);
//          one trip there and back: latency = 2 L.
// The CPU term: c CPU-seconds per GiB, spread over k cores: c x GiB / k, per worker of the ring
// (its 2(n-1)/n S), per reduction-server worker (S) and per reducer (n S / m). Links and CPU work
// at once on the slices of a call, so the slowest side bounds: time = max(link terms, CPU terms) +
// latency.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace tally::plan {

inline constexpr uint64_t kDefaultBucketBytes = 64ull << 20;  // PyTorch DDP's 64 MiB bucket
inline constexpr int kDefaultMtu = 1500;
// One-way time of a message between two hosts, software included. An assumption for cloud VMs in
// one zone (tens of microseconds); --latency sets it.
inline constexpr double kDefaultLatencySeconds = 50e-6;
// CPU-seconds per GiB that `tally bench` measured (docs/performance.md, "Progress from test()":
// 64 MiB on loopback, 4 workers, the default progress thread, medians of three runs): a
// reduction-server worker per GiB of its input, which is what it sends (wcpu 0.98); the
// reducers per GiB they receive (rcpu 0.64); a ring worker per GiB it sends: the ring's wcpu
// (1.2 per GiB of input) over the 2(n-1)/n = 1.5 GiB it sends per GiB of input at n = 4.
inline constexpr double kDefaultWorkerCpuSecondsPerGib = 0.98;
inline constexpr double kDefaultReducerCpuSecondsPerGib = 0.64;
inline constexpr double kDefaultRingCpuSecondsPerGib = 0.8;
// Cores a worker's data path runs on: the thread that posts slices and the progress thread that
// reads results. A reducer runs --threads loops, one per core by default: its machine's vCPUs.
inline constexpr int kDefaultWorkerCores = 2;

struct PredictInput {
  int64_t hosts = 0;     // n: GPU hosts in the all-reduce (pools 0 and 1)
  int64_t reducers = 0;  // m: 0 predicts the ring only
  double host_gbps = 0;  // a host's link rate, each direction, in Gbit/s (10^9)
  double reducer_gbps = 0;
  double latency_s = kDefaultLatencySeconds;
  int mtu = kDefaultMtu;
  uint64_t bucket_bytes = kDefaultBucketBytes;  // S
  double worker_cpu_s_per_gib = kDefaultWorkerCpuSecondsPerGib;
  double reducer_cpu_s_per_gib = kDefaultReducerCpuSecondsPerGib;
  double ring_cpu_s_per_gib = kDefaultRingCpuSecondsPerGib;
  double worker_cores = kDefaultWorkerCores;
  double reducer_cores = 16;  // the reducer machine's vCPUs
};

// One algorithm's expected call. Times in seconds; bandwidths in GB/s (10^9 B/s) as
// `tally bench` prints them.
struct AlgoPrediction {
  double seconds = 0;         // max(link terms, CPU terms) + latency
  double host_link_s = 0;     // the host's bytes over its link
  double reducer_link_s = 0;  // rs only: a reducer's n S / m over its link
  double worker_cpu_s = 0;
  double reducer_cpu_s = 0;  // rs only
  double latency_s = 0;
  std::string bound;     // the largest term: "host link", "reducer link", "worker CPU", ...
  double algbw_gbs = 0;  // S / seconds
  double busbw_gbs = 0;  // algbw x 2(n-1)/n
};

struct Prediction {
  PredictInput input;
  double payload_fraction = 0;  // of the link rate that carries data: 1448 / (1514 + 66 / 2)
  AlgoPrediction ring;
  bool has_rs = false;  // m > 0
  AlgoPrediction rs;
  double speedup = 0;  // ring time / rs time; 0 without rs
};

// Checks the input (n >= 2, rates > 0, MTU 576..65536, bucket > 0, CPU costs >= 0, cores > 0)
// and computes the prediction. kInvalidUsage naming the bad value; *out is written only on
// success.
Status predictAllReduce(const PredictInput& input, Prediction* out);

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
