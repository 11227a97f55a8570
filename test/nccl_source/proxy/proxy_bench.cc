// SPDX-License-Identifier: Apache-2.0
// tally-nccl-proxy-bench: all-reduce through NCCL's own CollNet proxy (coll_net.cc compiled from
// NCCL's source, the harness of proxy_rank.h) against the same all-reduce through Tally's plugin
// driver (tools/driver/coll_driver.h, what `tally bench` runs), with the same calls, in the same
// processes, on the same reducers and links. When the two agree, `tally bench`'s ratios against
// Gloo are what NCCL's proxy would get. A benchmark, not a test (ctest runs it once, small, for
// its checks); docs/performance.md has the numbers and the command.
//
//   tally_nccl_proxy_bench_<ver> [--emulate 400mbit] [--workers 4] [--reducers 4]
//                                [--sizes 16M,64M] [-n 3] [-w 1] [--channels 2] [--chunk 512K]
//
// Each rank: NCCL's loader and proxy, warm-up and timed all-reduces of float32 sums with NCCL's
// chunk for the size (tools/driver/nccl_calls.h), the first call of each size checked against
// tools/driver/reference.h; NCCL's teardown; then the driver with the same shape. The time of a
// size is the slowest rank's mean, as `tally bench` reports it.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/sizes.h"
#include "common/store.h"
#include "common/strings.h"
#include "test/nccl_source/proxy/proxy_cases.h"
#include "test/nccl_source/proxy/proxy_rank.h"
#include "test/support/cluster.h"
#include "tools/bench/link_rate.h"
#include "tools/driver/coll_driver.h"
#include "tools/driver/emulated_cluster.h"
#include "tools/driver/nccl_calls.h"
#include "tools/driver/plugin_library.h"
#include "tools/driver/process.h"
#include "tools/driver/reference.h"

