// SPDX-License-Identifier: Apache-2.0
// The worker's three ways of driving reducer links (TALLY_COLL_PROGRESS): raw sockets with one
// epoll progress thread per client ("thread", the default on TCP), the same sockets progressed
// by the threads that test requests ("poll"), and the threaded links ("legacy"); the raw sockets
// also with every write sent by MSG_ZEROCOPY (TALLY_ZEROCOPY=always, no smallest size), where a
// call completes only once the kernel has let go of its input. All must compute the same
// results; all must carry on over the other reducer when one dies (and fail, naming it, when it
// was the last), and abort() with calls in flight must return promptly and leave buffers alone.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/fd.h"
#include "protocol/slicing.h"
#include "test/support/harness.h"

namespace tally::reducer::test {
namespace {

using Clock = std::chrono::steady_clock;

Status waitPosted(const std::function<Status(CollRequest*)>& postFn, CollRequest* req) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  for (;;) {
    TALLY_RETURN_IF_ERROR(postFn(req));
    if (req->posted()) return Status::ok();
    if (Clock::now() > deadline) return Status::timeout("test: no room");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

struct Mode {
  CollProgress progress;
  bool zerocopy;
};

std::string modeName(const ::testing::TestParamInfo<Mode>& p) {
  return std::string(progressLabel(p.param.progress)) + (p.param.zerocopy ? "_zerocopy" : "");
}

class ProgressTest : public ::testing::TestWithParam<Mode> {
 protected:
  static void apply(CollOptions* o) {
    o->progress = GetParam().progress;
    if (GetParam().zerocopy) {
      o->zerocopy = transport::ZerocopyMode::kAlways;
      o->zerocopy_min_bytes = 0;
    }
  }
  CollOptions options(const std::vector<std::unique_ptr<ReducerServer>>& servers,
                      uint64_t slice_bytes = 32 * 1024) {
    CollOptions o = optionsFor(servers, slice_bytes);
    apply(&o);
    return o;
  }
  // With zero-copy asked for, the kernel must have taken writes that way (where it offers
  // MSG_ZEROCOPY at all; on loopback every completion then says it copied).
  static void expectZerocopyUsed(const CollClient& client) {
    if (!GetParam().zerocopy || !kernelHasZerocopy()) return;
    EXPECT_GT(client.zerocopyCounts().sends, 0u) << "rank " << client.rank();
  }
  static bool kernelHasZerocopy() {
    Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int one = 1;
    return ::setsockopt(s.get(), SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) == 0;
  }
};

// Small integers: float sums are exact in any order.
float valueOf(int rank, uint64_t i) { return static_cast<float>((i * 7 + rank * 13) % 97); }

TEST_P(ProgressTest, AllReduceOddSizesManyInFlight) {
  auto servers = startServers(2);
  const int n = 3;
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll(std::vector<CollOptions>(n, options(servers)), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  const std::vector<size_t> counts = {1, 7, 8191, 100003, 1, 65537, 3, (1 << 20) + 5, 0, 33333};
  constexpr int kRounds = 4;  // every size posted kRounds times before any wait: 40 in flight
  std::string err = onEveryRank(n, [&](int r) -> Status {
    std::vector<std::vector<float>> bufs;
    for (int round = 0; round < kRounds; ++round) {
      for (size_t c : counts) {
        std::vector<float> v(c);
        for (size_t i = 0; i < c; ++i) v[i] = valueOf(r, i + round);
        bufs.push_back(std::move(v));
      }
    }
    std::vector<CollRequest> reqs(bufs.size());
    for (size_t k = 0; k < bufs.size(); ++k) {
      float* p = bufs[k].data();
      const size_t c = bufs[k].size();
      TALLY_RETURN_IF_ERROR(waitPosted(
          [&](CollRequest* q) {
            return clients[r]->iallreduce(p, p, c, DataType::kFloat32, ReduceOp::kSum, q);
          },
          &reqs[k]));
    }
    for (size_t k = 0; k < bufs.size(); ++k) {
      size_t bytes = 0;
      TALLY_RETURN_IF_ERROR(waitRequest(&reqs[k], &bytes));
      if (bytes != bufs[k].size() * sizeof(float)) return Status::internal("wrong byte count");
      const int round = static_cast<int>(k / counts.size());
      for (size_t i = 0; i < bufs[k].size(); ++i) {
        float want = 0;
        for (int q = 0; q < n; ++q) want += valueOf(q, i + round);
        if (bufs[k][i] != want) {
          return Status::internal("call " + std::to_string(k) + " element " + std::to_string(i) +
                                  ": " + std::to_string(bufs[k][i]) +
                                  " != " + std::to_string(want));
        }
      }
    }
    return Status::ok();
  });
  EXPECT_EQ(err, "");
  for (auto& c : clients) expectZerocopyUsed(*c);
  for (auto& c : clients) c->close();
}

// A window that starts inside rank 0's part and ends inside rank 2's, so some slices carry
// empty pieces; odd sizes throughout.
void gatherScatter(CollOptions o) {
  auto servers = startServers(2);
  o.reducers.clear();
  for (auto& s : servers) o.reducers.push_back(s->address());
  const int n = 3;
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll(std::vector<CollOptions>(n, o), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  const uint64_t rank_count = 50001;
  CollWindow w;
  w.rank_count = rank_count;
  w.offset = rank_count / 2 + 1;
  w.count = 2 * rank_count - 7;
  auto owned = [&](int r, uint64_t i) {  // rank r's byte i of its part
    return static_cast<uint8_t>((i * 31 + r * 101 + 5) & 0xff);
  };
  auto contrib = [&](int r, uint64_t k) {  // rank r's int32 at window element k
    return static_cast<int32_t>((k * 3 + r * 1000003) % 65521) - 30000;
  };
  std::string err = onEveryRank(n, [&](int r) -> Status {
    const Span part = rankPart(r, w.rank_count, w.offset, w.count);
    // All-gather (bytes).
    std::vector<uint8_t> ag_in(part.count), ag_out(w.count, 0xee);
    for (uint64_t j = 0; j < part.count; ++j) {
      ag_in[j] = owned(r, w.offset + part.offset + j - r * rank_count);
    }
    CollRequest ag;
    TALLY_RETURN_IF_ERROR(clients[r]->iallgather(ag_in.data(), ag_out.data(), w, &ag));
    // Reduce-scatter (int32 sum), in flight together with the all-gather.
    std::vector<int32_t> rs_in(w.count), rs_out(part.count, 0x7eeeeeee);
    for (uint64_t k = 0; k < w.count; ++k) rs_in[k] = contrib(r, k);
    CollRequest rs;
    TALLY_RETURN_IF_ERROR(clients[r]->ireducescatter(rs_in.data(), rs_out.data(), w,
                                                     DataType::kInt32, ReduceOp::kSum, &rs));
    if (!ag.posted() || !rs.posted()) return Status::internal("not posted");
    TALLY_RETURN_IF_ERROR(waitRequest(&ag, nullptr));
    TALLY_RETURN_IF_ERROR(waitRequest(&rs, nullptr));
    for (uint64_t k = 0; k < w.count; ++k) {
      const uint64_t g = w.offset + k;
      const int owner = static_cast<int>(g / rank_count);
      if (ag_out[k] != owned(owner, g - owner * rank_count)) {
        return Status::internal("all-gather byte " + std::to_string(k));
      }
    }
    for (uint64_t j = 0; j < part.count; ++j) {
      int32_t want = 0;
      for (int q = 0; q < n; ++q) want += contrib(q, part.offset + j);
      if (rs_out[j] != want) return Status::internal("reduce-scatter element " + std::to_string(j));
    }
    return Status::ok();
  });
  EXPECT_EQ(err, "");
  for (auto& c : clients) c->close();
}

TEST_P(ProgressTest, AllGatherAndReduceScatterOddWindow) {
  CollOptions o = optionsFor({}, 8192);
  apply(&o);
  gatherScatter(o);
}

TEST_P(ProgressTest, ChecksumOn) {
  CollOptions o = optionsFor({}, 8192);
  apply(&o);
  o.checksum = true;
  gatherScatter(o);
}

// A reducer that goes away mid-call fails the call with the reducer's name, well before the
// client's timeout.
// A reducer that dies while a call is in flight costs nothing but a moment: its slices are summed
// again on the other (docs/failover.md), also for the rank that posts after the loss, and the
// results are exact.
TEST_P(ProgressTest, ReducerThatDiesMidCallIsReplacedByTheOther) {
  auto servers = startServers(2);
  CollOptions o = options(servers);
  o.timeouts.io_ms = 20000;
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll(std::vector<CollOptions>(2, o), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  // Rank 0 calls alone: the reducers hold its slices, waiting for rank 1.
  const size_t count = (1 << 20) + 3;
  std::vector<std::vector<float>> v(2, std::vector<float>(count));
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < count; ++i) v[r][i] = valueOf(r, i);
  }
  std::vector<CollRequest> req(2);
  ASSERT_TRUE(post(clients[0].get(), v[0].data(), v[0].data(), count, DataType::kFloat32,
                   ReduceOp::kSum, &req[0])
                  .isOk());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = Clock::now();
  servers[1]->stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(post(clients[1].get(), v[1].data(), v[1].data(), count, DataType::kFloat32,
                   ReduceOp::kSum, &req[1])
                  .isOk());
  // Both at once, as each rank's NCCL proxy tests its own (in poll mode that drives progress).
  std::vector<Status> done(2);
  std::vector<std::thread> waiters;
  for (int r = 0; r < 2; ++r) {
    waiters.emplace_back([&, r] { done[r] = waitRequest(&req[r], nullptr, 15000); });
  }
  for (auto& t : waiters) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(done[r].isOk()) << "rank " << r << ": " << done[r].toString();
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(v[r][i], valueOf(0, i) + valueOf(1, i)) << "rank " << r << " element " << i;
    }
  }
  for (auto& c : clients) c->close();
}

// Two ranks over `n` reducers: rank 0 posts a 4 MiB all-reduce, and a moment later every
// reducer stops at once. What the call then reports, how long after the stop, and the
// reducers' addresses.
struct EveryReducerLost {
  Status status;
  Clock::duration took{};
  std::vector<std::string> addresses;
};

EveryReducerLost loseEveryReducer(int n, CollOptions o) {
  EveryReducerLost out;
  auto servers = startServers(n);
  for (auto& s : servers) o.reducers.push_back(s->address());
  o.timeouts.io_ms = 20000;
  std::vector<std::unique_ptr<CollClient>> clients;
  for (auto& st : connectAll(std::vector<CollOptions>(2, o), &clients)) {
    if (!st.isOk()) {
      out.status = Status::internal("test: connect: " + st.toString());
      return out;
    }
  }
  std::vector<float> v(1 << 20, 1.0f);
  CollRequest req;
  Status posted = post(clients[0].get(), v.data(), v.data(), v.size(), DataType::kFloat32,
                       ReduceOp::kSum, &req);
  if (posted.isOk()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto start = Clock::now();
    std::vector<std::thread> stops;
    for (auto& s : servers) {
      out.addresses.push_back(s->address());
      stops.emplace_back([&s] { s->stop(); });
    }
    for (auto& t : stops) t.join();
    out.status = waitRequest(&req, nullptr, 15000);
    out.took = Clock::now() - start;
  } else {
    out.status = Status::internal("test: post: " + posted.toString());
  }
  for (auto& c : clients) c->abort(Status::internal("test over"));
  return out;
}

// The last reducer's loss fails the call with an error that names it, within a round trip.
TEST_P(ProgressTest, LosingTheLastReducerFailsTheCallNamingIt) {
  const EveryReducerLost lost = loseEveryReducer(1, options({}));
  const Status& s = lost.status;
  EXPECT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), StatusCode::kRemote) << s.toString();
  ASSERT_EQ(lost.addresses.size(), 1u) << s.toString();
  EXPECT_NE(s.message().find(lost.addresses[0]), std::string::npos) << s.toString();
  EXPECT_NE(s.message().find("no reducer is left"), std::string::npos) << s.toString();
  EXPECT_LT(lost.took, std::chrono::seconds(5));
}

