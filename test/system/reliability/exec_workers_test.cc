// SPDX-License-Identifier: Apache-2.0
// The exec'd workers the failure suites run on (test/support/exec_workers.h): each rank runs the
// registered body in a fresh copy of this program with the parameters the test gave, its exit
// status comes back, a thread of the test may run while the workers start (which a forked worker
// under ThreadSanitizer does not survive), and a worker that outlives the timeout is killed.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test/support/exec_workers.h"

namespace tally::functional {
namespace {

// Set by the test process only: a worker that sees it set was forked, not exec'd.
int parent_marker = 0;

// Worker "echo": writes "<rank> <text> <marker>" to <dir>/<rank> and exits 10 + rank.
int echoWorker(int rank, const WorkerParams& params) {
  std::ofstream out(params.get("dir") + "/" + std::to_string(rank));
  out << rank << " " << params.get("text") << " " << parent_marker << "\n";
  return out ? 10 + rank : 1;
}
const bool kEchoWorker = registerWorker("echo", echoWorker);

// Worker "thread": starts and joins a thread (the step that kills a forked child of a
// multi-threaded parent under ThreadSanitizer) and exits 0.
int threadWorker(int, const WorkerParams&) {
  std::atomic<int> ran{0};
  std::thread([&] { ran = 1; }).join();
  return ran == 1 ? 0 : 1;
}
const bool kThreadWorker = registerWorker("thread", threadWorker);

// Worker "sleep": sleeps params "ms" and exits 0.
int sleepWorker(int, const WorkerParams& params) {
  std::this_thread::sleep_for(std::chrono::milliseconds(params.getInt("ms")));
  return 0;
}
const bool kSleepWorker = registerWorker("sleep", sleepWorker);

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ExecWorkers, EachRankRunsTheBodyInAFreshProgramWithItsParams) {
  std::unique_ptr<driver::TempDir> dir;
  ASSERT_TRUE(driver::TempDir::create("exec-workers", &dir).isOk());
  parent_marker = 1;
  WorkerParams params;
  params.set("dir", dir->path()).set("text", "a=b, c d");
  std::vector<driver::WorkerExit> exits;
  Status s = runExecWorkers("echo", 3, params, 30000, &exits);
  parent_marker = 0;
  ASSERT_TRUE(s.isOk()) << s.toString();
  ASSERT_EQ(exits.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(exits[r].rank, r);
    EXPECT_EQ(exits[r].exit_code, 10 + r) << exits[r].describe();
    EXPECT_EQ(readFile(dir->path() + "/" + std::to_string(r)), std::to_string(r) + " a=b, c d 0\n");
  }
}

TEST(ExecWorkers, StartWhileTheTestHasAThreadRunning) {
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  const std::string why = runAllExec("thread", 3, WorkerParams(), 60000);
  stop = true;
  busy.join();
  EXPECT_EQ(why, "");
}

TEST(ExecWorkers, AWorkerPastTheTimeoutIsKilled) {
  std::vector<driver::WorkerExit> exits;
  const auto start = std::chrono::steady_clock::now();
  Status s = runExecWorkers("sleep", 2, WorkerParams().set("ms", 60000), 1000, &exits);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(s.isOk()) << s.toString();
  for (const driver::WorkerExit& e : exits) {
    EXPECT_TRUE(e.timed_out) << e.describe();
    EXPECT_EQ(e.signal, SIGKILL) << e.describe();
  }
  EXPECT_LT(took, std::chrono::seconds(30));
}

TEST(ExecWorkers, AnUnknownWorkerExits64) {
  std::vector<driver::WorkerExit> exits;
  ASSERT_TRUE(runExecWorkers("no-such-worker", 1, WorkerParams(), 30000, &exits).isOk());
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 64) << exits[0].describe();
}

TEST(ExecWorkers, ParamsSurviveTheCommandLine) {
  WorkerParams params;
  params.set("list", "127.0.0.1:1,127.0.0.1:2").set("n", -42).set("eq", "x=y=z").set("empty", "");
  WorkerParams back;
  std::string bad;
  ASSERT_TRUE(WorkerParams::fromArgs(params.toArgs(), &back, &bad)) << bad;
  EXPECT_EQ(back.get("list"), "127.0.0.1:1,127.0.0.1:2");
  EXPECT_EQ(back.getInt("n"), -42);
  EXPECT_EQ(back.get("eq"), "x=y=z");
  EXPECT_EQ(back.get("empty"), "");
  EXPECT_EQ(back.getInt("list", 7), 7);
  EXPECT_EQ(back.getInt("missing", -1), -1);
  EXPECT_FALSE(WorkerParams::fromArgs({"novalue"}, &back, &bad));
  EXPECT_EQ(bad, "novalue");
}

}  // namespace
}  // namespace tally::functional
