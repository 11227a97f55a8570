// One worker of `tally demo`. This process stands in for the rank of an NCCL job: like such a job
// it configures the plugin through the environment before loading it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tools/demo.h"
#include "tools/driver/coll_driver.h"
#include "tools/driver/plugin_library.h"
#include "tools/driver/reference.h"
#include "tools/driver/ring_allreduce.h"

namespace tally::demo {
namespace {

using Clock = std::chrono::steady_clock;
using driver::CollComm;
using driver::RingComm;

constexpr DataType kType = DataType::kFloat32;
constexpr ReduceOp kOp = ReduceOp::kSum;
constexpr int64_t kStoreTimeoutMs = 60000;

bool report(int rank, const Status& s, const char* what) {
  if (s.isOk()) return true;
  std::fprintf(stderr, "tally demo: worker %d: %s: %s\n", rank, what, s.toString().c_str());
  return false;
}

// Runs warm-up and timed iterations of one implementation at one size; every result is checked.
// Writes "<impl>/<size>/<rank>" = "<mean us> <wrong>" to the store.
template <typename AllReduce>
Status measure(const DemoOptions& options, Store* store, int rank, const char* impl, uint64_t bytes,
               const std::vector<char>& input, const std::vector<char>& expected,
               std::vector<char>* out, AllReduce&& allreduce) {
  const size_t count = bytes / dataTypeSize(kType);
  size_t wrong = 0;
  double total_us = 0;
  const std::string tag = std::string(impl) + "/" + std::to_string(bytes);
  for (int i = 0; i < options.warmup + options.iters; ++i) {
    if (i == options.warmup) {
      TALLY_RETURN_IF_ERROR(
          storeBarrier(store, "barrier/" + tag, rank, options.workers, kStoreTimeoutMs));
    }
    auto t0 = Clock::now();
    TALLY_RETURN_IF_ERROR(allreduce(input.data(), out->data(), count));
    auto t1 = Clock::now();
    if (i >= options.warmup) total_us += std::chrono::duration<double, std::micro>(t1 - t0).count();
    size_t first_bad = 0;
    size_t bad = driver::countMismatches(kType, out->data(), expected.data(), count, &first_bad);
    if (bad != 0 && wrong == 0) {
      std::fprintf(stderr, "tally demo: worker %d: %s %llu bytes: %zu wrong, first %s\n", rank,
                   impl, static_cast<unsigned long long>(bytes), bad,
                   driver::describeElement(kType, out->data(), expected.data(), first_bad).c_str());
    }
    wrong += bad;
  }
  double mean = options.iters > 0 ? total_us / options.iters : 0;
  char value[64];
  std::snprintf(value, sizeof(value), "%.3f %zu", mean, wrong);
  return store->set(tag + "/" + std::to_string(rank), value);
}

}  // namespace

int runDemoWorker(const DemoOptions& options, const std::string& reducer_list, int table_version,
                  Store* store, int rank) {
  // An NCCL job's environment: the reducers, loopback, and bounded waits.
  ::setenv("TALLY_REDUCERS", reducer_list.c_str(), 1);
  ::setenv("TALLY_SOCKET_IFNAME", "lo", 1);
  ::setenv("TALLY_CONNECT_TIMEOUT", "30s", 0);
  if (options.verbose) driver::setPluginLogLevel(NCCL_LOG_INFO);

  std::unique_ptr<driver::PluginLibrary> lib;
  if (!report(rank, driver::PluginLibrary::open(options.plugin, &lib), "load plugin")) return 2;
  std::unique_ptr<driver::CollNetApi> coll_api;
  if (!report(rank, lib->collNet(table_version, &coll_api), "collnet table")) return 2;

  const int nranks = options.workers;
  driver::CollCommOptions coll_options;
  coll_options.timeout_ms = 60000;
  std::unique_ptr<CollComm> coll;
  if (!report(rank,
              CollComm::create(coll_api.get(), store, "coll", rank, nranks, coll_options, &coll),
              "collnet setup")) {
    return 3;
  }
  if (!coll->supported(kType, kOp)) {
    std::fprintf(stderr, "tally demo: worker %d: plugin says float32 sum is unsupported\n", rank);
    return 3;
  }

  std::unique_ptr<driver::NetApi> net_api;
  std::unique_ptr<RingComm> ring;
  if (options.ring) {
    if (!report(rank, lib->net(table_version, &net_api), "net table")) return 2;
    driver::RingOptions ring_options;
    ring_options.net.timeout_ms = 60000;
    if (!report(rank,
                RingComm::create(net_api.get(), store, "ring", rank, nranks, ring_options, &ring),
                "ring setup")) {
      return 3;
    }
  }

  const uint64_t seed = 0x7a11;
  for (uint64_t bytes : options.sizes) {
    const size_t count = bytes / dataTypeSize(kType);
    std::vector<char> input(count * 4), expected(count * 4), out(count * 4);
    driver::fillInput(kType, kOp, rank, nranks, seed + bytes, count, input.data());
    driver::fillExpected(kType, kOp, nranks, seed + bytes, count, expected.data());

    Status s = measure(options, store, rank, "server", bytes, input, expected, &out,
                       [&](const void* src, void* dst, size_t n) {
                         return coll->allreduce(src, dst, n, kType, kOp);
                       });
    if (!report(rank, s, "reduction server all-reduce")) return 4;
    if (ring) {
      s = measure(options, store, rank, "ring", bytes, input, expected, &out,
                  [&](const void* src, void* dst, size_t n) {
                    // In place over the output buffer; the copy is part of the call, as the
                    // server's staging copies are.
                    std::memcpy(dst, src, n * dataTypeSize(kType));
                    return ring->allreduce(dst, n, kType, kOp);
                  });
      if (!report(rank, s, "ring all-reduce")) return 4;
    }
  }

  // Every worker finishes before any closes: a comm closed while a peer still reads from it is a
  // teardown race this demo has no reason to provoke (the functional tests do).
  if (!report(rank, storeBarrier(store, "barrier/close", rank, nranks, kStoreTimeoutMs),
              "final barrier")) {
    return 5;
  }
  bool ok = report(rank, coll->close(), "collnet close");
  if (ring) ok = report(rank, ring->close(), "ring close") && ok;
  return ok ? 0 : 5;
}

}  // namespace tally::demo