// Every reducer lost at once: the error names each one, not only the last one dropped.
TEST_P(ProgressTest, LosingEveryReducerAtOnceNamesEachOne) {
  const EveryReducerLost lost = loseEveryReducer(2, options({}));
  const Status& s = lost.status;
  ASSERT_FALSE(s.isOk());
  ASSERT_EQ(lost.addresses.size(), 2u) << s.toString();
  EXPECT_NE(s.message().find("no reducer is left"), std::string::npos) << s.toString();
  for (const std::string& a : lost.addresses) {
    EXPECT_NE(s.message().find(a + " ("), std::string::npos) << s.toString();
  }
}

// abort() with calls in flight returns promptly, every request reports the error, and once it
// returned nothing writes into the receive buffers any more.
TEST_P(ProgressTest, AbortWithCallsInFlightReturnsPromptlyAndLeavesBuffersAlone) {
  auto servers = startServers(2);
  CollOptions o = options(servers);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll(std::vector<CollOptions>(2, o), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  constexpr int kCalls = 8;
  constexpr size_t kCount = 1 << 19;
  std::vector<std::vector<std::vector<float>>> bufs(2);
  std::vector<std::vector<CollRequest>> reqs(2, std::vector<CollRequest>(kCalls));
  // Rank 1 joins only the first half: rank 0's later calls can never complete.
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < (r == 0 ? kCalls : kCalls / 2); ++k) {
      bufs[r].emplace_back(kCount, 1.0f);
      ASSERT_TRUE(post(clients[r].get(), bufs[r][k].data(), bufs[r][k].data(), kCount,
                       DataType::kFloat32, ReduceOp::kSum, &reqs[r][k])
                      .isOk());
    }
  }
  // Results are streaming in on rank 0 when it gives up.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto start = Clock::now();
  clients[0]->abort(Status::internal("test gives up"));
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(500));
  for (auto& b : bufs[0]) std::fill(b.begin(), b.end(), -5.0f);
  int failed = 0;
  for (auto& q : reqs[0]) {
    bool done = false;
    Status s = q.test(&done, nullptr);
    if (!s.isOk()) {
      ++failed;
      EXPECT_NE(s.message().find("test gives up"), std::string::npos) << s.toString();
    }
  }
  EXPECT_GE(failed, kCalls / 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (auto& b : bufs[0]) {
    for (float x : b) ASSERT_EQ(x, -5.0f) << "a buffer was written after abort() returned";
  }
  clients[1]->abort(Status::internal("test over"));
}

INSTANTIATE_TEST_SUITE_P(Modes, ProgressTest,
                         ::testing::Values(Mode{CollProgress::kThread, false},
                                           Mode{CollProgress::kPoll, false},
                                           Mode{CollProgress::kLegacy, false},
                                           Mode{CollProgress::kThread, true},
                                           Mode{CollProgress::kPoll, true}),
                         modeName);

}  // namespace
}  // namespace tally::reducer::test
