// SPDX-License-Identifier: Apache-2.0
// `tally doctor` talking to one reducer: a CollNet communicator of one rank (this process)
// against that reducer alone. With a single rank the reducer's sum is the input itself, so every
// all-reduce is an echo whose result can be checked byte for byte.
//
// probeReducer blocks for at most about timeout + probe_seconds (+ one timeout per call that
// stalls); every wait in it is bounded by options.timeout_ms. Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/params.h"
#include "common/status.h"
#include "protocol/slicing.h"
#include "worker_client/coll_client.h"
#include "tools/commands/doctor_checks.h"
#include "transport/network.h"

namespace tally::commands::doctor {

struct ProbeOptions {
  int64_t timeout_ms = 5000;           // connect (TCP + Hello/Ready) and each all-reduce
  int rtt_samples = 20;                // 4-byte all-reduces timed for the round trip
  uint64_t probe_bytes = 16ull << 20;  // bytes of each bandwidth all-reduce (multiple of 4)
  double probe_seconds = 1.0;          // how long to keep sending them (at least one call)
  uint64_t slice_bytes = protocol::kDefaultSliceBytes;  // TALLY_SLICE_BYTES
  int window = paramDefaultNumber("TALLY_COLL_WINDOW");
  std::string job_token;               // TALLY_JOB_TOKEN
  std::string job_token_file;          // TALLY_JOB_TOKEN_FILE
  bool checksum = false;               // TALLY_CHECKSUM
  // The transport the plugin would use (checkTransport); null: TCP.
  std::shared_ptr<transport::Network> network;
};

// The "transport" line: opens the network TALLY_TRANSPORT asks for, as the plugin would, and
// says what was chosen and why (PASS), or why it cannot be opened (FAIL). *network is the opened
// one, with connect_timeout_ms for its connects (the probe's timeout), or null after a FAIL.
CheckResult checkTransport(const Params& params, int64_t connect_timeout_ms,
                           std::shared_ptr<transport::Network>* network);

// Takes the slice size, window, job token and checksum setting from the user's TALLY_ variables.
ProbeOptions probeOptionsFrom(const Params& params);

struct ProbeResult {
  bool reachable = false;   // TCP connect succeeded (the reducer answered, even with a refusal)
  bool accepted = false;    // it answered our Hello (protocol wire::kVersion) with Ready
  bool measured = false;    // RTT and bandwidth were measured and every result checked out
  double connect_ms = 0;    // TCP connect plus Hello/Ready
  double rtt_us = 0;        // median 4-byte all-reduce
  double gbytes_per_s = 0;  // probe bytes each way per second of all-reduce time
  int calls = 0;            // bandwidth all-reduces made
  double seconds = 0;       // their total time
  std::string error;        // what went wrong, when something did
  StatusCode code = StatusCode::kOk;  // and its kind
};

ProbeResult probeReducer(const std::string& address, const ProbeOptions& options);

// The two halves of probeReducer, so that many reducers can be connected to at once while their
// bandwidth is still measured one at a time (at once they would share this worker's link).
struct ReducerConnection {
  std::unique_ptr<worker_client::CollClient> client;  // null when the connect failed
  ProbeResult result;                           // reachable, accepted, connect_ms, error
};

// Reducers connected to at once: at most this many connects are in flight.
inline constexpr size_t kMaxConcurrentConnects = 16;

// Connects to every address, kMaxConcurrentConnects at a time, each connect bounded by
// options.timeout_ms: the whole call takes at most ceil(n / 16) timeouts, one for up to 16
// reducers. While any connect is pending, `waiting(answered, total, seconds)` is called about once
// a second from this thread. The result is in the order of `addresses`.
std::vector<ReducerConnection> connectReducers(
    const std::vector<std::string>& addresses, const ProbeOptions& options,
    const std::function<void(size_t answered, size_t total, double seconds)>& waiting);

// Measures the round trip and the bandwidth over a connection that connectReducers opened, then
// closes it: connection->client is null afterwards. The buffers the all-reduces use are owned
// with the client and freed only after it is closed, so an all-reduce that timed out with its
// results still arriving never writes into freed memory. A failed connection's result is
// returned as it is.
ProbeResult finishProbe(ReducerConnection* connection, const ProbeOptions& options);

// What the reducer was told about credentials: where the job token came from
// (TALLY_JOB_TOKEN_FILE or TALLY_JOB_TOKEN), or "no job token configured"; never its value.
std::string credentialsNote(const Params& params);

// The report line for one reducer: "reducer HOST:PORT".
CheckResult describeProbe(const std::string& address, const ProbeResult& result,
                          const ProbeOptions& options, const std::string& credentials);

}  // namespace tally::commands::doctor
