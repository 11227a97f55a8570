// SPDX-License-Identifier: Apache-2.0
// What each side sees when a worker or a reducer dies or hangs mid-job, and after how long
// (docs/reliability.md). The workers are this program exec'd again (test/support/exec_workers.h),
// one registered body per case. Every worker publishes the outcome of the call that met the
// failure and how long it took; the parent asserts the error (a lost worker) or the exact result
// (a lost reducer, docs/failover.md) and the bound, and that the reducers free the communicator
// and keep serving new ones.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

#include "common/store.h"
#include "test/support/exec_workers.h"
#include "test/system/reliability/reliability_support.h"

namespace tally::reliability {
namespace {

using driver::CollComm;
using driver::CollCommOptions;

constexpr size_t kCount = (1 << 20) + 7;  // 4 MiB and a bit: many slices on every reducer

// The 20 checked calls a communicator makes after losing a reducer: no timeout may end or stall
// them. Under ThreadSanitizer the instrumented inputs, checks and sums alone take about 15 s for
// them, and twice that on a loaded machine.
constexpr int64_t kLostReducerCallsMs = kThreadSanitizer ? 60000 : kTimeoutMs + kSlackMs;

// The outcome a worker publishes: "<StatusCode> <ms> <message>".
std::string outcome(const Status& s, int64_t ms) {
  return std::to_string(static_cast<int>(s.code())) + " " + std::to_string(ms) + " " +
         s.toString();
}
struct Outcome {
  StatusCode code = StatusCode::kOk;
  int64_t ms = -1;
  std::string text;
};
Outcome readOutcome(Store* store, const std::string& key) {
  Outcome o;
  std::string v;
  Status s = store->get(key, &v, 0);
  if (!s.isOk()) {
    o.text = "no outcome published: " + s.toString();
    return o;
  }
  int code = 0;
  long long ms = 0;
  int used = 0;
  if (std::sscanf(v.c_str(), "%d %lld %n", &code, &ms, &used) < 2) {
    o.text = "unreadable outcome: " + v;
    return o;
  }
  o.code = static_cast<StatusCode>(code);
  o.ms = ms;
  o.text = v.substr(static_cast<size_t>(used));
  return o;
}

// In a worker: the file store in directory params "store", and a communicator `name` of
// nranks over the reducers params "reducers" lists, one checked call done.
bool setUpWorker(int rank, int nranks, const std::string& name,
                 const functional::WorkerParams& params, std::unique_ptr<Store>* store,
                 std::unique_ptr<driver::PluginLibrary>* lib,
                 std::unique_ptr<driver::CollNetApi>* api, std::unique_ptr<CollComm>* comm) {
  if (!functional::check(rank, createFileStore(params.get("store"), store), "store")) {
    return false;
  }
  setFailureEnvironment(params.get("reducers"));
  if (!functional::openCollNet(11, lib, api)) return false;
  CollCommOptions options;
  options.call_bytes = kCount * sizeof(float);
  options.timeout_ms = 60000;  // the plugin's own timeout must be what ends a call
  if (!functional::check(
          rank, CollComm::create(api->get(), store->get(), name, rank, nranks, options, comm),
          "setup"))
    return false;
  return functional::check(rank, checkedAllreduce(comm->get(), kCount, 1), "first call");
}

// Worker "serve", one of two: a fresh communicator params "name" completes checked calls.
int serveWorker(int rank, const functional::WorkerParams& params) {
  std::unique_ptr<Store> store;
  std::unique_ptr<driver::PluginLibrary> lib;
  std::unique_ptr<driver::CollNetApi> api;
  std::unique_ptr<CollComm> comm;
  if (!setUpWorker(rank, 2, params.get("name"), params, &store, &lib, &api, &comm)) return 2;
  if (!functional::check(rank, checkedAllreduce(comm.get(), 1000003, 2), "second call")) return 3;
  return functional::check(rank, comm->close(), "close") ? 0 : 4;
}
const bool kServeWorker = functional::registerWorker("serve", serveWorker);

// Worker "killed_worker", one of three: the last rank SIGKILLs itself mid-collective; the
// others publish outcome/<rank> of the call that met the loss.
int killedWorker(int rank, const functional::WorkerParams& params) {
  const int n = 3;
  std::unique_ptr<Store> store;
  std::unique_ptr<driver::PluginLibrary> lib;
  std::unique_ptr<driver::CollNetApi> api;
  std::unique_ptr<CollComm> comm;
  if (!setUpWorker(rank, n, "job", params, &store, &lib, &api, &comm)) return 2;
  if (!storeBarrier(store.get(), "ready", rank, n, 30000).isOk()) return 3;
  if (rank == n - 1) {
    // Mid-collective: its first slices are on their way when it dies.
    std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ::raise(SIGKILL);
    }).detach();
    Status ignored;
    int64_t ms = 0;
    for (;;) timedAllreduce(comm.get(), kCount, &ignored, &ms);
  }
  Status st;
  int64_t ms = 0;
  for (int i = 0; i < 50 && st.isOk(); ++i) timedAllreduce(comm.get(), kCount, &st, &ms);
  (void)store->set("outcome/" + std::to_string(rank), outcome(st, ms));
  (void)comm->close();
  return 0;
}
const bool kKilledWorker = functional::registerWorker("killed_worker", killedWorker);

