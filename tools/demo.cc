#include "tools/demo.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "tools/driver/plugin_library.h"
#include "tools/driver/process.h"

namespace tally::demo {
namespace {

struct Cell {
  double time_us = 0;  // slowest rank's mean
  uint64_t wrong = 0;  // summed over ranks
  bool present = false;
};

Status collect(Store* store, const std::string& impl, uint64_t bytes, int workers, Cell* out) {
  Cell cell;
  for (int r = 0; r < workers; ++r) {
    std::string key = impl + "/" + std::to_string(bytes) + "/" + std::to_string(r);
    if (!store->check(key)) return Status::ok();  // that worker never got there
    std::string value;
    TALLY_RETURN_IF_ERROR(store->get(key, &value, 0));
    double t = 0;
    unsigned long long wrong = 0;
    if (std::sscanf(value.c_str(), "%lf %llu", &t, &wrong) != 2) {
      return Status::internal("bad result " + value + " for " + key);
    }
    cell.time_us = std::max(cell.time_us, t);
    cell.wrong += wrong;
  }
  cell.present = true;
  *out = cell;
  return Status::ok();
}

std::string humanBytes(uint64_t b) {
  char buf[32];
  if (b >= (1u << 20) && b % (1u << 20) == 0) {
    std::snprintf(buf, sizeof(buf), "%llu MiB", static_cast<unsigned long long>(b >> 20));
  } else if (b >= 1024 && b % 1024 == 0) {
    std::snprintf(buf, sizeof(buf), "%llu KiB", static_cast<unsigned long long>(b >> 10));
  } else {
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(b));
  }
  return buf;
}

// Newest version both tables export, or the one asked for.
Status pickVersion(const std::string& plugin, int wanted, int* out) {
  // Only dlopen and dlsym here: the parent never initializes the plugin, so the workers it forks
  // inherit no plugin threads or sockets.
  std::unique_ptr<driver::PluginLibrary> lib;
  TALLY_RETURN_IF_ERROR(driver::PluginLibrary::open(plugin, &lib));
  std::vector<int> net = lib->netVersions(), coll = lib->collNetVersions();
  for (int v = driver::kMaxTableVersion; v >= driver::kMinTableVersion; --v) {
    bool both = std::count(net.begin(), net.end(), v) && std::count(coll.begin(), coll.end(), v);
    if ((wanted == 0 || wanted == v) && both) {
      *out = v;
      return Status::ok();
    }
  }
  return Status::invalidUsage(plugin +
                              " exports no matching ncclNetPlugin_vN/ncclCollNetPlugin_vN pair" +
                              (wanted ? " for v" + std::to_string(wanted) : std::string()));
}

}  // namespace

std::vector<uint64_t> defaultSizes() {
  std::vector<uint64_t> sizes;
  for (uint64_t b = 256 * 1024; b <= 64ull * 1024 * 1024; b *= 4) sizes.push_back(b);
  return sizes;
}