namespace tally::nccl_source {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kFloat32 = 7;
constexpr int64_t kWaitMs = 300000;

struct Options {
  std::string emulate;  // empty: loopback
  int workers = 4;
  int reducers = 4;
  std::vector<uint64_t> sizes;
  int iters = 3;
  int warmup = 1;
  driver::NcclChainShape shape;
};

struct Env {
  const Options* o = nullptr;
  std::string store_dir;
  std::string reducer_list;
  std::string plugin;
  const driver::EmulatedNode* node = nullptr;  // the rank's node; null on loopback
};

int fail(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
  return 1;
}

// One rank's float32 sum of `bytes`: its input, the expected result, room for the output.
struct Buffers {
  Buffers(int rank, int nranks, uint64_t bytes)
      : count(bytes / 4), in(count * 4), out(count * 4), expected(count * 4) {
    driver::fillInput(DataType::kFloat32, ReduceOp::kSum, rank, nranks, bytes, count, in.data());
    driver::fillExpected(DataType::kFloat32, ReduceOp::kSum, nranks, bytes, count, expected.data());
  }
  size_t count;
  std::vector<char> in, out, expected;
};

// Times `iters` calls of `one` after `warmup`, the first checked by `check`; every rank starts
// the timed calls after a barrier. Writes the mean (us) under key.
Status timeCalls(Store* store, const Env& env, int rank, const std::string& key,
                 const std::function<Status()>& one, const std::function<Status()>& check) {
  TALLY_RETURN_IF_ERROR(one());
  TALLY_RETURN_IF_ERROR(check());
  for (int i = 1; i < env.o->warmup; ++i) TALLY_RETURN_IF_ERROR(one());
  TALLY_RETURN_IF_ERROR(storeBarrier(store, key + "/go", rank, env.o->workers, kWaitMs));
  const auto t0 = Clock::now();
  for (int i = 0; i < env.o->iters; ++i) TALLY_RETURN_IF_ERROR(one());
  const double us =
      std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / env.o->iters;
  return store->set(key + "/" + std::to_string(rank), std::to_string(us));
}

Status compare(const std::vector<char>& out, const std::vector<char>& expected, size_t count) {
  size_t first = 0;
  const size_t bad =
      driver::countMismatches(DataType::kFloat32, out.data(), expected.data(), count, &first);
  if (bad == 0) return Status::ok();
  return Status::internal(
      std::to_string(bad) + " wrong elements, first " +
      driver::describeElement(DataType::kFloat32, out.data(), expected.data(), first));
}

int runProxy(const Env& env, int rank, Store* store) {
  const Options& o = *env.o;
  ::setenv("NCCL_NET_PLUGIN", env.plugin.c_str(), 1);
  ProxyRankOptions options;
  options.rank = rank;
  options.nranks = o.workers;
  options.channels = o.shape.channels;
  options.comm_hash = 0x7a11be9c4ull;
  options.all_gather = storeAllGather(store, rank, o.workers);
  options.timeout_ms = kWaitMs;
  std::unique_ptr<ProxyRank> proxy;
  ProxyResult r = ProxyRank::open(options, &proxy);
  if (!r.ok()) return fail(rank, "NCCL proxy setup: " + r.error);
  for (uint64_t bytes : o.sizes) {
    Buffers b(rank, o.workers, bytes);
    ProxyCollective c;
    c.dtype = kFloat32;
    c.count = b.count;
    c.chunk_bytes = static_cast<int>(driver::ncclChainChunkBytes(bytes, o.shape));
    c.channels = o.shape.channels;
    c.sendbuff = b.in.data();
    c.recvbuff = b.out.data();
    auto one = [&]() -> Status {
      const ProxyResult res = proxy->run(c);
      return res.ok() ? Status::ok() : Status::internal("NCCL proxy all-reduce: " + res.error);
    };
    Status s = timeCalls(store, env, rank, "proxy/" + std::to_string(bytes), one,
                         [&] { return compare(b.out, b.expected, b.count); });
    if (!s.isOk()) return fail(rank, s.toString());
  }
  r = proxy->close();
  if (!r.ok()) return fail(rank, "NCCL teardown: " + r.error);
  return 0;
}

int runDriver(const Env& env, int rank, Store* store) {
  const Options& o = *env.o;
  std::unique_ptr<driver::PluginLibrary> lib;
  std::unique_ptr<driver::CollNetApi> api;
  Status s = driver::PluginLibrary::open(env.plugin, &lib);
  // The table the NCCL of the proxy side takes.
  const int code = proxyNcclVersionCode();
  if (s.isOk()) s = lib->collNet(code >= 23000 ? 12 : code >= 22800 ? 11 : 8, &api);
  if (!s.isOk()) return fail(rank, "driver: " + s.toString());
  driver::CollCommOptions options;
  options.nchannels = o.shape.channels;
  options.call_bytes = driver::ncclChainCallBytes(o.sizes.back(), o.shape);
  options.timeout_ms = kWaitMs;
  std::unique_ptr<driver::CollComm> comm;
  s = driver::CollComm::create(api.get(), store, "driver", rank, o.workers, options, &comm);
  if (!s.isOk()) return fail(rank, "driver setup: " + s.toString());
  for (uint64_t bytes : o.sizes) {
    Buffers b(rank, o.workers, bytes);
    s = comm->setCallShape(driver::ncclChainCallBytes(bytes, o.shape),
                           driver::ncclChainChunkBytes(bytes, o.shape));
    if (s.isOk()) {
      s = timeCalls(
          store, env, rank, "driver/" + std::to_string(bytes),
          [&] {
            return comm->allreduce(b.in.data(), b.out.data(), b.count, DataType::kFloat32,
                                   ReduceOp::kSum);
          },
          [&] { return compare(b.out, b.expected, b.count); });
    }
    if (!s.isOk()) return fail(rank, "driver: " + s.toString());
  }
  s = storeBarrier(store, "driver/close", rank, o.workers, kWaitMs);
  if (s.isOk()) s = comm->close();
  return s.isOk() ? 0 : fail(rank, "driver close: " + s.toString());
}

int runRankBody(const Env& env, int rank) {
  const Options& o = *env.o;
  if (env.node != nullptr) {
    Status s = driver::EmulatedCluster::enter(env.node[rank]);
    if (!s.isOk()) return fail(rank, "enter node: " + s.toString());
    ::setenv("TALLY_SOCKET_IFNAME", "eth0", 1);
    ::setenv("TALLY_LINK_MBPS", std::to_string(bench::rateMbps(o.emulate)).c_str(), 1);
  } else {
    ::setenv("TALLY_SOCKET_IFNAME", "lo", 1);
  }
  ::setenv("TALLY_REDUCERS", env.reducer_list.c_str(), 1);
  ::setenv("TALLY_CONNECT_TIMEOUT_MS", "30s", 1);
  ::setenv("NCCL_NET_PLUGIN_REF_COUNT", "1", 1);
  std::unique_ptr<Store> store;
  if (!createFileStore(env.store_dir, &store).isOk()) return fail(rank, "store");
  if (int rc = runProxy(env, rank, store.get()); rc != 0) return rc;
  return runDriver(env, rank, store.get());
}

double slowest(Store* store, const std::string& key, int workers) {
  double worst = -1;
  for (int r = 0; r < workers; ++r) {
    std::string v;
    if (store->get(key + "/" + std::to_string(r), &v, 1000).isOk())
      worst = std::max(worst, std::atof(v.c_str()));
  }
  return worst;
}

int run(const Options& o) {
  const std::string plugin = functional::pluginPath(), reducer = functional::reducerPath();
  std::unique_ptr<driver::TempDir> dir;
  if (!driver::TempDir::create("proxy-bench", &dir).isOk()) return fail(-1, "temp dir");
  std::unique_ptr<driver::EmulatedCluster> cluster;
  std::vector<std::unique_ptr<driver::ReducerProcess>> reducers;
  const int threads =
      std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / std::max(1, o.reducers));
  const std::vector<std::string> args = {"--threads", std::to_string(threads)};
  Status s;
  if (!o.emulate.empty()) {
    driver::EmulationOptions e;
    e.nodes = o.workers + o.reducers;
    e.rate = o.emulate;
    s = driver::EmulatedCluster::create(e, &cluster);
    if (!s.isOk()) return fail(-1, s.toString());
    std::vector<driver::ReducerOptions> each;
    for (int i = 0; i < o.reducers; ++i)
      each.push_back(driver::reducerInNode(cluster->nodes()[o.workers + i], args));
    s = driver::startReducers(reducer, each, 30000, &reducers);
  } else {
    s = driver::startReducers(reducer, o.reducers, args, 30000, &reducers);
  }
  if (!s.isOk()) return fail(-1, "reducers: " + s.toString());
  Env env{&o, dir->path(), driver::reducerList(reducers), plugin,
          cluster ? cluster->nodes().data() : nullptr};
  std::vector<driver::WorkerExit> exits;
  s = driver::runWorkers(
      o.workers, [&](int rank) { return runRankBody(env, rank); }, kWaitMs, &exits);
  std::string why;
  if (!s.isOk() || !driver::allWorkersOk(exits, &why)) return fail(-1, s.toString() + why);

