// SPDX-License-Identifier: Apache-2.0
// All-gather and reduce-scatter end to end: in-process reducers, ranks in threads calling
// CollClient directly, results against the driver's independent reference (tools/driver/
// reference.h). Windows are cut the way NCCL's CollNetDirect cuts them: they march over the
// global vector of nranks parts, span part boundaries and often miss the caller's own part.
#include <algorithm>
#include <cstring>
#include <deque>
#include <tuple>

#include "test/support/harness.h"
#include "tools/driver/reference.h"

namespace tally::reducer::test {
namespace {

// One window of a collective over the global vector, in elements.
struct Window {
  uint64_t offset;
  uint64_t count;
};

// Windows of `width` elements over a vector of total elements.
std::vector<Window> windowsOver(uint64_t total, uint64_t width) {
  std::vector<Window> out;
  for (uint64_t lo = 0; lo < total; lo += width) out.push_back({lo, std::min(width, total - lo)});
  return out;
}

// Posts `post(i, &req)` for every window i with up to `depth` in flight, calling done(i) as each
// completes (oldest first). Retries while the client has no room.
Status pipeline(size_t n, int depth, const std::function<Status(size_t, CollRequest*)>& post,
                const std::function<Status(size_t, size_t)>& done) {
  std::deque<std::pair<size_t, CollRequest>> inflight;
  size_t next = 0;
  while (next < n || !inflight.empty()) {
    while (next < n && static_cast<int>(inflight.size()) < depth) {
      CollRequest req;
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      for (;;) {
        TALLY_RETURN_IF_ERROR(post(next, &req));
        if (req.posted()) break;
        if (std::chrono::steady_clock::now() > deadline) return Status::timeout("no room");
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      inflight.emplace_back(next++, req);
    }
    size_t bytes = 0;
    TALLY_RETURN_IF_ERROR(waitRequest(&inflight.front().second, &bytes));
    TALLY_RETURN_IF_ERROR(done(inflight.front().first, bytes));
    inflight.pop_front();
  }
  return Status::ok();
}

// Rank r's part of a reduce-scatter: elements [r x count, (r + 1) x count) of the vector.
Status reduceScatter(CollClient* c, int rank, int nranks, const uint8_t* in, uint8_t* out,
                     uint64_t count, DataType type, ReduceOp op, uint64_t width) {
  const size_t elt = dataTypeSize(type);
  const uint64_t mine = static_cast<uint64_t>(rank) * count;
  const auto windows = windowsOver(count * static_cast<uint64_t>(nranks), width);
  return pipeline(
      windows.size(), 4,
      [&](size_t i, CollRequest* req) {
        const Window& w = windows[i];
        // recv points at the first element of this rank's part inside the window, as NCCL's.
        const uint64_t first = std::clamp(w.offset, mine, mine + count);
        return c->ireducescatter(in + w.offset * elt, out + (first - mine) * elt,
                                 CollWindow{count, w.offset, w.count}, type, op, req);
      },
      [&](size_t i, size_t bytes) {
        const Window& w = windows[i];
        const uint64_t lo = std::max(w.offset, mine);
        const uint64_t hi = std::min(w.offset + w.count, mine + count);
        const size_t want = hi > lo ? (hi - lo) * elt : 0;
        if (bytes != want) {
          return Status::internal("window " + std::to_string(i) + " reported " +
                                  std::to_string(bytes) + " bytes, expected " +
                                  std::to_string(want));
        }
        return Status::ok();
      });
}

Status allGather(CollClient* c, int rank, int nranks, const uint8_t* in, uint8_t* out,
                 uint64_t bytes_per_rank, uint64_t width) {
  const uint64_t mine = static_cast<uint64_t>(rank) * bytes_per_rank;
  const auto windows = windowsOver(bytes_per_rank * static_cast<uint64_t>(nranks), width);
  return pipeline(
      windows.size(), 4,
      [&](size_t i, CollRequest* req) {
        const Window& w = windows[i];
        const uint64_t first = std::clamp(w.offset, mine, mine + bytes_per_rank);
        return c->iallgather(in + (first - mine), out + w.offset,
                             CollWindow{bytes_per_rank, w.offset, w.count}, req);
      },
      [&](size_t i, size_t bytes) {
        return bytes == windows[i].count
                   ? Status::ok()
                   : Status::internal("all-gather window reported " + std::to_string(bytes));
      });
}

class GatherScatterTest : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  void SetUp() override {
    const auto [nranks, nreducers] = GetParam();
    nranks_ = nranks;
    servers_ = startServers(nreducers);
    ASSERT_EQ(static_cast<int>(servers_.size()), nreducers);
    // Small slices, so one window is several slices on several reducers.
    auto st = connectAll(std::vector<CollOptions>(nranks, optionsFor(servers_, 4096)), &clients_);
    for (int r = 0; r < nranks; ++r) ASSERT_TRUE(st[r].isOk()) << st[r].toString();
  }
  void TearDown() override {
    for (auto& c : clients_) c->close();
  }
  int nranks_ = 0;
  std::vector<std::unique_ptr<ReducerServer>> servers_;
  std::vector<std::unique_ptr<CollClient>> clients_;
};

TEST_P(GatherScatterTest, ReduceScatterEveryTypeAndOpIsExact) {
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      const auto type = static_cast<DataType>(t);
      const auto op = static_cast<ReduceOp>(o);
      const size_t elt = dataTypeSize(type);
      // Odd counts; windows of odd widths (one window, a window per ~third of a part, ...).
      for (auto [count, width] :
           {std::pair<uint64_t, uint64_t>{1, 1}, {7, 5}, {4097, 1500}, {4097, 4097 * 8}}) {
        const uint64_t total = count * static_cast<uint64_t>(nranks_);
        const uint64_t seed = 17 + t * 7 + o;
        std::vector<uint8_t> expected(total * elt);
        driver::fillExpected(type, op, nranks_, seed, total, expected.data());
        std::vector<std::vector<uint8_t>> outs(nranks_,
                                               std::vector<uint8_t>(count * elt + 1, 0xee));
        std::string err = onEveryRank(nranks_, [&](int r) {
          std::vector<uint8_t> in(total * elt);
          driver::fillInput(type, op, r, nranks_, seed, total, in.data());
          return reduceScatter(clients_[r].get(), r, nranks_, in.data(), outs[r].data(), count,
                               type, op, width);
        });
        const std::string what = std::string(dataTypeName(type)) + " " + reduceOpName(op) +
                                 " count " + std::to_string(count) + " width " +
                                 std::to_string(width);
        ASSERT_EQ(err, "") << what;
        for (int r = 0; r < nranks_; ++r) {
          EXPECT_EQ(outs[r].back(), 0xee) << what << ": rank " << r << " wrote past its part";
          size_t first = 0;
          const uint8_t* want = expected.data() + static_cast<size_t>(r) * count * elt;
          const size_t wrong = driver::countMismatches(type, outs[r].data(), want, count, &first);
          EXPECT_EQ(wrong, 0u) << what << ": rank " << r << ", "
                               << driver::describeElement(type, outs[r].data(), want, first);
        }
      }
    }
  }
}

