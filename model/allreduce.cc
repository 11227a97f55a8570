// SPDX-License-Identifier: Apache-2.0
// The all-reduce model of allreduce.h.
#include "model/allreduce.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace tally::model {
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

double bodySeconds(const AlgoPrediction& p) {
  return std::max({p.host_link_s, p.reducer_link_s, p.worker_cpu_s, p.reducer_cpu_s});
}

// Sets seconds from the terms and latency_s, then the bound and the bandwidths.
void finish(const PredictInput& in, AlgoPrediction* p) {
  p->seconds = bodySeconds(*p) + p->latency_s;
  p->bound = largest({{"host link", p->host_link_s},
                      {"reducer link", p->reducer_link_s},
                      {"worker CPU", p->worker_cpu_s},
                      {"reducer CPU", p->reducer_cpu_s},
                      {"latency", p->latency_s}});
  double n = static_cast<double>(in.hosts);
  p->algbw_gbs = static_cast<double>(in.bucket_bytes) / p->seconds / 1e9;
  p->busbw_gbs = p->algbw_gbs * 2.0 * (n - 1.0) / n;
}

// What the calls of a reduction-server all-reduce add to its bytes' time (allreduce.h): the
// first call's whole per-call cost, then per later call whatever of the latency share and the
// per-rank work its bytes do not cover.
double rsCallSeconds(const PredictInput& in, double wire_bytes, double body_s) {
  const double n = static_cast<double>(in.hosts);
  const double call_bytes = in.rs_call_bytes == 0
                                ? wire_bytes
                                : std::min(wire_bytes, static_cast<double>(in.rs_call_bytes));
  const double trips_s = 4.0 * in.latency_s;
  const double ranks_s = n * in.reducer_cpu_s_per_rank_call / in.reducer_cores;
  const double calls = std::max(1.0, std::ceil(wire_bytes / call_bytes));
  const double call_body_s = body_s / calls;
  const double later_call_s =
      std::max({call_body_s, trips_s / static_cast<double>(in.rs_calls_in_flight), ranks_s});
  // The first slice's bytes once more (there and back in turn); the bytes of every call but the
  // first are inside later_call_s, so take them back out.
  const double first_slice_s =
      body_s * std::min(1.0, static_cast<double>(kFirstSliceBytes) / wire_bytes);
  return trips_s + ranks_s + first_slice_s + (calls - 1.0) * (later_call_s - call_body_s);
}

// The bytes a reduction-server all-reduce moves per host: the bucket, its last call rounded up to
// whole chunks.
double rsWireBytes(const PredictInput& in) {
  const uint64_t s = in.bucket_bytes;
  if (in.rs_chunk_bytes == 0) return static_cast<double>(s);
  const uint64_t call = in.rs_call_bytes == 0 ? s : in.rs_call_bytes;
  const uint64_t full = s / call * call;
  const uint64_t tail = s - full;
  const uint64_t chunk = in.rs_chunk_bytes;
  return static_cast<double>(full + std::min(call, (tail + chunk - 1) / chunk * chunk));
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
      !(in.ring_cpu_s_per_gib >= 0) || !(in.reducer_cpu_s_per_rank_call >= 0)) {
    return bad("latency and CPU costs must be 0 or more");
  }
  if (!(in.worker_cores > 0) || !(in.reducer_cores > 0)) return bad("cores must be above 0");
  if (in.rs_calls_in_flight < 1) return bad("calls in flight must be 1 or more");

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
    const double wire = rsWireBytes(in);
    double per_reducer = n * wire / m;  // in from the n workers at once, and out again
    p.has_rs = true;
    p.rs.host_link_s = wire / host_rate;
    p.rs.reducer_link_s = per_reducer / reducer_rate;
    p.rs.worker_cpu_s = in.worker_cpu_s_per_gib * wire / kGib / in.worker_cores;
    p.rs.reducer_cpu_s = in.reducer_cpu_s_per_gib * per_reducer / kGib / in.reducer_cores;
    p.rs.latency_s = rsCallSeconds(in, wire, bodySeconds(p.rs));
    finish(in, &p.rs);
    p.speedup = p.ring.seconds / p.rs.seconds;
  }
  *out = std::move(p);
  return Status::ok();
}

}  // namespace tally::model
