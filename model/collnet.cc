// SPDX-License-Identifier: Apache-2.0
// NCCL's view of the all-reduce model (collnet.h).
#include "model/collnet.h"

#include <algorithm>
#include <cstdio>

#include "common/sizes.h"

namespace tally::model {
namespace {

// NCCL's tuning constants for the ring (tuning.cc's defaults), microseconds.
constexpr double kRingSimpleBase = 8.4;
constexpr double kRingLlBase = 6.6;
constexpr double kNetSimpleStep = 14.0;
constexpr double kNetLlStep = 2.7;
constexpr double kNetTreeLlStep = 5.0;  // with one rank per node NCCL takes the tree's net latency
constexpr double kPciSimpleStep = 5.7;
constexpr double kPciLlStep = 1.0;
constexpr double kRingSimplePlateau = 1.4;
constexpr uint64_t kPlateauBytesPerChannelRank = 64;
constexpr uint64_t kChainMinChunk = 32 * 1024;

bool covered(const CollNetSetup& s) {
  return s.reducers > 0 && s.nodes >= 2 && s.ranks >= s.nodes && s.link_mbps > 0;
}

int depthOf(const CollNetSetup& s) {
  return static_cast<int>(std::max<int64_t>(1, s.ranks / std::max<int64_t>(1, s.nodes)));
}

// The model's CollNet all-reduce of `bytes` in calls of `call_bytes`, microseconds; `bound`, when
// given, gets the term that bounds it ("reducer link", "worker CPU", ...).
double modelMicros(const CollNetSetup& s, uint64_t bytes, uint64_t call_bytes, uint64_t chunk,
                   std::string* bound = nullptr, double* ring_micros = nullptr) {
  PredictInput in;
  in.hosts = s.nodes;
  in.reducers = s.reducers;
  in.host_gbps = s.link_mbps / 1000.0;
  in.reducer_gbps = in.host_gbps;
  in.latency_s = s.latency_s;
  in.bucket_bytes = std::max<uint64_t>(1, bytes);
  in.reducer_cores = s.reducer_cores;
  in.rs_call_bytes = call_bytes;
  in.rs_chunk_bytes = chunk;
  Prediction p;
  if (!predictAllReduce(in, &p).isOk()) return -1;
  if (bound != nullptr) *bound = p.rs.bound;
  if (ring_micros != nullptr) *ring_micros = p.ring.seconds * 1e6;
  return p.rs.seconds * 1e6;
}

}  // namespace

CollNetSetup collNetSetupFrom(const Params& params, size_t reducers, size_t n_ranks, size_t n_nodes,
                              bool sets_chunk) {
  CollNetSetup s;
  s.ranks = static_cast<int64_t>(n_ranks);
  s.nodes = static_cast<int64_t>(n_nodes);
  s.reducers = params.tuner ? static_cast<int64_t>(reducers) : 0;
  s.link_from_config = params.linkMbps > 0;
  s.link_mbps = s.link_from_config ? static_cast<int>(params.linkMbps) : kAssumedLinkMbps;
  s.buff_size = params.ncclBuffsize > 0 ? params.ncclBuffsize : kNcclDefaultBuffSize;
  s.latency_s = static_cast<double>(params.linkLatencyUs) * 1e-6;
  s.tuner_sets_chunk = sets_chunk;
  return s;
}

uint64_t maxCollNetChunk(uint64_t buff_size) { return buff_size / kNcclSteps; }

uint64_t ncclCollNetChunk(uint64_t bytes, int channels, int depth, uint64_t buff_size) {
  const uint64_t per = static_cast<uint64_t>(std::max(1, channels));
  const uint64_t d = static_cast<uint64_t>(std::max(1, depth));
  uint64_t chunk = std::min(kNcclChainMaxChunk, maxCollNetChunk(buff_size));
  while (bytes / (per * chunk) < d * 64 && chunk > 128 * 1024) chunk /= 2;
  while (bytes / (per * chunk) < d * 8 && chunk > 64 * 1024) chunk /= 2;
  while (bytes / (per * chunk) < d && chunk > kChainMinChunk) chunk /= 2;
  return chunk;
}

uint64_t tunerCollNetChunk(const CollNetSetup& s, uint64_t bytes, int channels,
                           uint64_t nccl_chunk) {
  if (!covered(s) || nccl_chunk == 0) return nccl_chunk;
  const uint64_t subs = static_cast<uint64_t>(std::clamp(channels, 1, kNcclSteps));
  uint64_t best = nccl_chunk;
  double best_us = modelMicros(s, bytes, subs * nccl_chunk, nccl_chunk);
  for (uint64_t c = nccl_chunk * 2; c <= maxCollNetChunk(s.buff_size); c *= 2) {
    const double us = modelMicros(s, bytes, subs * c, c);
    if (us >= 0 && us < best_us) {
      best = c;
      best_us = us;
    }
  }
  return best;
}

double collNetAllReduceMicros(const CollNetSetup& s, uint64_t bytes, double* ring_micros) {
  if (!covered(s)) return -1;
  const int channels = kAssumedCollNetChannels;
  uint64_t chunk = ncclCollNetChunk(bytes, channels, depthOf(s), s.buff_size);
  if (s.tuner_sets_chunk) chunk = tunerCollNetChunk(s, bytes, channels, chunk);
  return modelMicros(s, bytes, static_cast<uint64_t>(channels) * chunk, chunk, nullptr,
                     ring_micros);
}

double modelRingMicros(const CollNetSetup& s, uint64_t bytes) {
  double ring = -1;
  return collNetAllReduceMicros(s, bytes, &ring) < 0 ? -1 : ring;
}

double collNetCostMicros(const CollNetSetup& s, uint64_t bytes, double nccl_ring_micros) {
  double ring = -1;
  const double rs = collNetAllReduceMicros(s, bytes, &ring);
  if (rs < 0 || !(ring > 0)) return -1;
  if (!(nccl_ring_micros > 0)) nccl_ring_micros = ncclRingAllReduceMicros(s, bytes);
  if (!(nccl_ring_micros > 0)) return -1;
  return std::min(rs, nccl_ring_micros * (rs / ring));
}

double ncclRingAllReduceMicros(const CollNetSetup& s, uint64_t bytes) {
  if (s.ranks < 2 || s.link_mbps <= 0) return -1;
  const double ranks = static_cast<double>(s.ranks);
  const double steps = 2.0 * (ranks - 1.0);
  const double net_steps = 2.0 * static_cast<double>(std::max<int64_t>(0, s.nodes - 1));
  const double node_steps = steps - net_steps;
  const double bus_gbs = s.link_mbps / 8000.0;
  const double alg_gbs = bus_gbs * ranks / steps;
  const double b = static_cast<double>(bytes);
  // Each step between nodes also costs the net's reported latency (getProperties' latency, which
  // Tally sets to setup.latency_s), twice for Simple (NCCL adds a flush's).
  const double net_us = s.latency_s * 1e6;
  const bool one_per_node = s.ranks == s.nodes;
  double simple_lat =
      kRingSimpleBase + net_steps * (kNetSimpleStep + 2.0 * net_us) + node_steps * kPciSimpleStep;
  const uint64_t per_channel_rank =
      bytes / (static_cast<uint64_t>(kAssumedCollNetChannels) * static_cast<uint64_t>(s.ranks));
  if (per_channel_rank >= kPlateauBytesPerChannelRank) simple_lat *= kRingSimplePlateau;
  const double simple = simple_lat + b / (1000.0 * alg_gbs);
  const double ll_lat = kRingLlBase +
                        net_steps * ((one_per_node ? kNetTreeLlStep : kNetLlStep) + net_us) +
                        node_steps * kPciLlStep;
  const double ll = ll_lat + b / (1000.0 * alg_gbs * 0.5);
  return std::min(simple, ll);
}

uint64_t collNetCrossoverBytes(const CollNetSetup& s) {
  if (!covered(s)) return 0;
  auto cheaper = [&](uint64_t bytes) {
    const double ring = ncclRingAllReduceMicros(s, bytes);
    return collNetCostMicros(s, bytes, ring) < ring;
  };
  if (!cheaper(kCrossoverMaxBytes)) return 0;
  // Down the powers of two while CollNet stays cheaper, then the exact size between the last
  // power where it was not and the first where it is.
  uint64_t hi = kCrossoverMaxBytes;
  while (hi > kCrossoverMinBytes && cheaper(hi / 2)) hi /= 2;
  if (hi == kCrossoverMinBytes) return hi;
  uint64_t lo = hi / 2;  // not cheaper
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    (cheaper(mid) ? hi : lo) = mid;
  }
  return hi;
}

