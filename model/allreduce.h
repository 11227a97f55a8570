// SPDX-License-Identifier: Apache-2.0
// The expected time of one all-reduce of S bytes over n GPU hosts, with a ring and with m
// reducers, from a model of the links, of the CPU each byte costs and of what each call costs
// whatever its size. Pure arithmetic: `tally plan` prints it (docs/plan.md gives the formulas and
// checks them against emulated runs) and the plugin's tuner gives NCCL its costs
// (model/collnet.h).
//
// Each link is full duplex at rate B (bytes of payload per second: the rate in bits / 8, less
// TCP/IP and Ethernet framing at the MTU and the ACKs of the data coming the other way; 93.6% at
// MTU 1500). Per host and call:
//   ring:  each host sends and receives 2(n-1)/n S, in 2(n-1) steps that each wait for a
//          neighbour: link = 2(n-1)/n S / B_host, latency = 2(n-1) L.
//   rs:    each host sends S and receives S: S / B_host; each reducer receives n S / m (n
//          workers sending to it at once: the incast) and sends n S / m: n S / (m B_reducer).
// The CPU term: c CPU-seconds per GiB, spread over k cores: c x GiB / k, per worker of the ring
// (its 2(n-1)/n S), per reduction-server worker (S) and per reducer (n S / m). Links and CPU work
// at once on the slices of a call, so the slowest side bounds: time = max(link terms, CPU terms) +
// latency.
//
// A reduction-server call also costs a fixed amount whatever its size, which is what decides
// small messages: its latency is one trip to the reducers and back for the data, and a second one
// for the commit (each rank acknowledges its results and the reducer commits the call once every
// rank has, and only then is the call done): 4 L. (A call of at most 128 KiB is done when its
// results land, worker_client/call.h, but its Ack and Commit still take the reducer's time before
// the next call's, so back-to-back small calls pay about the same; the calibration of r below
// counts 4 L.) A slice's bytes cross twice in turn, to the
// reducer and back (the reducer sums a slice once every rank's piece is in), so the first slice
// of the pipeline adds its own bytes' time once more: a whole small call, 32 KiB of a large one.
// Under NCCL a call carries whole chunks (rs_chunk_bytes): a 4 KiB all-reduce moves a 32 KiB chunk.
// And the reducer handles every rank's part of the call (its input, its result, its
// acknowledgement, the commit) before the call can finish, so the slowest rank's part ends it: n x
// r CPU-seconds over the reducer's cores. Under NCCL an all-reduce is several CollNet calls
// (rs_call_bytes each, rs_calls_in_flight at a time): the first call's latency is paid once, and
// after it each call costs the longest of its own bytes, its share of the latency the calls in
// flight overlap, and its per-rank work.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace tally::model {

inline constexpr uint64_t kDefaultBucketBytes = 64ull << 20;  // PyTorch DDP's 64 MiB bucket
inline constexpr int kDefaultMtu = 1500;
// One-way time of a message between two hosts, software included. An assumption for cloud VMs in
// one zone (tens of microseconds); `tally plan --latency` sets it.
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
inline constexpr double kDefaultReducerCores = 16;
// r: the reducer's CPU-seconds per rank and call, for a call of one slice. From 4 KiB runs on
// loopback (docs/performance.md, "Small messages"; 2 reducers, both sharing the machine's 2
// vCPUs with the workers): the ring's time there gives the loopback L (800-877 us over 6 steps
// with 4 workers, 140 us; 2468-2974 us over 14 steps with 8, 193 us), and the reduction
// server's time less 4 L leaves 198 us for 4 ranks (722-795 us) and 360 us for 8 (929-1313 us):
// 45-50 us per rank of the 2 shared cores, 90 CPU-us per rank. That is about four wake-ups of
// 20 us, one per message a rank's part of a call takes on the reducer.
inline constexpr double kDefaultReducerCpuSecondsPerRankCall = 90e-6;
// NCCL keeps at most 8 CollNet calls (NCCL_STEPS) in flight per group of channels.
inline constexpr int kDefaultCallsInFlight = 8;
// The smallest slice the worker cuts a call into (protocol/slicing.h kMinSliceBytes): the bytes
// whose store-and-forward at the reducer the pipeline cannot hide.
inline constexpr uint64_t kFirstSliceBytes = 32 * 1024;

struct PredictInput {
  int64_t hosts = 0;     // n: GPU hosts in the all-reduce
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
  double reducer_cores = kDefaultReducerCores;  // the reducer machine's vCPUs
  double reducer_cpu_s_per_rank_call = kDefaultReducerCpuSecondsPerRankCall;  // r
  uint64_t rs_call_bytes = 0;  // bytes per reduction-server call; 0: the bucket is one call
  // Calls carry whole chunks of this many bytes (the last call's tail is stale, as NCCL sends
  // it); 0: exactly the bucket's bytes.
  uint64_t rs_chunk_bytes = 0;
  int rs_calls_in_flight = kDefaultCallsInFlight;
};

// One algorithm's expected all-reduce. Times in seconds; bandwidths in GB/s (10^9 B/s) as
// `tally bench` prints them.
struct AlgoPrediction {
  double seconds = 0;         // see the top of this file
  double host_link_s = 0;     // the host's bytes over its link
  double reducer_link_s = 0;  // rs only: a reducer's n S / m over its link
  double worker_cpu_s = 0;
  double reducer_cpu_s = 0;  // rs only
  // The ring's steps; for rs the per-call cost of the first call (4 L + n r / reducer cores), and
  // what the later calls add beyond their bytes.
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

// Checks the input (n >= 2, rates > 0, MTU 576..65536, bucket > 0, CPU costs >= 0, cores > 0,
// calls in flight >= 1) and computes the prediction. kInvalidUsage naming the bad value; *out is
// written only on success.
Status predictAllReduce(const PredictInput& input, Prediction* out);

}  // namespace tally::model
