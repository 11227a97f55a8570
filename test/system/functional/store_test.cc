// SPDX-License-Identifier: Apache-2.0
// The rendezvous Store (common/store.h) and the process helpers the other functional tests stand
// on: in-memory and file stores, across threads and forked processes, with bounded waits.
#include "common/store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/params.h"
#include "test/support/cluster.h"
#include "tools/driver/process.h"

namespace tally {
namespace {

using Clock = std::chrono::steady_clock;

void basicContract(Store* store) {
  ASSERT_TRUE(store->set("a", "one").isOk());
  std::string v;
  ASSERT_TRUE(store->get("a", &v, 0).isOk());
  EXPECT_EQ(v, "one");
  ASSERT_TRUE(store->set("a", std::string("t\0wo", 4)).isOk());  // overwrite, binary value
  ASSERT_TRUE(store->get("a", &v, 0).isOk());
  EXPECT_EQ(v, std::string("t\0wo", 4));
  ASSERT_TRUE(store->set("empty", "").isOk());
  ASSERT_TRUE(store->get("empty", &v, 0).isOk());
  EXPECT_EQ(v, "");
  // Keys with characters a file name cannot hold.
  ASSERT_TRUE(store->set("job/handle/0 x:1", "h").isOk());
  EXPECT_TRUE(store->check("job/handle/0 x:1"));
  EXPECT_FALSE(store->check("job/handle/1"));
  EXPECT_FALSE(store->set("", "x").isOk());

  v = "untouched";
  auto t0 = Clock::now();
  Status s = store->get("missing", &v, 50);
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.toString();
  EXPECT_NE(s.message().find("missing"), std::string::npos);
  EXPECT_EQ(v, "untouched");
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(45));
  s = store->wait({"a", "nope"}, 20);
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_NE(s.message().find("nope"), std::string::npos);
  EXPECT_TRUE(store->wait({"a", "empty"}, 0).isOk());
}

void waitersWake(Store* store) {
  std::thread writer([store] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    for (int i = 0; i < 10; ++i) (void)store->set("k" + std::to_string(i), std::to_string(i));
  });
  std::vector<std::string> keys;
  for (int i = 0; i < 10; ++i) keys.push_back("k" + std::to_string(i));
  EXPECT_TRUE(store->wait(keys, 5000).isOk());
  std::string v;
  EXPECT_TRUE(store->get("k9", &v, 5000).isOk());
  EXPECT_EQ(v, "9");
  writer.join();
}

TEST(Store, MemoryContract) {
  auto store = createMemoryStore();
  basicContract(store.get());
}

TEST(Store, MemoryWaitersWake) {
  auto store = createMemoryStore();
  waitersWake(store.get());
}

TEST(Store, FileContract) {
  std::unique_ptr<driver::TempDir> dir;
  ASSERT_TRUE(driver::TempDir::create("store", &dir).isOk());
  std::unique_ptr<Store> store;
  ASSERT_TRUE(createFileStore(dir->path(), &store).isOk());
  basicContract(store.get());
}

TEST(Store, FileWaitersWake) {
  std::unique_ptr<driver::TempDir> dir;
  ASSERT_TRUE(driver::TempDir::create("store", &dir).isOk());
  std::unique_ptr<Store> store;
  ASSERT_TRUE(createFileStore(dir->path(), &store).isOk());
  waitersWake(store.get());
}

TEST(Store, FileRejectsMissingDirectory) {
  std::unique_ptr<Store> store;
  EXPECT_FALSE(createFileStore("/nonexistent/tally-store", &store).isOk());
  EXPECT_EQ(store, nullptr);
}