int runDemo(const DemoOptions& options) {
  if (options.workers < 2 || options.reducers < 1) {
    std::fprintf(stderr, "tally demo: needs at least 2 workers and 1 reducer\n");
    return 2;
  }
  if (::access(options.plugin.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "tally demo: plugin %s not found (use --plugin)\n",
                 options.plugin.c_str());
    return 2;
  }
  if (::access(options.reducer.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "tally demo: tally-reducer %s not found (use --reducer)\n",
                 options.reducer.c_str());
    return 2;
  }
  int version = 0;
  Status s = pickVersion(options.plugin, options.table_version, &version);
  if (!s.isOk()) {
    std::fprintf(stderr, "tally demo: %s\n", s.toString().c_str());
    return 2;
  }

  std::unique_ptr<driver::TempDir> dir;
  std::unique_ptr<Store> store;
  s = driver::TempDir::create("demo", &dir);
  if (s.isOk()) s = createFileStore(dir->path(), &store);
  std::vector<std::unique_ptr<driver::ReducerProcess>> reducers;
  std::vector<std::string> reducer_args;
  if (options.reducer_threads > 0) {
    reducer_args = {"--threads", std::to_string(options.reducer_threads)};
  }
  if (s.isOk())
    s = driver::startReducers(options.reducer, options.reducers, reducer_args, 20000, &reducers);
  if (!s.isOk()) {
    std::fprintf(stderr, "tally demo: %s\n", s.toString().c_str());
    return 2;
  }
  std::string list = driver::reducerList(reducers);

  std::printf(
      "tally demo: %d workers, %d reducers (%s), float32 sum, ncclCollNet v%d / ncclNet v%d\n",
      options.workers, options.reducers, list.c_str(), version, version);
  std::printf("plugin %s\n", options.plugin.c_str());
  std::printf(
      "%d warm-up + %d timed iterations per size; time is the slowest worker's mean; "
      "algbw = bytes / time\n\n",
      options.warmup, options.iters);
  std::fflush(stdout);

  std::vector<driver::WorkerExit> exits;
  s = driver::runWorkers(
      options.workers,
      [&](int rank) { return runDemoWorker(options, list, version, store.get(), rank); },
      options.timeout_ms, &exits);
  bool failed = !s.isOk();
  if (!s.isOk()) std::fprintf(stderr, "tally demo: %s\n", s.toString().c_str());

  std::printf("%10s %10s | %12s %12s | %12s %12s | %6s | %7s\n", "size", "count", "server us",
              "server GB/s", "ring us", "ring GB/s", "ratio", "#wrong");
  uint64_t total_wrong = 0;
  for (uint64_t bytes : options.sizes) {
    Cell server, ring;
    Status cs = collect(store.get(), "server", bytes, options.workers, &server);
    if (cs.isOk() && options.ring) cs = collect(store.get(), "ring", bytes, options.workers, &ring);
    if (!cs.isOk()) std::fprintf(stderr, "tally demo: %s\n", cs.toString().c_str());
    auto algbw = [&](const Cell& c) { return c.time_us > 0 ? bytes / (c.time_us * 1e3) : 0.0; };
    char server_us[32] = "-", server_bw[32] = "-", ring_us[32] = "-", ring_bw[32] = "-",
         ratio[32] = "-";
    if (server.present) {
      std::snprintf(server_us, sizeof(server_us), "%.1f", server.time_us);
      std::snprintf(server_bw, sizeof(server_bw), "%.3f", algbw(server));
    }
    if (ring.present) {
      std::snprintf(ring_us, sizeof(ring_us), "%.1f", ring.time_us);
      std::snprintf(ring_bw, sizeof(ring_bw), "%.3f", algbw(ring));
    }
    if (server.present && ring.present && algbw(ring) > 0) {
      std::snprintf(ratio, sizeof(ratio), "%.2f", algbw(server) / algbw(ring));
    }
    uint64_t wrong = server.wrong + ring.wrong;
    total_wrong += wrong;
    if (!server.present || (options.ring && !ring.present)) failed = true;
    std::printf("%10s %10llu | %12s %12s | %12s %12s | %6s | %7llu\n", humanBytes(bytes).c_str(),
                static_cast<unsigned long long>(bytes / 4), server_us, server_bw, ring_us, ring_bw,
                ratio, static_cast<unsigned long long>(wrong));
  }
  std::string why;
  if (!driver::allWorkersOk(exits, &why)) {
    failed = true;
    std::fprintf(stderr, "tally demo: worker failures:\n%s", why.c_str());
  }
  for (auto& r : reducers) {
    Status rs = r->stop();
    if (!rs.isOk()) std::fprintf(stderr, "tally demo: %s\n", rs.toString().c_str());
  }
  if (total_wrong != 0)
    std::printf("\nFAILED: %llu wrong elements\n", static_cast<unsigned long long>(total_wrong));
  else if (failed)
    std::printf("\nFAILED: see the errors above\n");
  else
    std::printf("\nall results correct\n");
  return (failed || total_wrong != 0) ? 1 : 0;
}

}  // namespace tally::demo
