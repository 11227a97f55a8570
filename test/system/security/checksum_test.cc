// SPDX-License-Identifier: Apache-2.0
// TALLY_CHECKSUM end to end: two ranks reach an in-process reducer through a proxy that flips one
// bit of a payload value in transit. Without the checksum the wrong sum is delivered (which
// proves the proxy hits a payload); with it the ranks get an error and never a wrong sum. Also:
// ranks that disagree on the setting are refused.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "test/support/counting_observer.h"
#include "test/support/harness.h"
#include "test/system/security/flip_proxy.h"
#include "test/system/security/raw_peer.h"

namespace tally::security_test {
namespace {

using worker_client::CollClient;
using worker_client::CollOptions;
using worker_client::CollRequest;
using reducer::ReducerServer;
using reducer::ServerError;
using reducer::ServerOptions;
using reducer::test::CountingObserver;
using reducer::test::waitUntil;
using Direction = FlipProxy::Direction;

constexpr size_t kCount = 4096;  // one slice
constexpr size_t kMark = 1000;   // the element rank 0 plants kPlanted at
constexpr float kPlanted = 12345.0f;
constexpr float kSum = kPlanted + 1.0f;  // rank 1 sends 1 everywhere
constexpr uint8_t kMask = 0x01;          // flips the lowest bit of the mantissa's second byte

std::vector<uint8_t> bytesOf(float f) {
  std::vector<uint8_t> b(sizeof(f));
  std::memcpy(b.data(), &f, sizeof(f));
  return b;
}

float flipped(float f) {
  std::vector<uint8_t> b = bytesOf(f);
  b[1] ^= kMask;
  float out;
  std::memcpy(&out, b.data(), sizeof(out));
  return out;
}

struct Outcome {
  std::vector<Status> status;            // per rank
  std::vector<std::vector<float>> recv;  // per rank
  bool flipped = false;
};

class ChecksumTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.threads = 2;
    o.observer = &obs_;
    ASSERT_TRUE(ReducerServer::start(o, &server_).isOk());
    proxy_ = FlipProxy::start(server_->address());
    ASSERT_NE(proxy_, nullptr);
  }

  // Rank 0's Hello of a two-rank communicator (checksum on).
  static wire::Hello twoRankHello() {
    wire::Hello h;
    h.comm = wire::CommId{0xc4c, 0x32c};
    h.nranks = 2;
    h.nreducers = 1;
    h.slice_bytes = 65536;
    h.window = 4;
    h.checksum = true;
    return h;
  }

  // Past the handles (a worker that skips them): rank 0 joins with twoRankHello(), then
  // `second`; the reason the reducer refuses the second with ("" when it did not).
  std::string secondHelloRefusal(const wire::Hello& second) {
    std::unique_ptr<RawPeer> a, b;
    HeaderBuf buf;
    size_t got = 0;
    std::string reason;
    if (!RawPeer::connect(server_->address(), &a).isOk() ||
        !RawPeer::connect(server_->address(), &b).isOk() || !a->recv(&buf, &got).isOk() ||
        !b->recv(&buf, &got).isOk() || !a->send(wire::encodeHello(twoRankHello())).isOk() ||
        !waitUntil([&] { return obs_.communicators.load() == 1; }) ||  // a is the first
        !b->send(wire::encodeHello(second)).isOk() || !b->recvReject(&reason).isOk()) {
      return "";
    }
    return reason;
  }

  // One all-reduce of two ranks through the proxy, which flips a bit going `dir` when `arm`.
  Outcome run(bool checksum, bool arm, Direction dir) {
    if (arm) {
      const float target = dir == Direction::kToServer ? kPlanted : kSum;
      proxy_->arm(dir, bytesOf(target), 1, kMask);
    }
    CollOptions o;
    o.reducers = {proxy_->address()};
    o.slice_bytes = 64 * 1024;
    o.timeouts.connect_ms = 5000;
    o.timeouts.io_ms = 5000;
    o.checksum = checksum;
    std::vector<std::unique_ptr<CollClient>> clients;
    Outcome out;
    out.status = reducer::test::connectAll(std::vector<CollOptions>(2, o), &clients);
    for (auto& s : out.status) EXPECT_TRUE(s.isOk()) << s.toString();
    if (!out.status[0].isOk() || !out.status[1].isOk()) return out;
    std::vector<std::vector<float>> send(2, std::vector<float>(kCount, 1.0f));
    send[0][kMark] = kPlanted;
    out.recv.assign(2, std::vector<float>(kCount, -1.0f));
    std::vector<CollRequest> reqs(2);
    for (int r = 0; r < 2; ++r) {
      out.status[r] = reducer::test::post(clients[r].get(), send[r].data(), out.recv[r].data(),
                                          kCount, DataType::kFloat32, ReduceOp::kSum, &reqs[r]);
    }
    for (int r = 0; r < 2; ++r) {
      if (out.status[r].isOk()) out.status[r] = reducer::test::waitRequest(&reqs[r], nullptr);
    }
    for (auto& c : clients) c->close();
    out.flipped = proxy_->flipped();
    return out;
  }

  // Every element but kMark is 2 on a rank that succeeded.
  static void expectOthersRight(const Outcome& out, int r) {
    for (size_t i = 0; i < kCount; ++i) {
      if (i != kMark) {
        ASSERT_EQ(out.recv[r][i], 2.0f) << "rank " << r << " element " << i;
      }
    }
  }