std::string describeTuner(const CollNetSetup& s) {
  char text[512];
  const uint64_t cross = collNetCrossoverBytes(s);
  std::string where;
  if (!covered(s)) {
    where = "the model does not cover it (no reducers or one node); NCCL's costs stand";
  } else if (cross == 0) {
    // No size from which CollNet stays cheaper; it may still be for small messages, where the
    // ring's steps cost more than a reducer's share of the bytes (too few reducers for the hosts).
    uint64_t below = kCrossoverMinBytes;
    while (below <= kCrossoverMaxBytes &&
           collNetCostMicros(s, below, ncclRingAllReduceMicros(s, below)) <
               ncclRingAllReduceMicros(s, below)) {
      below *= 2;
    }
    // What bounds the reduction server where the ring takes over: a reducer's link (too few
    // reducers for the hosts), or something else the model counts (its CPU, its latency).
    std::string bound;
    const uint64_t at = std::min(below, kCrossoverMaxBytes);
    modelMicros(s, at,
                kAssumedCollNetChannels *
                    ncclCollNetChunk(at, kAssumedCollNetChannels, depthOf(s), s.buff_size),
                ncclCollNetChunk(at, kAssumedCollNetChannels, depthOf(s), s.buff_size), &bound);
    const std::string why = bound == "reducer link"
                                ? "a reducer's link carries more than a host's"
                                : "the reduction server is bound by its " + bound;
    where = below == kCrossoverMinBytes ? "NCCL's ring is cheaper at every size up to " +
                                              formatBytes(kCrossoverMaxBytes) + " (" + why + ")"
                                        : "CollNet all-reduce below " + formatBytesApprox(below) +
                                              ", NCCL's ring from there (" + why + ")";
  } else {
    char at[160];
    const double ring = ncclRingAllReduceMicros(s, cross);
    std::snprintf(at, sizeof(at), " (CollNet %.0f us, NCCL's ring %.0f us there)",
                  collNetCostMicros(s, cross, ring), ring);
    where = "CollNet all-reduce from " + formatBytesApprox(cross) + at;
  }
  std::snprintf(text, sizeof(text),
                "tuner: %lld ranks on %lld nodes, %lld reducers, link %d Mb/s (%s), latency "
                "%.0f us, NCCL_BUFFSIZE %s, chunk %s; %s",
                static_cast<long long>(s.ranks), static_cast<long long>(s.nodes),
                static_cast<long long>(s.reducers), s.link_mbps,
                s.link_from_config ? "TALLY_LINK_MBPS" : "assumed", s.latency_s * 1e6,
                formatBytes(s.buff_size).c_str(), s.tuner_sets_chunk ? "tuned" : "NCCL's",
                where.c_str());
  return text;
}

}  // namespace tally::model