TEST_P(GatherScatterTest, AllGatherIsEveryRanksBytesInOrder) {
  for (auto [bytes_per_rank, width] : {std::pair<uint64_t, uint64_t>{1, 1},
                                       {5, 3},
                                       {4097, 1000},
                                       {100003, 65536},
                                       {100003, 100003 * 8}}) {
    const uint64_t total = bytes_per_rank * static_cast<uint64_t>(nranks_);
    // The expected vector: every rank's input, built here from the same pure function.
    std::vector<uint8_t> expected(total);
    for (int r = 0; r < nranks_; ++r) {
      driver::fillInput(DataType::kUint8, ReduceOp::kSum, r, nranks_, 99, bytes_per_rank,
                        expected.data() + static_cast<size_t>(r) * bytes_per_rank);
    }
    std::vector<std::vector<uint8_t>> outs(nranks_, std::vector<uint8_t>(total + 1, 0xee));
    std::string err = onEveryRank(nranks_, [&](int r) {
      std::vector<uint8_t> in(bytes_per_rank);
      driver::fillInput(DataType::kUint8, ReduceOp::kSum, r, nranks_, 99, bytes_per_rank,
                        in.data());
      return allGather(clients_[r].get(), r, nranks_, in.data(), outs[r].data(), bytes_per_rank,
                       width);
    });
    const std::string what =
        std::to_string(bytes_per_rank) + " bytes per rank, width " + std::to_string(width);
    ASSERT_EQ(err, "") << what;
    for (int r = 0; r < nranks_; ++r) {
      EXPECT_EQ(outs[r].back(), 0xee) << what << ": rank " << r << " wrote past the end";
      EXPECT_EQ(std::memcmp(outs[r].data(), expected.data(), total), 0) << what << ": rank " << r;
    }
  }
}