  std::unique_ptr<Store> store;
  if (!createFileStore(dir->path(), &store).isOk()) return fail(-1, "store");
  std::printf(
      "# NCCL %d.%d.%d's CollNet proxy against Tally's driver: %d workers, %d reducers, %s;"
      " float32 sum, NCCL's calls (%d channels, chain depth %d, NCCL_BUFFSIZE %s%s), "
      "%d warm-up + %d timed, first call of each size checked\n",
      proxyNcclVersionCode() / 10000, proxyNcclVersionCode() / 100 % 100,
      proxyNcclVersionCode() % 100, o.workers, o.reducers,
      o.emulate.empty() ? "loopback" : (o.emulate + " links").c_str(), o.shape.channels,
      o.shape.depth, formatBytes(o.shape.buffsize).c_str(),
      o.shape.tuner_chunk ? (", chunk " + formatBytes(o.shape.tuner_chunk)).c_str() : "", o.warmup,
      o.iters);
  std::printf("%12s %8s %12s %9s %12s %9s %12s\n", "size(B)", "call", "proxy(us)", "GB/s",
              "driver(us)", "GB/s", "proxy/driver");
  for (uint64_t bytes : o.sizes) {
    const double p = slowest(store.get(), "proxy/" + std::to_string(bytes), o.workers);
    const double d = slowest(store.get(), "driver/" + std::to_string(bytes), o.workers);
    std::printf("%12llu %8s %12.1f %9.4f %12.1f %9.4f %12.2f\n",
                static_cast<unsigned long long>(bytes),
                formatBytes(driver::ncclChainCallBytes(bytes, o.shape), "").c_str(), p,
                bytes / p / 1e3, d, bytes / d / 1e3, d / p);
  }
  return 0;
}

}  // namespace
}  // namespace tally::nccl_source

int main(int argc, char** argv) {
  using namespace tally;
  nccl_source::Options o;
  std::vector<std::string> sizes = {"16M", "64M"};
  std::string buffsize = "4M", chunk;
  CLI::App app{"All-reduce through NCCL's own CollNet proxy and through Tally's driver"};
  app.add_option("--emulate", o.emulate, "Links of this rate (needs root); default loopback");
  app.add_option("--workers", o.workers)->check(CLI::Range(2, 64))->capture_default_str();
  app.add_option("--reducers", o.reducers)->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--sizes", sizes, "All-reduce sizes")->delimiter(',')->capture_default_str();
  app.add_option("-n", o.iters)->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("-w", o.warmup)->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--channels", o.shape.channels)->check(CLI::Range(1, 8))->capture_default_str();
  app.add_option("--nccl-buffsize", buffsize)->capture_default_str();
  app.add_option("--chunk", chunk, "A tuner's chunk (NCCL 2.30 getChunkSize)");
  CLI11_PARSE(app, argc, argv);
  for (const std::string& text : sizes) {
    uint64_t b = 0;
    if (!parseBytes(text, &b).isOk() || b < 4) {
      std::fprintf(stderr, "--sizes: bad size \"%s\"\n", text.c_str());
      return 2;
    }
    o.sizes.push_back(b / 4 * 4);
  }
  std::sort(o.sizes.begin(), o.sizes.end());
  if (!parseBytes(buffsize, &o.shape.buffsize).isOk() ||
      (!chunk.empty() && !parseBytes(chunk, &o.shape.tuner_chunk).isOk())) {
    std::fprintf(stderr, "--nccl-buffsize, --chunk: expected sizes such as 4M\n");
    return 2;
  }
  return nccl_source::run(o);
}
