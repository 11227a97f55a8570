// SPDX-License-Identifier: Apache-2.0
// Failover soak (docs/failover.md): one long run of the failover tests' mixed workload (the three
// collectives, every type and op, each call checked against the independent reference) while
// reducers are killed and restarted at their addresses, or frozen and let run again, at seeded
// moments, at least 50 times. Every call must be exact, every rank must end with the same digest,
// each fault must stall the calls no longer than its bound, and the reducers must be taken back
// in each time (so the run never runs out of them).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/store.h"
#include "test/system/reliability/failover_support.h"
#include "test/system/reliability/reliability_support.h"

namespace tally::reliability {
namespace {

using driver::CollComm;
using driver::CollCommOptions;

constexpr int kWorkers = 3;
constexpr int kReducers = 4;
constexpr int kFaults = 50;
// Two reducers at most are down at once: a fault every kFaultEveryMs, each reducer back well
// within kReducers of those.
constexpr int64_t kFaultEveryMs = 1100;

struct Injected {
  bool stop = false;  // SIGSTOP then SIGCONT; else SIGKILL then a restart at the address
  int reducer = 0;
  int64_t at_ms = 0;
};

// It stalled in about a third of its runs while small calls were done at landing and a slice
// lost with its reducer waited for the epoch's boundary (a call delivered to some ranks only let
// them run ahead of a boundary the others could not reach); such slices are now sent again at
// once (docs/failover.md, "Small calls are done at landing").
TEST(FailoverSoak, FiftySeededFaultsEveryCallExact) {
  if (functional::pluginPath().empty() || functional::reducerPath().empty()) {
    GTEST_SKIP() << "plugin or tally-reducer was not built";
  }
  std::unique_ptr<driver::TempDir> dir;
  ASSERT_TRUE(driver::TempDir::create("failover-soak", &dir).isOk());
  std::unique_ptr<Store> store;
  ASSERT_TRUE(createFileStore(dir->path(), &store).isOk());
  std::vector<Reducer> reducers(kReducers);
  std::vector<std::string> addresses;
  for (Reducer& r : reducers) {
    Status s = startReducer("127.0.0.1:0", &r);
    ASSERT_TRUE(s.isOk()) << s.toString();
    addresses.push_back(r.process->address());
  }
  std::string list;
  for (const std::string& a : addresses) list += (list.empty() ? "" : ",") + a;

  // Round-robin over the reducers, so each has kReducers - 1 fault intervals to come back.
  std::mt19937_64 rng(20261203);
  std::vector<Injected> faults;
  for (int i = 0; i < kFaults; ++i) {
    Injected f;
    f.reducer = i % kReducers;
    f.stop = rng() % 3 == 0;
    f.at_ms = 500 + i * kFaultEveryMs + static_cast<int64_t>(rng() % 300);
    faults.push_back(f);
  }
  const uint64_t seed = 50;
  std::atomic<bool> workers_done{false};
  std::atomic<int> injected{0};
  // The injector: each fault, and the recovery of the reducer that took it (a restart or a
  // SIGCONT) 400-900 ms later, sleeping in between. It lives until the workers are done: the
  // reducers it restarts die with the thread that forked them (PR_SET_PDEATHSIG).
  std::thread injector([&] {
    std::string go;
    if (!store->get("go", &go, 60000).isOk()) return;
    const int64_t start = std::stoll(go);
    struct Pending {
      int64_t at_ms;
      int reducer;
      bool stop;
    };
    std::vector<Pending> recoveries;
    size_t next = 0;
    std::mt19937_64 local(7);
    while (next < faults.size() || !recoveries.empty()) {
      int64_t due = INT64_MAX;
      if (next < faults.size()) due = faults[next].at_ms;
      for (const Pending& p : recoveries) due = std::min(due, p.at_ms);
      const int64_t wait = start + due - steadyMs();
      if (wait > 0) std::this_thread::sleep_for(std::chrono::milliseconds(wait));
      const int64_t now = steadyMs() - start;
      for (size_t i = 0; i < recoveries.size();) {
        if (recoveries[i].at_ms > now) {
          ++i;
          continue;
        }
        Reducer& r = reducers[recoveries[i].reducer];
        if (recoveries[i].stop) {
          ::kill(r.process->pid(), SIGCONT);
        } else {
          Reducer again;
          Status st = startReducer(addresses[recoveries[i].reducer], &again);
          if (st.isOk()) {
            r = std::move(again);
          } else {
            std::fprintf(stderr, "restart of %s: %s\n", addresses[recoveries[i].reducer].c_str(),
                         st.toString().c_str());
          }
        }
        recoveries.erase(recoveries.begin() + static_cast<long>(i));
      }
      if (next < faults.size() && faults[next].at_ms <= now) {
        const Injected& f = faults[next++];
        Reducer& r = reducers[f.reducer];
        if (f.stop) {
          ::kill(r.process->pid(), SIGSTOP);
        } else {
          r.process->kill();
        }
        (void)store->set("fault/" + std::to_string(injected.fetch_add(1)),
                         std::to_string(steadyMs()));
        const int64_t back = f.stop ? kReducerTimeoutMs + 400 + static_cast<int64_t>(local() % 500)
                                    : 400 + static_cast<int64_t>(local() % 500);
        recoveries.push_back(Pending{now + back, f.reducer, f.stop});
      }
    }
    (void)store->set("faults-done", std::to_string(steadyMs()));
    while (!workers_done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });

  std::vector<driver::WorkerExit> exits;
  Status s = driver::runWorkers(kWorkers, [&](int rank) -> int {
    // The plugin's failover events, as NCCL's log shows them, and when (steadyMs, the clock the
    // injector stamps the faults with), for the timeline printed when one is missing.
    static std::atomic<int> lost{0}, joined{0};
    static std::mutex timeline_mu;
    static std::string timeline;
    driver::setPluginWarnHook([](const char* line) {
      const bool is_lost = std::strstr(line, ") lost: ") != nullptr;
      const bool is_join = std::strstr(line, " joined as slot ") != nullptr;
      if (is_lost) lost.fetch_add(1);
      if (is_join) joined.fetch_add(1);
      if (!is_lost && !is_join) return;
      const char* slot = std::strstr(line, "slot ");
      std::lock_guard<std::mutex> lock(timeline_mu);
      timeline += std::to_string(steadyMs()) + (is_lost ? " lost " : " joined ") +
                  (slot != nullptr ? std::string(1, slot[5]) : std::string("?")) + "\n";
    });
    functional::setWorkerEnvironment(list);
    ::setenv("TALLY_TIMEOUT_MS", "30000", 1);
    ::setenv("TALLY_REDUCER_TIMEOUT_MS", std::to_string(kReducerTimeoutMs).c_str(), 1);
    ::setenv("TALLY_REJOIN_INTERVAL_MS", "200", 1);
    std::unique_ptr<driver::PluginLibrary> lib;
    std::unique_ptr<driver::CollNetApi> api;
    if (!functional::check(rank, driver::PluginLibrary::open(functional::pluginPath(), &lib),
                           "dlopen") ||
        !functional::check(rank, lib->collNet(12, &api, driver::CallingNccl::k230),
                           "collnet table")) {
      return 2;
    }
    CollCommOptions options;
    options.call_bytes = 1 << 20;
    options.timeout_ms = 60000;
    std::unique_ptr<CollComm> comm;
    if (!functional::check(
            rank, CollComm::create(api.get(), store.get(), "soak", rank, kWorkers, options, &comm),
            "setup")) {
      return 3;
    }
    if (!storeBarrier(store.get(), "ready", rank, kWorkers, 30000).isOk()) return 4;
    if (rank == 0) (void)store->set("go", std::to_string(steadyMs()));
    // Rank 0 ends the run a few calls after the faults are over; the others follow it there
    // (no rank is more than one call ahead of another: a call completes only once every rank
    // has landed it).
    uint64_t done_calls = 0;
    uint64_t last = UINT64_MAX;
    auto lastCall = [&]() -> uint64_t {
      ++done_calls;
      if (last != UINT64_MAX) return last;
      std::string v;
      if (rank == 0) {
        if (store->check("faults-done")) {
          last = done_calls + 20;
          (void)store->set("last", std::to_string(last));
        }
      } else if (store->check("last") && store->get("last", &v, 0).isOk()) {
        last = std::stoull(v);
      }
      return last;
    };
    RunResult r;
    Status st = runWorkloadWhile(comm.get(), seed, lastCall, 9, 10, &r);
    (void)store->set("result/" + std::to_string(rank), formatResult(st, r));
    (void)store->set("times/" + std::to_string(rank), formatTimes(r.done_ms));
    (void)store->set("events/" + std::to_string(rank),
                     std::to_string(lost.load()) + " " + std::to_string(joined.load()));
    {
      std::lock_guard<std::mutex> lock(timeline_mu);
      (void)store->set("timeline/" + std::to_string(rank), timeline);
    }
    (void)comm->close();
    return 0;
  }, 400000, &exits);
  workers_done.store(true);
  injector.join();
  ASSERT_TRUE(s.isOk()) << s.toString();
  for (int r = 0; r < kWorkers; ++r) EXPECT_TRUE(exits[r].ok()) << exits[r].describe();
  EXPECT_EQ(injected.load(), kFaults);

  std::vector<int64_t> fault_ms;
  for (int i = 0; i < kFaults; ++i) {
    std::string at;
    ASSERT_TRUE(store->get("fault/" + std::to_string(i), &at, 0).isOk()) << "fault " << i;
    fault_ms.push_back(std::stoll(at));
  }
  uint64_t digest = 0, calls = 0;
  for (int r = 0; r < kWorkers; ++r) {
    std::string text, error;
    ASSERT_TRUE(store->get("result/" + std::to_string(r), &text, 0).isOk()) << "rank " << r;
    RunResult res;
    ASSERT_TRUE(parseResult(text, &res, &error)) << "rank " << r << ": " << error;
    if (r == 0) {
      digest = res.digest;
      calls = res.calls;
    }
    EXPECT_EQ(res.digest, digest) << "rank " << r << " ended with other bits than rank 0";
    EXPECT_EQ(res.calls, calls) << "rank " << r;
    // From each fault to the next call done: about a second after a kill, the reducer timeout
    // and about a second after a freeze (with slack for a loaded machine).
    std::string times;
    ASSERT_TRUE(store->get("times/" + std::to_string(r), &times, 0).isOk());
    const std::vector<int64_t> resume = resumeAfter(parseTimes(times), fault_ms);
    // Faults whose windows (from the fault to its bound) overlap form a group: a kill while
    // another reducer is frozen and not yet dropped waits for that freeze's timeout, and a
    // freeze on top of a freeze extends the first one's stall. Each fault of a group resumes by
    // the group's last deadline. A fault shows its own time only when it came alone: no earlier
    // fault held the calls up any more (underWayUntil), and the next came after it stopped.
    auto boundOf = [&](int i) { return faults[i].stop ? kReducerTimeoutMs + 1000 : 1000; };
    std::vector<int> group(kFaults, 0);
    std::vector<int64_t> group_end;
    for (int i = 0; i < kFaults; ++i) {
      if (i == 0 || fault_ms[i] >= group_end.back()) {
        group_end.push_back(0);
      }
      group[i] = static_cast<int>(group_end.size()) - 1;
      group_end.back() = std::max(group_end.back(), fault_ms[i] + boundOf(i));
    }
    // Until when fault j holds the calls up: a killed reducer until they resumed; a frozen one
    // until it is dropped (the reducer timeout and a keeper tick), though calls that do not use
    // it may finish before.
    auto underWayUntil = [&](int j) {
      const int64_t held = faults[j].stop ? std::max<int64_t>(resume[j], kReducerTimeoutMs + 200)
                                          : resume[j];
      return fault_ms[j] + held;
    };
    int64_t worst_kill = -1, worst_stop = -1;
    int alone_kills = 0, alone_stops = 0;
    for (int i = 0; i < kFaults; ++i) {
      const int64_t deadline = group_end[group[i]];
      bool alone = resume[i] >= 0;
      for (int j = 0; j < kFaults && alone; ++j) {
        if (j < i) alone = resume[j] >= 0 && underWayUntil(j) <= fault_ms[i];
        if (j > i) alone = fault_ms[j] >= underWayUntil(i);
      }
      EXPECT_GE(resume[i], 0) << "rank " << r << ": nothing done after fault " << i;
      EXPECT_LE(resume[i], deadline - fault_ms[i] + 3000) << "rank " << r << ", fault " << i;
      int64_t& worst = faults[i].stop ? worst_stop : worst_kill;
      if (alone) {
        worst = std::max(worst, resume[i]);
        ++(faults[i].stop ? alone_stops : alone_kills);
      }
      if (r == 0) {
        std::fprintf(stderr, "soak: fault %d (%s reducer %d) at +%lld ms: calls resumed %lld ms "
                             "after it%s\n",
                     i, faults[i].stop ? "freeze" : "kill", faults[i].reducer,
                     static_cast<long long>(fault_ms[i] - fault_ms[0]),
                     static_cast<long long>(resume[i]),
                     alone ? "" : " (while another fault was under way)");
      }
    }
    std::fprintf(stderr, "soak: rank %d: of the faults that came alone, calls resumed at worst "
                         "%lld ms after a kill (of %d), %lld ms after a freeze (of %d; "
                         "TALLY_REDUCER_TIMEOUT_MS %lld); -1: none came alone\n",
                 r, static_cast<long long>(worst_kill), alone_kills,
                 static_cast<long long>(worst_stop), alone_stops,
                 static_cast<long long>(kReducerTimeoutMs));
    RecordProperty("worst_resume_after_kill_ms_rank" + std::to_string(r), std::to_string(worst_kill));
    RecordProperty("worst_resume_after_freeze_ms_rank" + std::to_string(r), std::to_string(worst_stop));
    std::fprintf(stderr, "soak: rank %d: %llu calls exact under %d faults, longest stall %lld ms\n",
                 r, static_cast<unsigned long long>(res.calls), kFaults,
                 static_cast<long long>(res.longest_gap_ms));
    RecordProperty("calls_rank" + std::to_string(r), std::to_string(res.calls));
    RecordProperty("longest_stall_ms_rank" + std::to_string(r), std::to_string(res.longest_gap_ms));
  }
  // Each loss was agreed and each reducer taken back in: the WARN lines every rank logged.
  for (int r = 0; r < kWorkers; ++r) {
    std::string text;
    ASSERT_TRUE(store->get("events/" + std::to_string(r), &text, 0).isOk()) << "rank " << r;
    int lost = 0, joined = 0;
    ASSERT_EQ(std::sscanf(text.c_str(), "%d %d", &lost, &joined), 2) << text;
    std::fprintf(stderr, "soak: rank %d: %d reducers lost, %d taken back in\n", r, lost, joined);
    EXPECT_GE(lost, kFaults) << "rank " << r;
    if (lost < kFaults) {
      // Which fault went unseen: each fault and each event of this rank, in time order.
      std::string events;
      (void)store->get("timeline/" + std::to_string(r), &events, 0);
      std::vector<std::pair<int64_t, std::string>> all;
      for (int i = 0; i < kFaults; ++i) {
        all.emplace_back(fault_ms[i], "fault " + std::to_string(i) + " (" +
                                          (faults[i].stop ? "freeze" : "kill") + " slot " +
                                          std::to_string(faults[i].reducer) + ")");
      }
      std::istringstream lines(events);
      int64_t at = 0;
      std::string kind, slot;
      while (lines >> at >> kind >> slot) all.emplace_back(at, "  " + kind + " slot " + slot);
      std::stable_sort(all.begin(), all.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      for (const auto& [when, what] : all) {
        std::fprintf(stderr, "soak: rank %d timeline: +%lld ms %s\n", r,
                     static_cast<long long>(when - fault_ms[0]), what.c_str());
      }
    }
    // The last faults' reducers may come back after the calls ended.
    EXPECT_GE(joined, kFaults - kReducers) << "rank " << r;
  }
}

}  // namespace
}  // namespace tally::reliability
