// SPDX-License-Identifier: Apache-2.0
// runFaultBench: `tally bench --fault`. The setup is runBench's (BenchEnv); the workers run
// runFaultWorker; a thread of the parent kills, freezes, resumes and restarts reducers, and slows
// and heals their emulated links, at the faults' times, counted from the start rank 0 writes;
// then the workers' completion times become the timeline (bench_fault_report.cc).
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/sizes.h"
#include "tools/bench/bench_internal.h"

namespace tally::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Injects the faults from a thread of its own, so each lands at its time whatever the main thread
// is doing. A restarted reducer's parent is this thread (PR_SET_PDEATHSIG fires when the thread
// that forked a child ends), so the thread lives until finish(), after the workers, and stops
// the reducers it started before it ends.
class FaultInjector {
 public:
  FaultInjector(const BenchOptions& o, BenchEnv* env)
      : o_(o), env_(env), injected_(o.faults.size()) {}
  ~FaultInjector() { finish(); }

  // Starts the thread; later calls do nothing. The thread waits for rank 0's start key.
  void start() {
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  // Wakes the thread, lets it resume the reducers left stopped and stop the ones it restarted,
  // and joins it. Idempotent.
  void finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      finishing_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // After finish(): what happened to each fault.
  const std::vector<InjectedFault>& injected() const { return injected_; }

 private:
  // Sleeps until t; false when finish() came first.
  bool sleepUntil(Clock::time_point t) {
    std::unique_lock<std::mutex> lock(mu_);
    return !cv_.wait_until(lock, t, [this] { return finishing_; });
  }

  void run() {
    Clock::time_point start;
    for (;;) {
      std::string text;
      if (env_->store()->check(kFaultStartKey) &&
          env_->store()->get(kFaultStartKey, &text, 0).isOk()) {
        const std::chrono::duration<double, std::milli> ms(std::strtod(text.c_str(), nullptr));
        start = Clock::time_point(std::chrono::duration_cast<Clock::duration>(ms));
        break;
      }
      if (!sleepUntil(Clock::now() + std::chrono::milliseconds(5))) return;
    }
    std::vector<bool> stopped(static_cast<size_t>(o_.reducers)),
        restarted(static_cast<size_t>(o_.reducers));
    for (size_t i = 0; i < o_.faults.size(); ++i) {
      const Fault& f = o_.faults[i];
      if (!sleepUntil(start + std::chrono::milliseconds(f.at_ms))) break;
      InjectedFault& done = injected_[i];
      done.at_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      const size_t r = static_cast<size_t>(f.reducer);
      switch (f.kind) {
        case FaultKind::kKill:
          env_->killReducer(f.reducer);
          stopped[r] = false;
          break;
        case FaultKind::kStop:
          env_->signalReducer(f.reducer, SIGSTOP);
          stopped[r] = true;
          break;
        case FaultKind::kCont:
          env_->signalReducer(f.reducer, SIGCONT);
          stopped[r] = false;
          break;
        case FaultKind::kRestart: {
          Status s = env_->restartReducer(f.reducer);
          if (s.isOk()) {
            restarted[r] = true;
          } else {
            done.error = s.toString();
          }
          break;
        }
        case FaultKind::kSlow:
        case FaultKind::kHeal: {
          Status s = env_->setReducerRate(f.reducer, faultRate(o_, f));
          if (!s.isOk()) done.error = s.toString();
          break;
        }
      }
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return finishing_; });
    }
    // A stopped reducer would sit on the SIGTERM that stops it; one this thread started dies
    // with it, so it is stopped properly first.
    for (size_t r = 0; r < stopped.size(); ++r) {
      if (stopped[r]) env_->signalReducer(static_cast<int>(r), SIGCONT);
    }
    for (size_t r = 0; r < restarted.size(); ++r) {
      if (!restarted[r]) continue;
      Status s = env_->stopReducer(static_cast<int>(r));
      if (!s.isOk()) std::fprintf(stderr, "reducer: %s\n", s.toString().c_str());
    }
  }

  const BenchOptions& o_;
  BenchEnv* env_;
  std::vector<InjectedFault> injected_;  // written by the thread, read after it is joined
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool finishing_ = false;  // guarded by mu_
};

// A worker's result key: its wrong count (-1: not checked) and completion times. False when it
// is missing or malformed (the worker failed before writing it).
bool readWorkerTimes(Store* store, int rank, int64_t* wrong, std::vector<double>* done_ms) {
  std::string value;
  if (!store->check(faultResultKey(rank)) || !store->get(faultResultKey(rank), &value, 0).isOk())
    return false;
  std::istringstream in(value);
  long long w = 0;
  size_t n = 0;
  if (!(in >> w >> n)) return false;
  std::vector<double> times(n);
  for (double& t : times) {
    if (!(in >> t)) return false;
  }
  *wrong = w;
  *done_ms = std::move(times);
  return true;
}