// The three kinds interleave on one communicator, several of each in flight at once.
TEST_P(GatherScatterTest, InterleavedWithAllReduce) {
  const uint64_t count = 3001;
  const uint64_t total = count * static_cast<uint64_t>(nranks_);
  std::vector<uint8_t> rs_want(total * 4), ar_want(total * 4);
  driver::fillExpected(DataType::kInt32, ReduceOp::kSum, nranks_, 5, total, rs_want.data());
  driver::fillExpected(DataType::kFloat32, ReduceOp::kMax, nranks_, 6, total, ar_want.data());
  std::string err = onEveryRank(nranks_, [&](int r) -> Status {
    std::vector<uint8_t> rs_in(total * 4), ar_in(total * 4), ag_in(count);
    driver::fillInput(DataType::kInt32, ReduceOp::kSum, r, nranks_, 5, total, rs_in.data());
    driver::fillInput(DataType::kFloat32, ReduceOp::kMax, r, nranks_, 6, total, ar_in.data());
    driver::fillInput(DataType::kUint8, ReduceOp::kSum, r, nranks_, 7, count, ag_in.data());
    std::vector<uint8_t> rs_out(count * 4), ar_out(total * 4), ag_out(total);
    CollClient* c = clients_[r].get();
    const uint64_t mine = static_cast<uint64_t>(r) * count;
    for (int round = 0; round < 3; ++round) {
      CollRequest reqs[3];
      TALLY_RETURN_IF_ERROR(c->ireducescatter(rs_in.data(), rs_out.data(),
                                              CollWindow{count, 0, total}, DataType::kInt32,
                                              ReduceOp::kSum, &reqs[0]));
      TALLY_RETURN_IF_ERROR(c->iallreduce(ar_in.data(), ar_out.data(), total, DataType::kFloat32,
                                          ReduceOp::kMax, &reqs[1]));
      TALLY_RETURN_IF_ERROR(
          c->iallgather(ag_in.data(), ag_out.data(), CollWindow{count, 0, total}, &reqs[2]));
      for (auto& q : reqs) {
        if (!q.posted()) return Status::internal("no room for 3 calls");
        TALLY_RETURN_IF_ERROR(waitRequest(&q, nullptr));
      }
      if (std::memcmp(rs_out.data(), rs_want.data() + mine * 4, count * 4) != 0) {
        return Status::internal("reduce-scatter result differs");
      }
      if (ar_out != ar_want) return Status::internal("all-reduce result differs");
      for (int q = 0; q < nranks_; ++q) {
        std::vector<uint8_t> part(count);
        driver::fillInput(DataType::kUint8, ReduceOp::kSum, q, nranks_, 7, count, part.data());
        if (std::memcmp(ag_out.data() + static_cast<size_t>(q) * count, part.data(), count) != 0) {
          return Status::internal("all-gather part of rank " + std::to_string(q) + " differs");
        }
      }
    }
    return Status::ok();
  });
  EXPECT_EQ(err, "");
}

INSTANTIATE_TEST_SUITE_P(RanksByReducers, GatherScatterTest,
                         ::testing::Values(std::make_tuple(2, 1), std::make_tuple(3, 2),
                                           std::make_tuple(4, 3)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& p) {
                           return std::to_string(std::get<0>(p.param)) + "ranks_" +
                                  std::to_string(std::get<1>(p.param)) + "reducers";
                         });

