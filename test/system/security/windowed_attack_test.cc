// SPDX-License-Identifier: Apache-2.0
// All-gather and reduce-scatter frames from a misbehaving worker, spoken at the wire level
// (raw_peer.h) to an in-process reducer: a piece of another rank's part, a window past the end
// of the ranks' parts, an empty piece followed by a payload anyway. Each costs the attacker's
// communicator (every member hears an Error naming the cause) and never the reducer: a correct
// job on the same reducer runs afterwards.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test/support/harness.h"
#include "test/system/security/raw_peer.h"

namespace tally::security_test {
namespace {

using reducer::ReducerServer;

std::unique_ptr<ReducerServer> startServer() {
  reducer::ServerOptions o;
  o.threads = 2;
  std::unique_ptr<ReducerServer> s;
  Status st = ReducerServer::start(o, &s);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return s;
}

wire::Hello helloFor(uint64_t comm, int rank, int nranks) {
  wire::Hello h;
  h.comm = wire::CommId{0x7a11, comm};
  h.rank = static_cast<uint32_t>(rank);
  h.nranks = static_cast<uint32_t>(nranks);
  h.reducer_index = 0;
  h.nreducers = 1;
  h.slice_bytes = 64 * 1024;
  h.window = 8;
  return h;
}

// Connects `nranks` raw peers to the reducer and forms communicator `comm` (no job token:
// Challenge, Hello, Ready).
void joinAll(const std::string& address, uint64_t comm, int nranks,
             std::vector<std::unique_ptr<RawPeer>>* peers) {
  peers->clear();
  for (int r = 0; r < nranks; ++r) {
    std::unique_ptr<RawPeer> p;
    Status st = RawPeer::connect(address, &p);
    ASSERT_TRUE(st.isOk()) << st.toString();
    HeaderBuf buf;
    size_t got = 0;
    wire::MsgType type;
    ASSERT_TRUE(p->recvType(&type, &buf, &got).isOk());
    ASSERT_EQ(type, wire::MsgType::kChallenge);
    ASSERT_TRUE(p->send(wire::encodeHello(helloFor(comm, r, nranks))).isOk());
    peers->push_back(std::move(p));
  }
  for (auto& p : *peers) {
    HeaderBuf buf;
    size_t got = 0;
    wire::MsgType type;
    ASSERT_TRUE(p->recvType(&type, &buf, &got).isOk());
    ASSERT_EQ(type, wire::MsgType::kReady);
  }
}

// The next message a peer gets must be an Error containing `cause`.
void expectError(RawPeer* p, const std::string& cause) {
  HeaderBuf buf;
  size_t got = 0;
  wire::MsgType type;
  Status st = p->recvType(&type, &buf, &got);
  ASSERT_TRUE(st.isOk()) << st.toString();
  ASSERT_EQ(type, wire::MsgType::kError);
  wire::Reason reason;
  ASSERT_TRUE(wire::decodeError(buf.data(), got, &reason).isOk());
  EXPECT_NE(reason.text.find(cause), std::string::npos) << reason.text;
}

// A 2-rank all-gather of 100 bytes per rank in one slice: rank r's piece is [100 r, 100 r + 100).
wire::SliceHeader gatherPiece(uint64_t offset, uint64_t count) {
  wire::SliceHeader h;
  h.kind = wire::CollKind::kAllGather;
  h.type = DataType::kUint8;
  h.op = ReduceOp::kSum;
  h.total_count = 200;
  h.rank_count = 100;
  h.offset = offset;
  h.count = count;
  return h;
}

// After an attack, the reducer still serves a real job correctly.
void expectStillServes(ReducerServer* server) {
  std::vector<std::unique_ptr<worker_client::CollClient>> clients;
  auto o = reducer::test::optionsFor({});
  o.reducers = {server->address()};
  auto st = reducer::test::connectAll(std::vector<worker_client::CollOptions>(2, o), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  std::vector<std::vector<uint8_t>> in = {std::vector<uint8_t>(10, 1), std::vector<uint8_t>(10, 2)};
  std::vector<std::vector<uint8_t>> out(2, std::vector<uint8_t>(20));
  std::vector<worker_client::CollRequest> reqs(2);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(
        clients[r]
            ->iallgather(in[r].data(), out[r].data(), worker_client::CollWindow{10, 0, 20}, &reqs[r])
            .isOk());
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(reducer::test::waitRequest(&reqs[r], nullptr).isOk());
    for (int i = 0; i < 20; ++i) ASSERT_EQ(out[r][i], i < 10 ? 1 : 2) << "rank " << r;
  }
  for (auto& c : clients) c->close();
}

TEST(WindowedAttack, PieceOfAnotherRanksPartFailsTheCommunicator) {
  auto server = startServer();
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<RawPeer>> peers;
  ASSERT_NO_FATAL_FAILURE(joinAll(server->address(), 1, 2, &peers));
  // Rank 0 claims rank 1's bytes.
  std::vector<uint8_t> payload(100, 0x5a);
  ASSERT_TRUE(peers[0]->send(wire::encodeSlice(gatherPiece(100, 100))).isOk());
  (void)peers[0]->sendBytes(payload.data(), payload.size(), wire::kTagPayload);
  ASSERT_NO_FATAL_FAILURE(expectError(peers[1].get(), "does not match"));
  peers.clear();
  expectStillServes(server.get());
}

TEST(WindowedAttack, WindowPastTheRanksPartsFailsTheCommunicator) {
  auto server = startServer();
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<RawPeer>> peers;
  ASSERT_NO_FATAL_FAILURE(joinAll(server->address(), 2, 2, &peers));
  // A reduce-scatter window of 150 elements at 100, over 2 ranks of 100: past the end.
  wire::SliceHeader h;
  h.kind = wire::CollKind::kReduceScatter;
  h.type = DataType::kInt32;
  h.total_count = 150;
  h.rank_count = 100;
  h.window_offset = 100;
  h.count = 150;
  ASSERT_TRUE(peers[1]->send(wire::encodeSlice(h)).isOk());
  ASSERT_NO_FATAL_FAILURE(expectError(peers[0].get(), "passes the end"));
  peers.clear();
  expectStillServes(server.get());
}

TEST(WindowedAttack, PayloadAfterAnEmptyPieceDropsTheConnection) {
  auto server = startServer();
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<RawPeer>> peers;
  ASSERT_NO_FATAL_FAILURE(joinAll(server->address(), 3, 2, &peers));
  // Rank 0's piece of a slice inside rank 1's part is empty, and no payload may follow it.
  wire::SliceHeader h = gatherPiece(0, 0);
  h.total_count = 50;
  h.window_offset = 120;
  ASSERT_TRUE(peers[0]->send(wire::encodeSlice(h)).isOk());
  std::vector<uint8_t> junk(64, 0xff);
  (void)peers[0]->sendBytes(junk.data(), junk.size(), wire::kTagPayload);
  // The payload is read where a header must be: the reducer drops rank 0, and rank 1 hears it.
  ASSERT_NO_FATAL_FAILURE(expectError(peers[1].get(), "rank 0"));
  peers.clear();
  expectStillServes(server.get());
}

}  // namespace
}  // namespace tally::security_test