// Worker "stuck_worker", one of three: the last rank SIGSTOPs itself (rank 0 SIGKILLs it once
// the others are done); the others publish outcome/<rank> of the call that met it.
int stuckWorker(int rank, const functional::WorkerParams& params) {
  const int n = 3;
  std::unique_ptr<Store> store;
  std::unique_ptr<driver::PluginLibrary> lib;
  std::unique_ptr<driver::CollNetApi> api;
  std::unique_ptr<CollComm> comm;
  if (!setUpWorker(rank, n, "job", params, &store, &lib, &api, &comm)) return 2;
  if (rank == n - 1) (void)store->set("stuck-pid", std::to_string(::getpid()));
  if (!storeBarrier(store.get(), "ready", rank, n, 30000).isOk()) return 3;
  if (rank == n - 1) {
    ::raise(SIGSTOP);
    return 0;
  }
  Status st;
  int64_t ms = 0;
  timedAllreduce(comm.get(), kCount, &st, &ms);
  (void)store->set("outcome/" + std::to_string(rank), outcome(st, ms));
  if (rank == 0 && storeBarrier(store.get(), "done", 0, 1, 1000).isOk()) {
    std::string pid;
    if (store->get("stuck-pid", &pid, 1000).isOk()) ::kill(std::stoi(pid), SIGKILL);
  }
  (void)comm->close();
  return 0;
}
const bool kStuckWorker = functional::registerWorker("stuck_worker", stuckWorker);

// Worker "killed_reducer", one of two, on communicators "a" and "b": rank 0 SIGKILLs the
// reducer params "victim" (a pid), then both run 20 checked calls on each communicator and
// publish outcome/<communicator>/<rank>.
int killedReducerWorker(int rank, const functional::WorkerParams& params) {
  const int n = 2;
  std::unique_ptr<Store> store;
  std::unique_ptr<driver::PluginLibrary> lib;
  std::unique_ptr<driver::CollNetApi> api;
  std::unique_ptr<CollComm> a, b;
  if (!setUpWorker(rank, n, "a", params, &store, &lib, &api, &a)) return 2;
  CollCommOptions options;
  options.call_bytes = kCount * sizeof(float);
  options.timeout_ms = 60000;
  if (!functional::check(rank, CollComm::create(api.get(), store.get(), "b", rank, n, options, &b),
                         "setup b"))
    return 2;
  if (!storeBarrier(store.get(), "ready", rank, n, 30000).isOk()) return 3;
  if (rank == 0) ::kill(static_cast<pid_t>(params.getInt("victim")), SIGKILL);
  int i = 0;
  for (CollComm* comm : {a.get(), b.get()}) {
    Status st;
    const auto start = Clock::now();
    for (int k = 0; k < 20 && st.isOk(); ++k) st = checkedAllreduce(comm, kCount, 10 + k);
    (void)store->set("outcome/" + std::to_string(i++) + "/" + std::to_string(rank),
                     outcome(st, msSince(start)));
  }
  (void)a->close();
  (void)b->close();
  return 0;
}
const bool kKilledReducerWorker = functional::registerWorker("killed_reducer", killedReducerWorker);