TEST(Store, PrefixKeepsNamespacesApart) {
  auto base = createMemoryStore();
  auto a = createPrefixStore(base.get(), "a");
  auto b = createPrefixStore(base.get(), "b");
  ASSERT_TRUE(a->set("x", "1").isOk());
  ASSERT_TRUE(b->set("x", "2").isOk());
  std::string v;
  ASSERT_TRUE(base->get("a/x", &v, 0).isOk());
  EXPECT_EQ(v, "1");
  ASSERT_TRUE(b->get("x", &v, 0).isOk());
  EXPECT_EQ(v, "2");
  EXPECT_TRUE(a->wait({"x"}, 0).isOk());
  EXPECT_FALSE(a->check("y"));
}

// Forked processes exchange large values and meet at barriers through one directory; readers
// never see a partial value.
TEST(Store, FileAcrossProcesses) {
  std::unique_ptr<driver::TempDir> dir;
  ASSERT_TRUE(driver::TempDir::create("store", &dir).isOk());
  std::unique_ptr<Store> store;
  ASSERT_TRUE(createFileStore(dir->path(), &store).isOk());
  constexpr int kProcs = 4;
  std::string why = functional::runAll(
      kProcs,
      [&](int rank) {
        std::string big(200000 + rank, static_cast<char>('a' + rank));
        for (int round = 0; round < 5; ++round) {
          if (!store->set("big/" + std::to_string(rank), big).isOk()) return 1;
          if (!storeBarrier(store.get(), "round" + std::to_string(round), rank, kProcs, 10000)
                   .isOk())
            return 2;
          for (int peer = 0; peer < kProcs; ++peer) {
            std::string v;
            if (!store->get("big/" + std::to_string(peer), &v, 10000).isOk()) return 3;
            if (v != std::string(200000 + peer, static_cast<char>('a' + peer))) return 4;
          }
        }
        return 0;
      },
      30000);
  EXPECT_EQ(why, "");
}

TEST(Process, WorkersReportExitCodesSignalsAndTimeouts) {
  std::vector<driver::WorkerExit> exits;
  ASSERT_TRUE(driver::runWorkers(
                  4,
                  [](int rank) -> int {
                    if (rank == 1) return 3;
                    if (rank == 2) ::raise(SIGTERM);
                    if (rank == 3) ::sleep(30);
                    return 0;
                  },
                  1000, &exits)
                  .isOk());
  ASSERT_EQ(exits.size(), 4u);
  EXPECT_TRUE(exits[0].ok());
  EXPECT_EQ(exits[1].exit_code, 3);
  EXPECT_EQ(exits[2].signal, SIGTERM);
  EXPECT_TRUE(exits[3].timed_out);
  std::string why;
  EXPECT_FALSE(driver::allWorkersOk(exits, &why));
  EXPECT_NE(why.find("rank 3"), std::string::npos);
}

TEST(Process, ReducerStartsOnAnEphemeralPortAndStops) {
  if (functional::reducerPath().empty()) GTEST_SKIP() << "tally-reducer was not built";
  std::unique_ptr<driver::ReducerProcess> r;
  Status s = driver::ReducerProcess::start(functional::reducerPath(), {}, 20000, &r);
  ASSERT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(r->address().rfind("127.0.0.1:", 0), 0u) << r->address();
  EXPECT_NE(r->address(), "127.0.0.1:0");
  s = r->stop();
  EXPECT_TRUE(s.isOk()) << s.toString();
}

TEST(Process, MissingReducerBinaryFailsFast) {
  std::unique_ptr<driver::ReducerProcess> r;
  auto t0 = Clock::now();
  Status s = driver::ReducerProcess::start("/nonexistent/tally-reducer", {}, 20000, &r);
  EXPECT_FALSE(s.isOk());
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
}

// docs/env.md is exactly what `tally env --markdown` prints.
TEST(EnvDoc, MatchesTheRegistry) {
  std::ifstream in(std::string(TALLY_SOURCE_DIR) + "/docs/env.md");
  ASSERT_TRUE(in.good()) << "docs/env.md is missing; run `tally env --markdown > docs/env.md`";
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), paramsMarkdown())
      << "docs/env.md is stale; regenerate it with `tally env --markdown > docs/env.md`";
}

}  // namespace
}  // namespace tally