  CountingObserver obs_;
  std::unique_ptr<ReducerServer> server_;
  std::unique_ptr<FlipProxy> proxy_;
};

TEST_F(ChecksumTest, CleanRunGivesRightSums) {
  Outcome out = run(/*checksum=*/true, /*arm=*/false, Direction::kToServer);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(out.status[r].isOk()) << out.status[r].toString();
    EXPECT_EQ(out.recv[r][kMark], kSum);
    expectOthersRight(out, r);
  }
  EXPECT_EQ(obs_.totalErrors(), 0u);
}

TEST_F(ChecksumTest, WithoutChecksumAFlippedSliceGivesAWrongSum) {
  Outcome out = run(/*checksum=*/false, /*arm=*/true, Direction::kToServer);
  ASSERT_TRUE(out.flipped) << "the proxy never saw the planted value";
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(out.status[r].isOk()) << out.status[r].toString();
    EXPECT_EQ(out.recv[r][kMark], flipped(kPlanted) + 1.0f) << "rank " << r;
    EXPECT_NE(out.recv[r][kMark], kSum);
    expectOthersRight(out, r);
  }
}

TEST_F(ChecksumTest, FlippedSliceFailsTheCommunicator) {
  Outcome out = run(/*checksum=*/true, /*arm=*/true, Direction::kToServer);
  ASSERT_TRUE(out.flipped);
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(out.status[r].isOk()) << "rank " << r << " got a result";
    EXPECT_NE(out.status[r].message().find("checksum mismatch: rank 0"), std::string::npos)
        << out.status[r].toString();
    EXPECT_NE(out.status[r].message().find("call 0 slice 0"), std::string::npos)
        << out.status[r].toString();
  }
  EXPECT_TRUE(waitUntil([&] { return obs_.errorCount(ServerError::kChecksum) == 1; }));
  EXPECT_EQ(obs_.communicator_failures.load(), 1u);
}

TEST_F(ChecksumTest, WithoutChecksumAFlippedResultIsDelivered) {
  Outcome out = run(/*checksum=*/false, /*arm=*/true, Direction::kToClient);
  ASSERT_TRUE(out.flipped);
  int wrong = 0;
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(out.status[r].isOk()) << out.status[r].toString();
    if (out.recv[r][kMark] == flipped(kSum)) wrong++;
    expectOthersRight(out, r);
  }
  EXPECT_EQ(wrong, 1) << "one rank's result stream was flipped";
}

// The rank whose result was flipped fails with the mismatch. The other has the right sum, or,
// when the failure reached the reducer before that rank's result left it (a busy machine), an
// error that names the mismatch. No rank ever takes a wrong sum.
TEST_F(ChecksumTest, FlippedResultIsAnErrorNeverAWrongSum) {
  Outcome out = run(/*checksum=*/true, /*arm=*/true, Direction::kToClient);
  ASSERT_TRUE(out.flipped);
  auto mismatchOf = [](int r) {
    return "checksum mismatch: rank " + std::to_string(r) + " got the result of call 0 slice 0";
  };
  int flipped_rank = -1;
  for (int r = 0; r < 2; ++r) {
    if (!out.status[r].isOk() && out.status[r].message().find(mismatchOf(r)) != std::string::npos)
      flipped_rank = r;
  }
  ASSERT_NE(flipped_rank, -1) << out.status[0].toString() << "; " << out.status[1].toString();
  const int other = 1 - flipped_rank;
  if (out.status[other].isOk()) {
    EXPECT_EQ(out.recv[other][kMark], kSum) << "rank " << other << " took a wrong sum";
    expectOthersRight(out, other);
  } else {
    EXPECT_NE(out.status[other].message().find(mismatchOf(flipped_rank)), std::string::npos)
        << out.status[other].toString();
  }
}

TEST_F(ChecksumTest, RanksThatDisagreeAreRefused) {
  CollOptions on;
  on.reducers = {server_->address()};
  on.timeouts.connect_ms = 1500;
  on.checksum = true;
  CollOptions off = on;
  off.checksum = false;
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = reducer::test::connectAll({on, off}, &clients);
  // Both see it in the handles at once, before any reducer is contacted.
  for (const Status& s : st) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
    EXPECT_NE(s.message().find("rank 1 has a different TALLY_REDUCERS, TALLY_CHECKSUM or slice "
                               "plan"),
              std::string::npos)
        << s.toString();
  }
  EXPECT_EQ(obs_.peak_connections.load(), 0);
}

TEST_F(ChecksumTest, ReducerRefusesAHelloThatDisagrees) {
  // Past the handles (a worker that skips them): the reducer holds every member to the first.
  wire::Hello second = twoRankHello();
  second.rank = 1;
  second.checksum = false;
  const std::string reason = secondHelloRefusal(second);
  EXPECT_NE(reason.find("TALLY_CHECKSUM=0, earlier members 1"), std::string::npos) << reason;
}

TEST_F(ChecksumTest, ReducerRefusesAHelloWithAnotherSlicePlan) {
  wire::Hello second = twoRankHello();
  second.rank = 1;
  second.slices_per_reducer = 2;
  const std::string reason = secondHelloRefusal(second);
  EXPECT_NE(reason.find("at least 2 slices per reducer"), std::string::npos) << reason;
  EXPECT_NE(reason.find("earlier members 8 of 32768"), std::string::npos) << reason;
}

}  // namespace
}  // namespace tally::security_test