// Worker "stuck_reducer", one of two, with TALLY_REDUCER_TIMEOUT_MS params "reducer_timeout_ms":
// rank 0 SIGSTOPs the reducer params "victim" (a pid), then both run one checked call and
// publish outcome/<rank>.
int stuckReducerWorker(int rank, const functional::WorkerParams& params) {
  const int n = 2;
  ::setenv("TALLY_REDUCER_TIMEOUT_MS", params.get("reducer_timeout_ms").c_str(), 1);
  std::unique_ptr<Store> store;
  std::unique_ptr<driver::PluginLibrary> lib;
  std::unique_ptr<driver::CollNetApi> api;
  std::unique_ptr<CollComm> comm;
  if (!setUpWorker(rank, n, "job", params, &store, &lib, &api, &comm)) return 2;
  if (!storeBarrier(store.get(), "ready", rank, n, 30000).isOk()) return 3;
  if (rank == 0) ::kill(static_cast<pid_t>(params.getInt("victim")), SIGSTOP);
  if (!storeBarrier(store.get(), "stopped", rank, n, 30000).isOk()) return 3;
  const auto start = Clock::now();
  Status st = checkedAllreduce(comm.get(), kCount, 5);
  (void)store->set("outcome/" + std::to_string(rank), outcome(st, msSince(start)));
  (void)comm->close();
  return 0;
}
const bool kStuckReducerWorker = functional::registerWorker("stuck_reducer", stuckReducerWorker);

class FailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (functional::pluginPath().empty() || functional::reducerPath().empty()) {
      GTEST_SKIP() << "plugin or tally-reducer was not built";
    }
    ASSERT_TRUE(driver::TempDir::create("reliability", &dir_).isOk());
    ASSERT_TRUE(createFileStore(dir_->path(), &store_).isOk());
  }
  void startReducers(int n) {
    for (int i = 0; i < n; ++i) {
      Reducer r;
      Status s = startReducer("127.0.0.1:0", &r);
      ASSERT_TRUE(s.isOk()) << s.toString();
      reducers_.push_back(std::move(r));
    }
  }
  // What every worker is given: the store's directory and the reducers.
  functional::WorkerParams workerParams() const {
    functional::WorkerParams params;
    params.set("store", dir_->path()).set("reducers", reducerList(reducers_));
    return params;
  }
  // Every reducer frees its communicators (the gauge reads 0) within the bound.
  void expectCommunicatorsFreed() {
    for (size_t i = 0; i < reducers_.size(); ++i) {
      auto open = waitOpenCommunicators(reducers_[i], 0, kTimeoutMs + kSlackMs);
      ASSERT_TRUE(open.has_value()) << "reducer " << i << ": no metrics";
      EXPECT_EQ(*open, 0) << "reducer " << i << " still holds a communicator";
    }
  }
  // A fresh communicator of two workers on the same reducers completes checked calls.
  void expectReducersServe(const std::string& name) {
    functional::WorkerParams params = workerParams();
    params.set("name", name);
    std::string why = functional::runAllExec("serve", 2, params);
    EXPECT_EQ(why, "") << "the reducers no longer serve a new communicator";
  }

  // The outcome a worker published under `key`: an error (`code` when given, else any), no sooner
  // than min_ms (the timeout when it is the timeout that should end the call) and no later than
  // the timeout plus slack.
  void expectFailure(const std::string& key, StatusCode code, int64_t min_ms = 0) {
    Outcome o = readOutcome(store_.get(), key);
    if (code == StatusCode::kOk) {
      EXPECT_NE(o.code, StatusCode::kOk) << key << ": " << o.text;
    } else {
      EXPECT_EQ(o.code, code) << key << ": " << o.text;
    }
    EXPECT_GE(o.ms, min_ms) << key << " failed before the timeout: " << o.text;
    EXPECT_LE(o.ms, kTimeoutMs + kSlackMs) << key << ": " << o.text;
  }

  std::unique_ptr<driver::TempDir> dir_;
  std::unique_ptr<Store> store_;
  std::vector<Reducer> reducers_;
};

// A worker killed while the others are in a collective: they get an error (not success, not a
// hang) well within the timeout; every reducer frees the communicator and serves new ones.
TEST_F(FailureTest, KilledWorkerFailsTheOthersAndReducersKeepServing) {
  ASSERT_NO_FATAL_FAILURE(startReducers(2));
  const int n = 3;
  std::vector<driver::WorkerExit> exits;
  Status s = functional::runExecWorkers("killed_worker", n, workerParams(), 120000, &exits);
  ASSERT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(exits[n - 1].signal, SIGKILL) << exits[n - 1].describe();
  for (int r = 0; r < n - 1; ++r) {
    EXPECT_TRUE(exits[r].ok()) << exits[r].describe();
    // NCCL sees ncclRemoteError; the plugin's WARN line names the lost rank and its address.
    expectFailure("outcome/" + std::to_string(r), StatusCode::kRemote);
  }
  expectCommunicatorsFreed();
  expectReducersServe("after");
}

