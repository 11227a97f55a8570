// SPDX-License-Identifier: Apache-2.0
// BenchEnv: what a run of the bench stands on (the signal guard, the scratch directory and its
// store, the emulated cluster, the reducers), made in that order and taken down in reverse.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "tools/bench/bench_internal.h"
#include "tools/driver/plugin_library.h"

namespace tally::bench {

constexpr int64_t kReducerStartMs = 20000;

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

Status BenchEnv::create(const BenchOptions& o, bool server, std::unique_ptr<BenchEnv>* out) {
  std::unique_ptr<BenchEnv> env(new BenchEnv(o));
  TALLY_RETURN_IF_ERROR(RunGuard::install(&env->guard_));
  TALLY_RETURN_IF_ERROR(driver::TempDir::create("bench", &env->dir_));
  TALLY_RETURN_IF_ERROR(createFileStore(env->dir_->path(), &env->store_));
  // The watcher's cleanup reads cluster_, which is declared before guard_ and so outlives it.
  env->guard_->setCleanup([e = env.get(), dir = env->dir_->path()] {
    if (e->cluster_) (void)e->cluster_->destroy();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  });
  if (!o.emulate.empty()) {
    driver::EmulationOptions eo;
    eo.nodes = o.workers + (server ? o.reducers : 0);
    eo.rate = o.emulate;
    eo.burst = o.emulate_burst;
    eo.tcp_congestion = o.emulate_cc == "host" ? "" : o.emulate_cc;
    std::lock_guard<std::mutex> lock(env->guard_->mutex());
    TALLY_RETURN_IF_ERROR(driver::EmulatedCluster::create(eo, &env->cluster_));
  }
  if (server) {
    for (int i = 0; i < o.reducers; ++i) {
      std::unique_ptr<driver::ReducerProcess> r;
      TALLY_RETURN_IF_ERROR(driver::ReducerProcess::launch(o.reducer, env->reducerOptions(i, ""),
                                                           kReducerStartMs, &r));
      env->guard_->addChild(r->pid());
      env->reducers_.push_back(std::move(r));
    }
  }
  *out = std::move(env);
  return Status::ok();
}

BenchEnv::~BenchEnv() {
  // Reducers first: a reducer inside a node would otherwise outlive its link for a moment.
  for (auto& r : reducers_) {
    if (!r) continue;
    Status s = r->stop();
    if (guard_) guard_->removeChild(r->pid());
    if (!s.isOk()) std::fprintf(stderr, "reducer: %s\n", s.toString().c_str());
  }
  reducers_.clear();
  if (guard_ && cluster_) {
    std::lock_guard<std::mutex> lock(guard_->mutex());
    Status s = cluster_->destroy();
    if (!s.isOk()) std::fprintf(stderr, "emulated cluster teardown: %s\n", s.toString().c_str());
    cluster_.reset();
  }
  // Then the store and the directory, then the guard (its handlers go), then nothing is left.
}

const std::vector<driver::EmulatedNode>* BenchEnv::nodes() const {
  return cluster_ ? &cluster_->nodes() : nullptr;
}

const driver::EmulatedNode* BenchEnv::workerNode(int rank) const {
  return cluster_ ? &cluster_->nodes()[static_cast<size_t>(rank)] : nullptr;
}

std::string BenchEnv::reducerList() const { return driver::reducerList(reducers_); }

std::vector<pid_t> BenchEnv::reducerPids() const {
  std::vector<pid_t> pids;
  for (const auto& r : reducers_) pids.push_back(r->pid());
  return pids;
}

driver::ReducerOptions BenchEnv::reducerOptions(int i, const std::string& listen) const {
  const std::vector<std::string> extra = {"--threads", std::to_string(reducerThreadsFor(o_))};
  driver::ReducerOptions ro;
  ro.extra_args = extra;
  if (cluster_)
    ro = driver::reducerInNode(cluster_->nodes()[static_cast<size_t>(reducerNode(i))], extra);
  if (!listen.empty()) ro.listen = listen;
  return ro;
}

void BenchEnv::killReducer(int i) {
  driver::ReducerProcess& r = *reducers_[static_cast<size_t>(i)];
  r.kill();
  guard_->removeChild(r.pid());
}

void BenchEnv::signalReducer(int i, int sig) {
  ::kill(reducers_[static_cast<size_t>(i)]->pid(), sig);
}

Status BenchEnv::restartReducer(int i) {
  auto& slot = reducers_[static_cast<size_t>(i)];
  const std::string address = slot->address();
  slot->kill();  // a no-op when it was killed already, as --fault requires
  guard_->removeChild(slot->pid());
  std::unique_ptr<driver::ReducerProcess> r;
  TALLY_RETURN_IF_ERROR(
      driver::ReducerProcess::launch(o_.reducer, reducerOptions(i, address), kReducerStartMs, &r));
  guard_->addChild(r->pid());
  slot = std::move(r);
  return Status::ok();
}

Status BenchEnv::setReducerRate(int i, const std::string& rate) {
  if (!cluster_) return Status::invalidUsage("changing a reducer's link rate needs --emulate");
  return cluster_->setRate(reducerNode(i), rate);
}

Status BenchEnv::stopReducer(int i) {
  driver::ReducerProcess& r = *reducers_[static_cast<size_t>(i)];
  Status s = r.stop();
  guard_->removeChild(r.pid());
  return s;
}

}  // namespace tally::bench
