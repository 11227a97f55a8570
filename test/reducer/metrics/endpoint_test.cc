// SPDX-License-Identifier: Apache-2.0
// tally-reducer --metrics as a process: its two lines, an all-reduce against it, the scraped
// metrics, SIGTERM; bad and unbindable metrics addresses.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "test/support/harness.h"
#include "test/support/reducer_child.h"
#include "test/support/scrape.h"

namespace tally::metrics::test {
namespace {

using Clock = std::chrono::steady_clock;

// tally-reducer with `args`, its stdout a pipe (test/support/reducer_child.h's start).
driver::SpawnedReducer spawn(const std::vector<std::string>& args) {
  driver::ReducerSpawn how;
  how.args = args;
  driver::SpawnedReducer child;
  if (!driver::spawnReducer(TALLY_REDUCER_BIN, how, &child).isOk()) return {};
  return child;
}

// One line (without its newline) within timeout_ms; false at EOF or on timeout.
bool readLine(int fd, std::string* line, int timeout_ms = 10000) {
  line->clear();
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char ch;
    if (read(fd, &ch, 1) != 1) return false;
    if (ch == '\n') return true;
    line->push_back(ch);
  }
}

int reap(pid_t pid) { return reducer::test::reapReducer(pid); }

// Scrapes until `done` holds for the text or 10 s pass; returns the last text.
std::string scrapeUntil(int port, const std::function<bool(const std::string&)>& done) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  std::string text;
  for (;;) {
    Status st = httpGet(port, "/metrics", &text);
    EXPECT_TRUE(st.isOk()) << st.toString();
    if (!st.isOk() || done(text) || Clock::now() > deadline) return text;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST(MetricsEndpointTest, ScrapesExactCountsOfARealRun) {
  driver::SpawnedReducer c =
      spawn({"--listen", "127.0.0.1:0", "--threads", "2", "--metrics", "127.0.0.1:0"});
  ASSERT_GT(c.pid, 0);
  std::string listening, metrics_line;
  ASSERT_TRUE(readLine(c.stdout_fd, &listening));
  ASSERT_TRUE(readLine(c.stdout_fd, &metrics_line));
  const std::string kListening = "tally-reducer listening on 127.0.0.1:";
  const std::string kMetrics = "tally-reducer metrics on http://127.0.0.1:";
  ASSERT_EQ(listening.rfind(kListening, 0), 0u) << listening;
  ASSERT_EQ(metrics_line.rfind(kMetrics, 0), 0u) << metrics_line;
  ASSERT_EQ(metrics_line.substr(metrics_line.size() - 8), "/metrics") << metrics_line;
  const int port = std::stoi(metrics_line.substr(kMetrics.size()));
  ASSERT_GT(port, 0);
  const std::string reducer = listening.substr(std::string("tally-reducer listening on ").size());

  // 2 ranks, 3 calls of 100000 float32 with 64 KiB slices at most over one reducer:
  // protocol/slicing.h cuts each call into 8 slices of 12500 elements.
  constexpr int kRanks = 2;
  constexpr int kCalls = 3;
  constexpr size_t kCount = 100000;
  worker_client::CollOptions o;
  o.reducers = {reducer};
  o.slice_bytes = 64 * 1024;
  o.timeouts.connect_ms = 10000;
  o.timeouts.io_ms = 10000;
  std::vector<std::unique_ptr<worker_client::CollClient>> clients;
  auto st = reducer::test::connectAll(std::vector<worker_client::CollOptions>(kRanks, o), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> v(kCount);
      for (int k = 0; k < kCalls; ++k) {
        std::fill(v.begin(), v.end(), static_cast<float>(r + 1));
        worker_client::CollRequest req;
        Status s = reducer::test::post(clients[r].get(), v.data(), v.data(), kCount,
                                       DataType::kFloat32, ReduceOp::kSum, &req);
        if (s.isOk()) s = reducer::test::waitRequest(&req, nullptr);
        if (s.isOk() && v[kCount / 2] != 3.0f) s = Status::internal("wrong sum");
        if (!s.isOk()) {
          errors[r] = s.toString();
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;

  // The reducer counts a slice before its result goes out, so the totals are exact now.
  std::string text;
  ASSERT_TRUE(httpGet(port, "/metrics", &text).isOk());
  const double want_bytes = double{kCalls} * kCount * sizeof(float) * kRanks;  // 2400000
  EXPECT_EQ(seriesValue(text, "tally_reducer_bytes_reduced_total"), want_bytes) << text;
  EXPECT_EQ(seriesValue(text, "tally_reducer_slices_total"), kCalls * 8.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_slice_latency_seconds_count"), kCalls * 8.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_slice_latency_seconds_bucket{le=\"+Inf\"}"),
            kCalls * 8.0);
  EXPECT_GT(seriesValue(text, "tally_reducer_slice_latency_seconds_sum").value_or(0), 0.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_connections"), double{kRanks});
  EXPECT_EQ(seriesValue(text, "tally_reducer_communicators"), 1.0);
  EXPECT_GT(seriesValue(text, "tally_reducer_reserved_bytes").value_or(0), 0.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_errors_total{cause=\"peer_lost\"}"), 0.0);

  for (auto& cl : clients) cl->close();
  text = scrapeUntil(port, [](const std::string& t) {
    return seriesValue(t, "tally_reducer_connections") == 0.0 &&
           seriesValue(t, "tally_reducer_communicators") == 0.0 &&
           seriesValue(t, "tally_reducer_reserved_bytes") == 0.0;
  });
  EXPECT_EQ(seriesValue(text, "tally_reducer_connections"), 0.0) << text;
  EXPECT_EQ(seriesValue(text, "tally_reducer_communicators"), 0.0) << text;
  EXPECT_EQ(seriesValue(text, "tally_reducer_reserved_bytes"), 0.0) << text;
  EXPECT_EQ(seriesValue(text, "tally_reducer_errors_total{cause=\"peer_lost\"}"), 0.0)
      << "close() says Bye";

  kill(c.pid, SIGTERM);
  EXPECT_EQ(reap(c.pid), 0);
  close(c.stdout_fd);
}

TEST(MetricsEndpointTest, MalformedAddressExitsTwo) {
  for (const char* bad : {"127.0.0.1", "localhost:9100", "127.0.0.1:65536", "[::1]:0", ":0"}) {
    driver::SpawnedReducer c = spawn({"--listen", "127.0.0.1:0", "--metrics", bad});
    ASSERT_GT(c.pid, 0);
    EXPECT_EQ(reap(c.pid), 2) << bad;
    std::string line;
    EXPECT_FALSE(readLine(c.stdout_fd, &line, 1000)) << "printed '" << line << "' for " << bad;
    close(c.stdout_fd);
  }
}

TEST(MetricsEndpointTest, UnbindableAddressExitsOne) {
  // A port this test holds open.
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string taken = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  driver::SpawnedReducer c = spawn({"--listen", "127.0.0.1:0", "--metrics", taken});
  ASSERT_GT(c.pid, 0);
  EXPECT_EQ(reap(c.pid), 1);
  std::string line;
  EXPECT_FALSE(readLine(c.stdout_fd, &line, 1000)) << "printed '" << line << "'";
  close(c.stdout_fd);
  close(fd);
}

}  // namespace
}  // namespace tally::metrics::test