// With TALLY_CHECKSUM every piece carries its own CRC32C: the reducer checks each input piece,
// and each rank checks the piece of a reduce-scatter sum it gets.
TEST(GatherScatterChecksum, PiecesCarryTheirOwnCrc) {
  auto servers = startServers(2);
  CollOptions o = optionsFor(servers, 4096);
  o.checksum = true;
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll(std::vector<CollOptions>(3, o), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  const uint64_t count = 2049, total = count * 3;
  std::vector<uint8_t> want(total * 4);
  driver::fillExpected(DataType::kInt32, ReduceOp::kSum, 3, 8, total, want.data());
  std::string err = onEveryRank(3, [&](int r) -> Status {
    std::vector<uint8_t> in(total * 4), out(count * 4), ag_in(count), ag_out(total);
    driver::fillInput(DataType::kInt32, ReduceOp::kSum, r, 3, 8, total, in.data());
    driver::fillInput(DataType::kUint8, ReduceOp::kSum, r, 3, 9, count, ag_in.data());
    TALLY_RETURN_IF_ERROR(reduceScatter(clients[r].get(), r, 3, in.data(), out.data(), count,
                                        DataType::kInt32, ReduceOp::kSum, 1000));
    if (std::memcmp(out.data(), want.data() + r * count * 4, count * 4) != 0) {
      return Status::internal("reduce-scatter result differs");
    }
    TALLY_RETURN_IF_ERROR(
        allGather(clients[r].get(), r, 3, ag_in.data(), ag_out.data(), count, 999));
    for (int q = 0; q < 3; ++q) {
      std::vector<uint8_t> part(count);
      driver::fillInput(DataType::kUint8, ReduceOp::kSum, q, 3, 9, count, part.data());
      if (std::memcmp(ag_out.data() + q * count, part.data(), count) != 0) {
        return Status::internal("all-gather part of rank " + std::to_string(q) + " differs");
      }
    }
    return Status::ok();
  });
  EXPECT_EQ(err, "");
  for (auto& c : clients) c->close();
}

// Ranks that post different windows fail the communicator with a message naming both.
TEST(GatherScatterMismatch, DifferentWindowsFailWithBothNamed) {
  auto servers = startServers(1);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll(std::vector<CollOptions>(2, optionsFor(servers, 4096)), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  std::vector<uint8_t> in(200), out(200);
  std::string err = onEveryRank(2, [&](int r) -> Status {
    CollRequest req;
    // Rank 1 thinks the window starts 10 elements later.
    TALLY_RETURN_IF_ERROR(clients[r]->ireducescatter(in.data(), out.data(),
                                                     CollWindow{50, r == 0 ? 0u : 10u, 40},
                                                     DataType::kInt32, ReduceOp::kSum, &req));
    return waitRequest(&req, nullptr);
  });
  EXPECT_NE(err.find("disagree"), std::string::npos) << err;
  EXPECT_NE(err.find("reduce-scatter window at 10"), std::string::npos) << err;
  for (auto& c : clients) c->close();
}

// Windows past the vector and bad buffers are refused at the call, before anything is sent.
TEST(GatherScatterMismatch, BadWindowsAreRefusedAtTheCall) {
  auto servers = startServers(1);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = connectAll(std::vector<CollOptions>(2, optionsFor(servers, 4096)), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  std::vector<uint8_t> buf(400);
  CollRequest req;
  Status s = clients[0]->iallgather(buf.data(), buf.data(), CollWindow{100, 150, 51}, &req);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("passes the end"), std::string::npos) << s.message();
  s = clients[0]->iallgather(buf.data(), buf.data(), CollWindow{0, 0, 10}, &req);
  EXPECT_FALSE(s.isOk());
  s = clients[0]->ireducescatter(nullptr, buf.data(), CollWindow{100, 0, 10}, DataType::kInt32,
                                 ReduceOp::kSum, &req);
  EXPECT_FALSE(s.isOk());
  // The communicator still works: nothing was sent.
  std::string err = onEveryRank(2, [&](int r) -> Status {
    std::vector<uint8_t> in(8, static_cast<uint8_t>(r + 1)), out(16);
    CollRequest q;
    TALLY_RETURN_IF_ERROR(clients[r]->iallgather(in.data(), out.data(), CollWindow{8, 0, 16}, &q));
    TALLY_RETURN_IF_ERROR(waitRequest(&q, nullptr));
    for (int i = 0; i < 16; ++i) {
      if (out[i] != (i < 8 ? 1 : 2)) return Status::internal("byte " + std::to_string(i));
    }
    return Status::ok();
  });
  EXPECT_EQ(err, "");
  for (auto& c : clients) c->close();
}

}  // namespace
}  // namespace tally::reducer::test