// A worker that stops answering (SIGSTOP, as a hung host): the others fail after about
// TALLY_TIMEOUT_MS, not before the timeout and not never.
TEST_F(FailureTest, StuckWorkerFailsTheOthersAtTheTimeout) {
  ASSERT_NO_FATAL_FAILURE(startReducers(2));
  const int n = 3;
  std::vector<driver::WorkerExit> exits;
  Status s = functional::runExecWorkers("stuck_worker", n, workerParams(), 120000, &exits);
  ASSERT_TRUE(s.isOk()) << s.toString();
  for (int r = 0; r < n - 1; ++r) {
    EXPECT_TRUE(exits[r].ok()) << exits[r].describe();
    expectFailure("outcome/" + std::to_string(r), StatusCode::kOk, kTimeoutMs * 8 / 10);
  }
  expectCommunicatorsFreed();
  expectReducersServe("after");
}

// A reducer killed mid-job costs no communicator using it (docs/failover.md): every call of two
// communicators goes on over the other reducer, checked against the reference, and the calls
// stall for well under a second; the survivor frees both communicators when they close.
TEST_F(FailureTest, KilledReducerCostsNoCommunicatorUsingIt) {
  ASSERT_NO_FATAL_FAILURE(startReducers(2));
  const int n = 2;
  const pid_t victim = reducers_[1].process->pid();
  std::vector<driver::WorkerExit> exits;
  Status s = functional::runExecWorkers("killed_reducer", n, workerParams().set("victim", victim),
                                        120000, &exits);
  ASSERT_TRUE(s.isOk()) << s.toString();
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(exits[r].ok()) << exits[r].describe();
    for (int c = 0; c < 2; ++c) {
      Outcome o = readOutcome(store_.get(), "outcome/" + std::to_string(c) + "/" +
                                                std::to_string(r));
      EXPECT_EQ(o.code, StatusCode::kOk) << o.text;
      EXPECT_LE(o.ms, kLostReducerCallsMs) << o.text;
    }
  }
  reducers_[1].process->kill();
  auto open = waitOpenCommunicators(reducers_[0], 0, kTimeoutMs + kSlackMs);
  ASSERT_TRUE(open.has_value());
  EXPECT_EQ(*open, 0) << "the surviving reducer still holds the closed communicators";
}

// A reducer that stops answering (SIGSTOP) is dropped after TALLY_REDUCER_TIMEOUT_MS, not
// before, and the call completes over the other, exact; once it runs again it finds the workers
// gone and frees the communicator, and both reducers serve a new one.
TEST_F(FailureTest, StuckReducerIsDroppedAfterTheReducerTimeout) {
  ASSERT_NO_FATAL_FAILURE(startReducers(2));
  const int n = 2;
  constexpr int64_t kReducerTimeoutMs = 2000;
  const pid_t victim = reducers_[1].process->pid();
  std::vector<driver::WorkerExit> exits;
  Status s = functional::runExecWorkers(
      "stuck_reducer", n,
      workerParams().set("victim", victim).set("reducer_timeout_ms", kReducerTimeoutMs), 120000,
      &exits);
  ::kill(victim, SIGCONT);
  ASSERT_TRUE(s.isOk()) << s.toString();
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(exits[r].ok()) << exits[r].describe();
    Outcome o = readOutcome(store_.get(), "outcome/" + std::to_string(r));
    EXPECT_EQ(o.code, StatusCode::kOk) << o.text;
    // The workers heard from the reducer up to the SIGSTOP: the timeout counts from there.
    EXPECT_GE(o.ms, kReducerTimeoutMs * 8 / 10) << o.text;
    EXPECT_LE(o.ms, kReducerTimeoutMs + 1000 + kSlackMs) << o.text;
  }
  expectCommunicatorsFreed();  // the reducer, running again, sees the workers gone
  expectReducersServe("after");
}

// A reducer killed and started again on the same address serves new communicators.
TEST_F(FailureTest, RestartedReducerServesNewCommunicators) {
  ASSERT_NO_FATAL_FAILURE(startReducers(2));
  expectReducersServe("before");
  const std::string address = reducers_[1].process->address();
  reducers_[1].process->kill();
  Reducer again;
  Status s = startReducer(address, &again);
  ASSERT_TRUE(s.isOk()) << "restart on " << address << ": " << s.toString();
  reducers_[1] = std::move(again);
  expectReducersServe("after");
}

}  // namespace
}  // namespace tally::reliability
