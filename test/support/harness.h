// SPDX-License-Identifier: Apache-2.0
// Test harness: an in-process ReducerServer pool and N CollClient ranks in threads.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "protocol/opening.h"
#include "protocol/wire.h"
#include "reducer/server.h"
#include "worker_client/coll_client.h"

namespace tally::reducer::test {
// The protocol and the worker-side client, as the tests drive both ends.
namespace wire = protocol::wire;
namespace opening = protocol::opening;
using namespace ::tally::protocol;
using namespace ::tally::worker_client;

inline std::vector<std::unique_ptr<ReducerServer>> startServers(int n, int threads = 2,
                                                                int window = 16) {
  std::vector<std::unique_ptr<ReducerServer>> servers;
  for (int i = 0; i < n; ++i) {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.threads = threads;
    o.window = window;
    std::unique_ptr<ReducerServer> s;
    Status st = ReducerServer::start(o, &s);
    EXPECT_TRUE(st.isOk()) << st.toString();
    if (s) servers.push_back(std::move(s));
  }
  return servers;
}

inline CollOptions optionsFor(const std::vector<std::unique_ptr<ReducerServer>>& servers,
                              uint64_t slice_bytes = 64 * 1024) {
  CollOptions o;
  for (auto& s : servers) o.reducers.push_back(s->address());
  o.slice_bytes = slice_bytes;
  o.window = 8;
  o.max_requests = 64;
  o.timeouts.connect_ms = 10000;
  o.timeouts.io_ms = 10000;
  // In-process reducers share the test's cores: under a sanitizer on a loaded machine one can
  // stall for a second and more while the others are idle, which the slowness check rightly
  // calls slow. Off but where a test is about it (slow_reducer_test.cc).
  o.slow_reducer_factor = 0;
  return o;
}

// Connects nranks clients in threads; per-rank options may differ (for mismatch tests).
inline std::vector<Status> connectAll(const std::vector<CollOptions>& opts,
                                      std::vector<std::unique_ptr<CollClient>>* clients) {
  const int n = static_cast<int>(opts.size());
  std::vector<std::vector<uint8_t>> handles(n, std::vector<uint8_t>(kCollHandleBytes));
  for (int r = 0; r < n; ++r) {
    Status st = CollClient::makeHandle(opts[r], handles[r].data());
    EXPECT_TRUE(st.isOk()) << st.toString();
  }
  std::vector<const void*> ptrs;
  for (auto& h : handles) ptrs.push_back(h.data());
  std::vector<Status> statuses(n);
  clients->clear();
  clients->resize(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      statuses[r] = CollClient::connect(opts[r], ptrs.data(), n, r, &(*clients)[r]);
    });
  }
  for (auto& t : threads) t.join();
  return statuses;
}

// Polls a request until done, an error, or the deadline.
inline Status waitRequest(CollRequest* req, size_t* bytes, int64_t timeout_ms = 20000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    bool done = false;
    Status st = req->test(&done, bytes);
    if (!st.isOk() || done) return st;
    if (std::chrono::steady_clock::now() > deadline) return Status::timeout("test: request hung");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Posts, retrying while the client reports no room.
inline Status post(CollClient* c, const void* send, void* recv, size_t count, DataType type,
                   ReduceOp op, CollRequest* req) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    TALLY_RETURN_IF_ERROR(c->iallreduce(send, recv, count, type, op, req));
    if (req->posted()) return Status::ok();
    if (std::chrono::steady_clock::now() > deadline) return Status::timeout("test: no room");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Runs fn(rank) on every rank at once; returns the first failure, "" when all passed.
inline std::string onEveryRank(int n, const std::function<Status(int)>& fn) {
  std::vector<Status> st(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { st[r] = fn(r); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    if (!st[r].isOk()) return "rank " + std::to_string(r) + ": " + st[r].toString();
  }
  return "";
}

// A test name for each progress mode of a parameterized test: thread, poll, legacy.
inline const char* progressLabel(CollProgress p) {
  switch (p) {
    case CollProgress::kThread:
      return "thread";
    case CollProgress::kPoll:
      return "poll";
    case CollProgress::kLegacy:
      break;
  }
  return "legacy";
}

inline std::string progressName(const ::testing::TestParamInfo<CollProgress>& p) {
  return progressLabel(p.param);
}

}  // namespace tally::reducer::test
