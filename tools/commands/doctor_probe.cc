// SPDX-License-Identifier: Apache-2.0
// One reducer, probed through a one-rank CollNet communicator: handshake, round trip, bandwidth.
#include "tools/commands/doctor_probe.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/sizes.h"
#include "protocol/wire.h"
#include "transport/network.h"

namespace tally::commands::doctor {
namespace {

using Clock = std::chrono::steady_clock;
using worker_client::CollClient;
using worker_client::CollRequest;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One all-reduce of `count` int32 from send into recv, waited for until `timeout_ms` passes.
// int32 because a sum of one input is then exactly the input, whatever its bits.
Status allreduce(CollClient* client, const int32_t* send, int32_t* recv, size_t count,
                 int64_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  CollRequest req;
  for (;;) {
    TALLY_RETURN_IF_ERROR(
        client->iallreduce(send, recv, count, DataType::kInt32, ReduceOp::kSum, &req));
    if (req.posted()) break;
    if (Clock::now() >= deadline) return Status::timeout("no room to post an all-reduce");
    std::this_thread::yield();
  }
  for (;;) {
    bool done = false;
    TALLY_RETURN_IF_ERROR(req.test(&done, nullptr));
    if (done) return Status::ok();
    if (Clock::now() >= deadline) {
      return Status::timeout("an all-reduce of " + std::to_string(count * 4) +
                             " bytes took longer than " + std::to_string(timeout_ms) + " ms");
    }
    std::this_thread::yield();
  }
}

// Stamps call `n` into the input so a stale result never passes for a fresh one.
void stamp(std::vector<int32_t>* in, int n) {
  (*in)[0] = n;
  in->back() = ~n;
}

Status checkEcho(const std::vector<int32_t>& in, const std::vector<int32_t>& out, int call) {
  if (std::memcmp(in.data(), out.data(), in.size() * sizeof(int32_t)) == 0) return Status::ok();
  size_t i = 0;
  while (i < in.size() && in[i] == out[i]) ++i;
  return Status::remote("wrong result in all-reduce " + std::to_string(call) + ": element " +
                        std::to_string(i) + " is " + std::to_string(out[i]) + ", sent " +
                        std::to_string(in[i]));
}

// One reducer's measurement: the client and every buffer its all-reduces read or land results in,
// owned together. An all-reduce that timed out is still in flight, and the client may go on
// writing its results until it is closed; so the client is closed before any buffer is freed, by
// close() or, on every other way out, by the destructor (client_ is declared after the buffers,
// and closed first).
class Measurement {
 public:
  Measurement(std::unique_ptr<CollClient> client, const ProbeOptions& options)
      : options_(options), client_(std::move(client)) {}
  ~Measurement() { close(); }
  Measurement(const Measurement&) = delete;
  Measurement& operator=(const Measurement&) = delete;

  Status measureRtt(ProbeResult* r);
  Status measureBandwidth(ProbeResult* r);
  // Closes the client: from here on nothing writes into the buffers. Idempotent.
  void close() {
    if (!client_) return;
    client_->close();
    client_.reset();
  }

