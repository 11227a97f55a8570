// SPDX-License-Identifier: Apache-2.0
#include "test/system/reliability/failover_support.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "tools/driver/reference.h"

namespace tally::reliability {
namespace {

using driver::splitmix64;

uint64_t foldDigest(uint64_t digest, const void* data, size_t bytes) {
  return splitmix64(digest ^ driver::hashBytes(data, bytes));
}

Status mismatch(const CallPlan& p, DataType type, const void* got, const void* want,
                size_t count) {
  size_t first = 0;
  const size_t wrong = driver::countMismatches(type, got, want, count, &first);
  if (wrong == 0) return Status::ok();
  return Status::internal(describeCall(p) + ": " + std::to_string(wrong) + " wrong elements, " +
                          driver::describeElement(type, got, want, first));
}

}  // namespace

int64_t steadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

CallPlan planCall(uint64_t seed, uint64_t index) {
  uint64_t r = splitmix64(seed * 1000003 + index);
  CallPlan p;
  p.seed = r;
  const unsigned pick = static_cast<unsigned>(r % 10);
  r = splitmix64(r);
  p.type = static_cast<DataType>(r % kNumDataTypes);
  r = splitmix64(r);
  p.op = static_cast<ReduceOp>(r % kNumReduceOps);
  r = splitmix64(r);
  if (pick < 6) {
    static const size_t kCounts[] = {1, 7, 1001, 65537, 262147, (1u << 20) + 3};
    p.kind = CallPlan::Kind::kAllReduce;
    p.count = kCounts[r % 6];
  } else if (pick < 8) {
    static const size_t kBytes[] = {13, 4099, 100003, 300007};
    p.kind = CallPlan::Kind::kAllGather;
    p.type = DataType::kUint8;
    p.op = ReduceOp::kSum;
    p.count = kBytes[r % 4];
  } else {
    static const size_t kCounts[] = {1, 513, 20011, 120007};
    p.kind = CallPlan::Kind::kReduceScatter;
    p.count = kCounts[r % 4];
  }
  return p;
}

std::string describeCall(const CallPlan& p) {
  const char* kind = p.kind == CallPlan::Kind::kAllReduce   ? "all-reduce"
                     : p.kind == CallPlan::Kind::kAllGather ? "all-gather"
                                                            : "reduce-scatter";
  return std::string(kind) + " " + dataTypeName(p.type) + " " + reduceOpName(p.op) + " of " +
         std::to_string(p.count);
}

Status runWorkload(driver::CollComm* comm, uint64_t seed, uint64_t ncalls, int pause_every,
                   int pause_ms, RunResult* out) {
  return runWorkloadWhile(comm, seed, [ncalls] { return ncalls; }, pause_every, pause_ms, out);
}

Status runWorkloadWhile(driver::CollComm* comm, uint64_t seed,
                        const std::function<uint64_t()>& last_call, int pause_every,
                        int pause_ms, RunResult* out) {
  const int rank = comm->rank();
  const int n = comm->nranks();
  RunResult r;
  int64_t last = steadyMs();
  std::vector<char> in, got, want;
  for (uint64_t i = 0; i < last_call(); ++i) {
    const CallPlan p = planCall(seed, i);
    const size_t elt = dataTypeSize(p.type);
    const std::string what = "call " + std::to_string(i) + " (" + describeCall(p) + ")";
    switch (p.kind) {
      case CallPlan::Kind::kAllReduce: {
        in.resize(p.count * elt);
        got.assign(p.count * elt, 0);
        want.resize(p.count * elt);
        driver::fillInput(p.type, p.op, rank, n, p.seed, p.count, in.data());
        driver::fillExpected(p.type, p.op, n, p.seed, p.count, want.data());
        Status st = comm->allreduce(in.data(), got.data(), p.count, p.type, p.op);
        if (!st.isOk()) return Status(st.code(), what + ": " + st.message());
        TALLY_RETURN_IF_ERROR(mismatch(p, p.type, got.data(), want.data(), p.count));
        break;
      }
      case CallPlan::Kind::kAllGather: {
        in.resize(p.count);
        got.assign(p.count * n, 0);
        want.resize(p.count * n);
        for (int q = 0; q < n; ++q) {
          driver::fillInput(DataType::kUint8, ReduceOp::kSum, q, n, p.seed, p.count,
                            want.data() + q * p.count);
        }
        driver::fillInput(DataType::kUint8, ReduceOp::kSum, rank, n, p.seed, p.count, in.data());
        Status st = comm->allgather(in.data(), got.data(), p.count);
        if (!st.isOk()) return Status(st.code(), what + ": " + st.message());
        TALLY_RETURN_IF_ERROR(mismatch(p, DataType::kUint8, got.data(), want.data(), got.size()));
        break;
      }
      case CallPlan::Kind::kReduceScatter: {
        const size_t total = p.count * n;
        in.resize(total * elt);
        got.assign(p.count * elt, 0);
        want.resize(total * elt);
        driver::fillInput(p.type, p.op, rank, n, p.seed, total, in.data());
        driver::fillExpected(p.type, p.op, n, p.seed, total, want.data());
        Status st = comm->reducescatter(in.data(), got.data(), p.count, p.type, p.op);
        if (!st.isOk()) return Status(st.code(), what + ": " + st.message());
        TALLY_RETURN_IF_ERROR(mismatch(p, p.type, got.data(),
                                       want.data() + rank * p.count * elt, p.count));
        break;
      }
    }
    // A reduce-scatter's output is each rank's own part: checked exactly above, but not a bit
    // pattern the ranks share. Every other output is.
    if (p.kind != CallPlan::Kind::kReduceScatter) {
      r.digest = foldDigest(r.digest, got.data(), got.size());
    }
    const int64_t now = steadyMs();
    r.longest_gap_ms = std::max(r.longest_gap_ms, now - last);
    last = now;
    r.last_done_ms = now;
    r.done_ms.push_back(now);
    r.calls = i + 1;
    *out = r;
    if (pause_every > 0 && (i + 1) % static_cast<uint64_t>(pause_every) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
      last = steadyMs();
    }
  }
  *out = r;
  return Status::ok();
}

std::vector<int64_t> resumeAfter(const std::vector<int64_t>& done_ms,
                                 const std::vector<int64_t>& fault_ms) {
  std::vector<int64_t> out;
  for (int64_t f : fault_ms) {
    auto it = std::upper_bound(done_ms.begin(), done_ms.end(), f);
    out.push_back(it == done_ms.end() ? -1 : *it - f);
  }
  return out;
}

std::string formatTimes(const std::vector<int64_t>& ms) {
  std::string text;
  for (int64_t t : ms) text += (text.empty() ? "" : " ") + std::to_string(t);
  return text;
}

std::vector<int64_t> parseTimes(const std::string& text) {
  std::vector<int64_t> out;
  const char* p = text.c_str();
  char* end = nullptr;
  for (;;) {
    const long long v = std::strtoll(p, &end, 10);
    if (end == p) break;
    out.push_back(v);
    p = end;
  }
  return out;
}

std::string formatResult(const Status& st, const RunResult& r) {
  if (!st.isOk()) {
    return "error " + std::to_string(r.calls) + " " + std::to_string(steadyMs()) + " " +
           st.toString();
  }
  char buf[128];
  std::snprintf(buf, sizeof(buf), "ok %" PRIu64 " %" PRIu64 " %" PRId64 " %" PRId64, r.calls,
                r.digest, r.longest_gap_ms, r.last_done_ms);
  return buf;
}

bool parseResult(const std::string& text, RunResult* r, std::string* error) {
  if (text.rfind("error ", 0) == 0) {
    unsigned long long calls = 0;
    long long at = 0;
    int used = 0;
    if (std::sscanf(text.c_str(), "error %llu %lld %n", &calls, &at, &used) < 2) {
      *error = "unreadable result: " + text;
      return false;
    }
    r->calls = calls;
    r->last_done_ms = at;
    *error = text.substr(static_cast<size_t>(used));
    return false;
  }
  unsigned long long calls = 0, digest = 0;
  long long gap = 0, last = 0;
  if (std::sscanf(text.c_str(), "ok %llu %llu %lld %lld", &calls, &digest, &gap, &last) != 4) {
    *error = "unreadable result: " + text;
    return false;
  }
  r->calls = calls;
  r->digest = digest;
  r->longest_gap_ms = gap;
  r->last_done_ms = last;
  return true;
}

}  // namespace tally::reliability