// A call counts as completed when its slowest worker completed it; calls a worker lacks are
// dropped (it failed, and the run fails with it).
void collectTimes(const BenchOptions& o, Store* store, FaultRunData* d) {
  std::vector<std::vector<double>> all;
  for (int r = 0; r < o.workers; ++r) {
    int64_t wrong = 0;
    std::vector<double> times;
    if (!readWorkerTimes(store, r, &wrong, &times)) {
      d->failed = true;
      continue;
    }
    d->wrong = (wrong < 0 || d->wrong < 0) ? -1 : d->wrong + wrong;
    all.push_back(std::move(times));
  }
  if (all.empty()) return;
  size_t calls = all.front().size();
  for (const auto& t : all) calls = std::min(calls, t.size());
  d->completions_ms.assign(calls, 0);
  for (const auto& t : all) {
    for (size_t i = 0; i < calls; ++i) d->completions_ms[i] = std::max(d->completions_ms[i], t[i]);
  }
}

}  // namespace

int runFaultBench(const BenchOptions& given) {
  const char* name = given.command_name.c_str();
  auto fail = [&](const Status& s) {
    std::fprintf(stderr, "%s: %s\n", name, s.isOk() ? "failed" : s.message().c_str());
    return 2;
  };
  Status s = validateFaultOptions(given);
  if (!s.isOk()) return fail(s);
  const BenchOptions o = faultRunOptions(given);
  bool gloo_runs = false;
  s = validateOptions(o, &gloo_runs);
  if (!s.isOk()) return fail(s);

  RunInfo info = machineInfo();
  if (given.algos.size() > 1) info.notes.push_back("a fault run measures rs only");
  s = pickVersion(o.plugin, o.table_version, &info.version);
  if (!s.isOk()) return fail(s);
  std::unique_ptr<BenchEnv> env;
  s = BenchEnv::create(o, /*server=*/true, &env);
  if (!s.isOk()) return fail(s);
  info.reducer_list = env->reducerList();
  printHeader(o, info);

  WorkerPlan plan;
  plan.options = &o;
  plan.reducer_list = info.reducer_list;
  plan.version = info.version;
  plan.store_dir = env->dir();
  plan.ifname = env->nodes() ? "eth0" : "lo";
  FaultInjector injector(o, env.get());
  Progress progress(o.progress);
  std::vector<driver::WorkerExit> exits;
  // The injector starts at the first tick, once every worker is forked: a fork while it runs
  // would copy a thread's half-taken locks into the child.
  s = runChildren(
      env->guard(), o.workers,
      [&](int rank) {
        WorkerPlan mine = plan;
        mine.node = env->workerNode(rank);
        return runFaultWorker(mine, rank);
      },
      o.timeout_ms,
      [&] {
        injector.start();
        std::string text;
        if (!env->store()->get(kFaultStartKey, &text, 0).isOk()) return;
        const double since = Clock::now().time_since_epoch() / std::chrono::milliseconds(1) -
                             std::strtod(text.c_str(), nullptr);
        progress.show("rs " + formatBytes(o.sizes.front()) + " fault run " +
                      std::to_string(static_cast<int>(since / 1000)) + "/" +
                      std::to_string(o.duration_ms / 1000) + " s");
      },
      &exits);
  injector.finish();
  progress.clear();
  if (!s.isOk()) return fail(s);

  FaultRunData data;
  data.injected = injector.injected();
  std::string why;
  if (!driver::allWorkersOk(exits, &why)) {
    data.failed = true;
    std::fprintf(stderr, "%s: worker failures:\n%s", name, why.c_str());
  }
  for (size_t i = 0; i < o.faults.size(); ++i) {
    const InjectedFault& f = data.injected[i];
    if (f.error.empty() && f.at_ms >= 0) continue;
    data.failed = true;
    std::fprintf(stderr, "%s: %s: %s\n", name, faultName(o.faults[i]).c_str(),
                 f.error.empty() ? "never injected (the run ended first)" : f.error.c_str());
  }
  collectTimes(o, env->store(), &data);
  const FaultTimeline timeline = computeTimeline(o, data);
  const int code = printFaultReport(o, data, timeline);

  int exit_code = code;
  if (!o.json_path.empty()) {
    s = writeFaultJson(o, info, data, timeline, code);
    if (!s.isOk()) {
      std::fprintf(stderr, "%s: %s\n", name, s.toString().c_str());
      exit_code = std::max(exit_code, 1);
    }
  }
  if (!o.plot_path.empty()) {
    s = writeFaultPlot(o, data, timeline);
    if (!s.isOk()) {
      std::fprintf(stderr, "%s: plot: %s\n", name, s.toString().c_str());
      exit_code = std::max(exit_code, 1);
    }
  }
  return exit_code;
}

}  // namespace tally::bench