 private:
  const ProbeOptions& options_;
  std::vector<int32_t> rtt_in_ = std::vector<int32_t>(1);
  std::vector<int32_t> rtt_out_ = std::vector<int32_t>(1);
  std::vector<int32_t> in_;  // the bandwidth all-reduces', sized by measureBandwidth
  std::vector<int32_t> out_;
  std::unique_ptr<CollClient> client_;
};

Status Measurement::measureRtt(ProbeResult* r) {
  std::vector<double> samples;
  constexpr int kWarmup = 2;
  for (int i = 0; i < kWarmup + std::max(1, options_.rtt_samples); ++i) {
    rtt_in_[0] = 0x5a5a0000 + i;
    rtt_out_[0] = 0;
    const auto start = Clock::now();
    TALLY_RETURN_IF_ERROR(
        allreduce(client_.get(), rtt_in_.data(), rtt_out_.data(), 1, options_.timeout_ms));
    const double us = secondsSince(start) * 1e6;
    TALLY_RETURN_IF_ERROR(checkEcho(rtt_in_, rtt_out_, i));
    if (i >= kWarmup) samples.push_back(us);
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  r->rtt_us = samples[samples.size() / 2];
  return Status::ok();
}

Status Measurement::measureBandwidth(ProbeResult* r) {
  const size_t count = std::max<uint64_t>(1, options_.probe_bytes / sizeof(int32_t));
  in_.assign(count, 0);
  out_.assign(count, 0);
  for (size_t i = 0; i < count; ++i) in_[i] = static_cast<int32_t>(i * 2654435761u);
  constexpr int kMaxCalls = 100000;
  double busy = 0;
  int calls = 0;
  const auto start = Clock::now();
  while (calls == 0 || (secondsSince(start) < options_.probe_seconds && calls < kMaxCalls)) {
    stamp(&in_, calls);
    std::memset(out_.data(), 0, count * sizeof(int32_t));
    const auto t0 = Clock::now();
    TALLY_RETURN_IF_ERROR(
        allreduce(client_.get(), in_.data(), out_.data(), count, options_.timeout_ms));
    busy += secondsSince(t0);
    TALLY_RETURN_IF_ERROR(checkEcho(in_, out_, calls));
    ++calls;
  }
  r->calls = calls;
  r->seconds = busy;
  r->gbytes_per_s =
      busy > 0 ? static_cast<double>(count * sizeof(int32_t)) * calls / busy / 1e9 : 0;
  return Status::ok();
}

// Whether a failed connect got as far as the reducer. CollClient::connect reports a reducer it
// could not reach as kTimeout "could not connect to reducer ..." and an address it cannot use as
// kInvalidUsage without "rejected"; everything else came from a reducer that answered.
bool reachedReducer(const Status& st) {
  const std::string& m = st.message();
  if (st.code() == StatusCode::kTimeout) return m.find("could not connect") == std::string::npos;
  if (st.code() == StatusCode::kInvalidUsage) return m.find("rejected") != std::string::npos;
  return st.code() == StatusCode::kRemote;
}

std::string formatDouble(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

}  // namespace

ProbeOptions probeOptionsFrom(const Params& params) {
  ProbeOptions o;
  o.slice_bytes = params.sliceBytes;
  o.window = static_cast<int>(params.collWindow);
  o.job_token = params.jobToken;
  o.job_token_file = params.jobTokenFile;
  o.checksum = params.checksum;
  return o;
}

CheckResult checkTransport(const Params& params, int64_t connect_timeout_ms,
                           std::shared_ptr<transport::Network>* network) {
  network->reset();
  transport::NetworkConfig config;
  Status st = transport::networkConfigFromParams(params, &config);
  // A reducer that cannot be reached fails with the network's reason (refused, unreachable),
  // which comes out only when its connect timeout ends with the probe's.
  config.timeouts.connect_ms = connect_timeout_ms;
  std::string why;
  if (st.isOk()) st = transport::openNetwork(config, network, &why);
  if (!st.isOk()) {
    return {Severity::kFail, "transport",
            st.message() + "; the plugin would fail the same way (the reducer probes below use "
                           "TCP)"};
  }
  return {Severity::kPass, "transport", why};
}

namespace {

ReducerConnection connectOne(const std::string& address, const ProbeOptions& options) {
  ReducerConnection c;
  ProbeResult& r = c.result;
  worker_client::CollOptions co;
  co.reducers = {address};
  co.slice_bytes = options.slice_bytes;
  co.window = options.window;
  co.timeouts = {options.timeout_ms, options.timeout_ms};
  co.job_token = options.job_token;
  co.job_token_file = options.job_token_file;
  co.checksum = options.checksum;
  co.network = options.network;
  uint8_t handle[worker_client::kCollHandleBytes];
  Status st = CollClient::makeHandle(co, handle);
  if (!st.isOk()) {
    r.error = st.message();
    r.code = st.code();
    return c;
  }
  const void* handles[] = {handle};
  const auto start = Clock::now();
  st = CollClient::connect(co, handles, 1, 0, &c.client);
  r.connect_ms = secondsSince(start) * 1e3;
  if (!st.isOk()) {
    c.client.reset();
    r.reachable = reachedReducer(st);
    r.error = st.message();
    r.code = st.code();
    return c;
  }
  r.reachable = true;
  r.accepted = true;
  return c;
}

}  // namespace

std::vector<ReducerConnection> connectReducers(
    const std::vector<std::string>& addresses, const ProbeOptions& options,
    const std::function<void(size_t answered, size_t total, double seconds)>& waiting) {
  std::vector<ReducerConnection> out(addresses.size());
  if (addresses.empty()) return out;
  std::mutex mu;
  std::condition_variable cv;
  size_t answered = 0;
  std::atomic<size_t> next{0};
  // Each thread takes the next address until none is left: at most kMaxConcurrentConnects
  // connects are in flight, and a slow one holds up only its own thread.
  auto work = [&] {
    for (size_t i = next++; i < addresses.size(); i = next++) {
      ReducerConnection c = connectOne(addresses[i], options);
      std::lock_guard<std::mutex> lock(mu);
      out[i] = std::move(c);
      ++answered;
      cv.notify_one();
    }
  };
  const size_t nthreads = std::min(kMaxConcurrentConnects, addresses.size());
  std::vector<std::thread> threads;
  threads.reserve(nthreads);
  for (size_t t = 0; t < nthreads; ++t) threads.emplace_back(work);
  const auto start = Clock::now();
  {
    std::unique_lock<std::mutex> lock(mu);
    while (answered < addresses.size()) {
      if (cv.wait_for(lock, std::chrono::seconds(1)) == std::cv_status::timeout &&
          answered < addresses.size() && waiting) {
        const size_t so_far = answered;
        lock.unlock();
        waiting(so_far, addresses.size(), secondsSince(start));
        lock.lock();
      }
    }
  }
  for (std::thread& t : threads) t.join();
  return out;
}

ProbeResult finishProbe(ReducerConnection* connection, const ProbeOptions& options) {
  ProbeResult& r = connection->result;
  if (!connection->client) return r;
  Measurement m(std::move(connection->client), options);
  connection->client.reset();
  Status st = m.measureRtt(&r);
  if (st.isOk()) st = m.measureBandwidth(&r);
  m.close();
  if (!st.isOk()) {
    r.error = st.message();
    r.code = st.code();
    return r;
  }
  r.measured = true;
  return r;
}

ProbeResult probeReducer(const std::string& address, const ProbeOptions& options) {
  ReducerConnection c = connectOne(address, options);
  return finishProbe(&c, options);
}

std::string credentialsNote(const Params& params) {
  // Whether a token was sent, and from where; never its value.
  if (!params.jobTokenFile.empty()) return "job token from " + params.jobTokenFile;
  if (!params.jobToken.empty()) return "job token from TALLY_JOB_TOKEN";
  return "no job token configured";
}

CheckResult describeProbe(const std::string& address, const ProbeResult& r, const ProbeOptions& o,
                          const std::string& credentials) {
  CheckResult c{Severity::kFail, "reducer " + address, ""};
  const std::string timeout = std::to_string(o.timeout_ms) + " ms";
  if (!r.reachable && r.code == StatusCode::kInvalidUsage) {
    c.detail = "cannot probe it (bad address or settings): " + r.error;
    return c;
  }
  if (!r.reachable) {
    c.detail = "not reachable within " + timeout + ": " + r.error;
    return c;
  }
  if (!r.accepted) {
    c.detail = "reachable, but the handshake failed (we speak protocol " +
               std::to_string(protocol::wire::kVersion) + "; " + credentials + "): " + r.error;
    return c;
  }
  const std::string handshake = "reachable, accepts our credentials (protocol " +
                                std::to_string(protocol::wire::kVersion) + ", " + credentials +
                                "), connected in " + formatDouble("%.1f ms", r.connect_ms);
  if (!r.measured) {
    c.detail = handshake + "; but the probe failed: " + r.error;
    return c;
  }
  c.severity = Severity::kPass;
  c.detail = handshake + "; rtt " + formatDouble("%.0f us", r.rtt_us) + " (median of " +
             std::to_string(std::max(1, o.rtt_samples)) + "); bandwidth " +
             formatDouble("%.2f GB/s", r.gbytes_per_s) + " (" + formatGbps(8 * r.gbytes_per_s) +
             ") each way (" + std::to_string(r.calls) + " x " + formatBytes(o.probe_bytes) +
             " in " + formatDouble("%.2f s", r.seconds) + "); every result checked";
  return c;
}

}  // namespace tally::commands::doctor
