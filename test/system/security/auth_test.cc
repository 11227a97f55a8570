// SPDX-License-Identifier: Apache-2.0
// The job token end to end: in-process reducers and CollClient ranks with right, wrong and
// missing tokens on either side, token files, wire-level misbehaviour (a bad or replayed Answer,
// a Hello without one), an impostor reducer, and random communicator ids.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/params.h"
#include "test/support/counting_observer.h"
#include "test/support/harness.h"
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

const std::string kToken = "tally-test-job-token-5f2c9a81e07d";
const std::string kOtherToken = "tally-test-other-job-token-93b1";

std::unique_ptr<ReducerServer> startServer(const std::string& token, CountingObserver* obs) {
  ServerOptions o;
  o.threads = 2;
  o.job_token = auth::JobToken(token);
  o.observer = obs;
  std::unique_ptr<ReducerServer> s;
  Status st = ReducerServer::start(o, &s);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return s;
}

CollOptions optionsFor(const std::vector<ReducerServer*>& servers, const std::string& token) {
  CollOptions o;
  for (auto* s : servers) o.reducers.push_back(s->address());
  o.slice_bytes = 64 * 1024;
  o.window = 8;
  o.timeouts.connect_ms = 5000;
  o.timeouts.io_ms = 10000;
  o.job_token = token;
  return o;
}

// Every rank all-reduces rank-dependent values; checks every element of every rank's result.
void expectCorrectSums(std::vector<std::unique_ptr<CollClient>>& clients, size_t count) {
  const int n = static_cast<int>(clients.size());
  std::vector<std::vector<float>> send(n, std::vector<float>(count)), recv(send);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) send[r][i] = static_cast<float>((r + 1) * (i % 97));
  }
  std::vector<CollRequest> reqs(n);
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(reducer::test::post(clients[r].get(), send[r].data(), recv[r].data(), count,
                                    DataType::kFloat32, ReduceOp::kSum, &reqs[r])
                    .isOk());
  }
  const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
  for (int r = 0; r < n; ++r) {
    size_t bytes = 0;
    Status st = reducer::test::waitRequest(&reqs[r], &bytes);
    ASSERT_TRUE(st.isOk()) << st.toString();
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(recv[r][i], ranks_sum * static_cast<float>(i % 97)) << "rank " << r << " at " << i;
    }
  }
}

// Collects every log line while alive, to check that no secret is ever written.
class LogCapture {
 public:
  LogCapture() {
    {
      std::lock_guard<std::mutex> lock(mu());
      buffer().clear();
    }
    log::setSink(&LogCapture::sink, log::Level::kTrace);
  }
  ~LogCapture() { log::setSink(&log::stderrSink, log::Level::kWarn); }
  static std::string text() {
    std::lock_guard<std::mutex> lock(mu());
    return buffer();
  }

 private:
  static void sink(log::Level, unsigned long, const char*, int, const char* message) {
    std::lock_guard<std::mutex> lock(mu());
    buffer() += message;
    buffer() += '\n';
  }
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::string& buffer() {
    static std::string b;
    return b;
  }
};

void expectRefused(const std::vector<Status>& statuses, const std::string& because) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_FALSE(statuses[r].isOk()) << "rank " << r << " joined";
    EXPECT_NE(statuses[r].message().find("authentication failed"), std::string::npos)
        << statuses[r].toString();
    EXPECT_NE(statuses[r].message().find(because), std::string::npos) << statuses[r].toString();
    EXPECT_EQ(statuses[r].message().find(kToken), std::string::npos) << "secret in an error";
    EXPECT_EQ(statuses[r].message().find(kOtherToken), std::string::npos) << "secret in an error";
  }
}

TEST(AuthTest, RightTokenGivesCorrectSums) {
  CountingObserver obs0, obs1;
  auto s0 = startServer(kToken, &obs0);
  auto s1 = startServer(kToken, &obs1);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = reducer::test::connectAll(
      std::vector<CollOptions>(3, optionsFor({s0.get(), s1.get()}, kToken)), &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  expectCorrectSums(clients, 100000);
  for (auto& c : clients) c->close();
  EXPECT_EQ(obs0.totalErrors() + obs1.totalErrors(), 0u);
}

// Connections that never answer the Challenge hold their slots only for the short auth timeout,
// not the join timeout: once it passes, a job with the token gets every slot it needs, over an
// event loop and over threads (two sockets).
TEST(AuthTest, SilentConnectionsLoseTheirSlotsAtTheAuthTimeout) {
  for (int sockets : {1, 2}) {
    CountingObserver obs;
    ServerOptions o;
    o.threads = 2;
    o.job_token = auth::JobToken(kToken);
    o.max_connections = 4;
    o.auth_timeout_ms = 300;
    o.join_timeout_ms = 60000;
    o.observer = &obs;
    std::unique_ptr<ReducerServer> server;
    ASSERT_TRUE(ReducerServer::start(o, &server).isOk());
    transport::NetworkConfig net;
    net.tcp.sockets = sockets;
    std::vector<std::unique_ptr<transport::Connection>> silent(4);
    for (auto& c : silent) {
      ASSERT_TRUE(transport::connectDefault(server->address(), net, {}, &c).isOk());
    }
    ASSERT_TRUE(waitUntil([&] { return obs.peak_connections.load() == 4; }));
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(waitUntil([&] { return obs.connections.load() == 0; },
                          std::chrono::milliseconds(5000)))
        << sockets << " sockets: " << obs.connections.load() << " silent connections still open";
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(150));
    EXPECT_EQ(obs.errorCount(ServerError::kTimeout), 4u);
    std::vector<std::unique_ptr<CollClient>> clients;
    for (const Status& s : reducer::test::connectAll(
             std::vector<CollOptions>(2, optionsFor({server.get()}, kToken)), &clients)) {
      ASSERT_TRUE(s.isOk()) << s.toString();
    }
    expectCorrectSums(clients, 5000);
    for (auto& c : clients) c->close();
    for (auto& c : silent) c->close();
  }
}

TEST(AuthTest, WrongTokenIsRefusedBeforeAnyCommunicatorExists) {
  LogCapture capture;
  CountingObserver obs;
  auto server = startServer(kToken, &obs);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = reducer::test::connectAll(
      std::vector<CollOptions>(2, optionsFor({server.get()}, kOtherToken)), &clients);
  expectRefused(st, "does not match this reducer's job token");
  EXPECT_TRUE(waitUntil([&] { return obs.errorCount(ServerError::kAuth) == 2; }));
  EXPECT_EQ(obs.peak_communicators.load(), 0) << "communicator state made for a stranger";
  EXPECT_EQ(obs.totalErrors(), 2u);
  const std::string logs = LogCapture::text();
  EXPECT_NE(logs.find("reducer: refusing peer 127.0.0.1:"), std::string::npos) << logs;
  EXPECT_EQ(logs.find(kToken), std::string::npos) << "the token was logged";
  EXPECT_EQ(logs.find(kOtherToken), std::string::npos) << "the token was logged";
}

TEST(AuthTest, MissingWorkerTokenIsRefused) {
  CountingObserver obs;
  auto server = startServer(kToken, &obs);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = reducer::test::connectAll(std::vector<CollOptions>(2, optionsFor({server.get()}, "")),
                                      &clients);
  expectRefused(st, "the worker has none");
  EXPECT_TRUE(waitUntil([&] { return obs.errorCount(ServerError::kAuth) == 2; }));
  EXPECT_EQ(obs.peak_communicators.load(), 0);
}

TEST(AuthTest, TokenOnWorkerButNotReducerIsRefusedByTheWorker) {
  LogCapture capture;
  CountingObserver obs;
  auto server = startServer("", &obs);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = reducer::test::connectAll(
      std::vector<CollOptions>(2, optionsFor({server.get()}, kToken)), &clients);
  expectRefused(st, "does not authenticate");
  // The reducer hears why (the worker's Reject), logs it and counts it.
  EXPECT_TRUE(waitUntil([&] { return obs.errorCount(ServerError::kAuth) == 2; }));
  EXPECT_EQ(obs.peak_communicators.load(), 0);
  EXPECT_NE(LogCapture::text().find("refused this reducer: authentication failed"),
            std::string::npos)
      << LogCapture::text();
}

TEST(AuthTest, NoTokenOnEitherSideStillWorks) {
  CountingObserver obs;
  auto server = startServer("", &obs);
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = reducer::test::connectAll(std::vector<CollOptions>(2, optionsFor({server.get()}, "")),
                                      &clients);
  for (auto& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  expectCorrectSums(clients, 5000);
}

TEST(AuthTest, TokenFileWorks) {
  char path[] = "/tmp/tally-token-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = kToken + "\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  CountingObserver obs;
  ServerOptions o;
  o.threads = 1;
  o.observer = &obs;
  ASSERT_TRUE(auth::loadJobToken("", path, &o.job_token).isOk());
  std::unique_ptr<ReducerServer> server;
  ASSERT_TRUE(ReducerServer::start(o, &server).isOk());
  CollOptions opts = optionsFor({server.get()}, "");
  opts.job_token_file = path;
  std::vector<std::unique_ptr<CollClient>> clients;
  auto st = reducer::test::connectAll(std::vector<CollOptions>(2, opts), &clients);
  for (auto& s : st) EXPECT_TRUE(s.isOk()) << s.toString();
  if (st[0].isOk() && st[1].isOk()) expectCorrectSums(clients, 20000);
  // A missing file fails connect and names it.
  opts.job_token_file = std::string(path) + ".missing";
  st = reducer::test::connectAll(std::vector<CollOptions>(1, opts), &clients);
  EXPECT_EQ(st[0].code(), StatusCode::kInvalidUsage);
  EXPECT_NE(st[0].message().find(".missing"), std::string::npos) << st[0].toString();
  unlink(path);
}

// The reducer's first message on a raw connection.
wire::Challenge readChallenge(RawPeer* peer) {
  HeaderBuf buf;
  size_t got = 0;
  wire::Challenge c;
  Status st = peer->recv(&buf, &got);
  EXPECT_TRUE(st.isOk()) << st.toString();
  st = wire::decodeChallenge(buf.data(), got, &c);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return c;
}

wire::Hello helloFor(uint32_t rank, uint32_t nranks, bool checksum = false) {
  wire::Hello h;
  h.comm = wire::CommId{0x5ec0, 0x1d};
  h.rank = rank;
  h.nranks = nranks;
  h.reducer_index = 0;
  h.nreducers = 1;
  h.slice_bytes = 65536;
  h.window = 4;
  h.checksum = checksum;
  return h;
}

TEST(AuthTest, ForgedAnswerIsRefusedAndItsHelloNeverRead) {
  CountingObserver obs;
  auto server = startServer(kToken, &obs);
  std::unique_ptr<RawPeer> peer;
  ASSERT_TRUE(RawPeer::connect(server->address(), &peer).isOk());
  wire::Challenge c = readChallenge(peer.get());
  EXPECT_TRUE(c.auth_required);
  wire::Answer forged;
  ASSERT_TRUE(auth::randomBytes(forged.nonce.data(), forged.nonce.size()).isOk());
  ASSERT_TRUE(auth::randomBytes(forged.mac.data(), forged.mac.size()).isOk());
  ASSERT_TRUE(peer->send(wire::encodeAnswer(forged)).isOk());
  // A Hello right behind it (one rank: it would form a communicator at once if it were read).
  (void)peer->send(wire::encodeHello(helloFor(0, 1)));
  std::string reason;
  ASSERT_TRUE(peer->recvReject(&reason).isOk());
  EXPECT_EQ(reason.rfind("authentication failed", 0), 0u) << reason;
  EXPECT_TRUE(waitUntil([&] { return obs.errorCount(ServerError::kAuth) == 1; }));
  EXPECT_EQ(obs.peak_communicators.load(), 0) << "a one-rank Hello after a bad Answer was read";
}

TEST(AuthTest, ReplayedAnswerIsRefused) {
  CountingObserver obs;
  auto server = startServer(kToken, &obs);
  auth::JobToken token(kToken);
  // A genuine Answer on a first connection...
  std::unique_ptr<RawPeer> first;
  ASSERT_TRUE(RawPeer::connect(server->address(), &first).isOk());
  wire::Challenge c1 = readChallenge(first.get());
  wire::Answer answer;
  ASSERT_TRUE(auth::randomBytes(answer.nonce.data(), answer.nonce.size()).isOk());
  answer.mac = token.prove(auth::Role::kWorker, c1.nonce, answer.nonce);
  ASSERT_TRUE(first->send(wire::encodeAnswer(answer)).isOk());
  HeaderBuf buf;
  size_t got = 0;
  ASSERT_TRUE(first->recv(&buf, &got).isOk());
  wire::Proof proof;
  ASSERT_TRUE(wire::decodeProof(buf.data(), got, &proof).isOk());
  EXPECT_TRUE(token.verify(auth::Role::kReducer, c1.nonce, answer.nonce, proof.mac));
  // ...is worthless on a second: the reducer's nonce differs.
  std::unique_ptr<RawPeer> second;
  ASSERT_TRUE(RawPeer::connect(server->address(), &second).isOk());
  wire::Challenge c2 = readChallenge(second.get());
  EXPECT_NE(c1.nonce, c2.nonce);
  ASSERT_TRUE(second->send(wire::encodeAnswer(answer)).isOk());
  std::string reason;
  ASSERT_TRUE(second->recvReject(&reason).isOk());
  EXPECT_NE(reason.find("does not match"), std::string::npos) << reason;
  // Echoing the reducer's own proof back as an answer fails too (the role is in the MAC).
  std::unique_ptr<RawPeer> third;
  ASSERT_TRUE(RawPeer::connect(server->address(), &third).isOk());
  wire::Challenge c3 = readChallenge(third.get());
  wire::Answer reflected;
  reflected.nonce = answer.nonce;
  reflected.mac = token.prove(auth::Role::kReducer, c3.nonce, answer.nonce);
  ASSERT_TRUE(third->send(wire::encodeAnswer(reflected)).isOk());
  ASSERT_TRUE(third->recvReject(&reason).isOk());
  EXPECT_NE(reason.find("authentication failed"), std::string::npos) << reason;
}

// A fake reducer on a plain transport listener: answers the opening as told, then says Ready.
class Impostor {
 public:
  explicit Impostor(bool require_token) {
    transport::NetworkConfig net;
    net.tcp.sockets = 1;
    std::shared_ptr<transport::Network> network;
    EXPECT_TRUE(transport::openDefaultNetwork(net, &network).isOk());
    if (network) {
      EXPECT_TRUE(network->listenAt("127.0.0.1:0", &listener_).isOk());
    }
    thread_ = std::thread([this, require_token] { run(require_token); });
  }
  ~Impostor() { join(); }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  std::string address() const { return listener_->address(); }
  // What the worker sent after the opening: message types, in order.
  std::vector<wire::MsgType> received;
  std::string reject_reason;

 private:
  void run(bool require_token) {
    std::unique_ptr<transport::Connection> conn;
    for (int i = 0; i < 50 && !conn; ++i) (void)listener_->acceptWait(100, &conn);
    if (!conn) return;
    RawPeer peer(std::move(conn));
    wire::Challenge c;
    ASSERT_TRUE(auth::randomBytes(c.nonce.data(), c.nonce.size()).isOk());
    c.auth_required = require_token;
    ASSERT_TRUE(peer.send(wire::encodeChallenge(c)).isOk());
    for (;;) {
      HeaderBuf buf;
      size_t got = 0;
      wire::MsgType type;
      if (!peer.recvType(&type, &buf, &got).isOk()) return;  // the worker closed
      received.push_back(type);
      if (type == wire::MsgType::kReject) {
        wire::Reason r;
        (void)wire::decodeReject(buf.data(), got, &r);
        reject_reason = r.text;
      }
      if (type == wire::MsgType::kAnswer) {
        wire::Proof p;  // it does not know the token: any MAC
        p.mac.fill(0xab);
        (void)peer.send(wire::encodeProof(p));
      }
      if (type == wire::MsgType::kHello) {
        (void)peer.send(wire::encodeReady(wire::Ready{wire::CommId{}, 1, 4}));
      }
    }
  }
  std::unique_ptr<transport::Listener> listener_;
  std::thread thread_;
};

TEST(AuthTest, ImpostorReducerGetsNoSlice) {
  std::vector<std::unique_ptr<CollClient>> clients;
  auto impostor = std::make_unique<Impostor>(/*require_token=*/true);
  CollOptions o;
  o.reducers = {impostor->address()};
  o.timeouts.connect_ms = 5000;
  o.job_token = kToken;
  auto st = reducer::test::connectAll({o}, &clients);
  EXPECT_FALSE(st[0].isOk());
  EXPECT_NE(st[0].message().find("could not prove the job token"), std::string::npos)
      << st[0].toString();
  EXPECT_EQ(clients[0], nullptr);
  impostor->join();
  const std::vector<wire::MsgType>& received = impostor->received;
  // The worker's Answer, and nothing after the bad Proof: not even its Hello.
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0], wire::MsgType::kAnswer);
}

TEST(AuthTest, ImpostorWithoutTokenIsToldWhy) {
  std::vector<std::unique_ptr<CollClient>> clients;
  auto impostor = std::make_unique<Impostor>(/*require_token=*/false);
  CollOptions o;
  o.reducers = {impostor->address()};
  o.timeouts.connect_ms = 5000;
  o.job_token = kToken;
  auto st = reducer::test::connectAll({o}, &clients);
  EXPECT_FALSE(st[0].isOk());
  EXPECT_NE(st[0].message().find("does not authenticate"), std::string::npos) << st[0].toString();
  impostor->join();
  // The worker said why and sent nothing else (no Hello: no communicator id to a stranger).
  ASSERT_EQ(impostor->received.size(), 1u);
  EXPECT_EQ(impostor->received[0], wire::MsgType::kReject);
  EXPECT_EQ(impostor->reject_reason.rfind("authentication failed", 0), 0u)
      << impostor->reject_reason;
}

TEST(CommIdTest, RandomAndUnique) {
  CollOptions o;
  o.reducers = {"127.0.0.1:1"};
  constexpr int kHandles = 2000;
  std::set<std::pair<uint64_t, uint64_t>> seen;
  int ones[128] = {};
  for (int i = 0; i < kHandles; ++i) {
    uint8_t h[worker_client::kCollHandleBytes];
    ASSERT_TRUE(CollClient::makeHandle(o, h).isOk());
    uint64_t hi = 0, lo = 0;
    for (int b = 0; b < 8; ++b) {
      hi |= static_cast<uint64_t>(h[8 + b]) << (8 * b);
      lo |= static_cast<uint64_t>(h[16 + b]) << (8 * b);
    }
    seen.insert({hi, lo});
    for (int b = 0; b < 64; ++b) {
      ones[b] += static_cast<int>((hi >> b) & 1);
      ones[64 + b] += static_cast<int>((lo >> b) & 1);
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kHandles));
  // Every one of the 128 bits is random: each is set in about half the ids (9 sigma bounds).
  for (int b = 0; b < 128; ++b) {
    EXPECT_GT(ones[b], kHandles / 2 - 200) << "bit " << b;
    EXPECT_LT(ones[b], kHandles / 2 + 200) << "bit " << b;
  }
}

TEST(SecretTest, ProvenanceNeverLogsTheToken) {
  LogCapture capture;
  Params params;
  ASSERT_TRUE(
      Params::load(MapParamSource({{"TALLY_JOB_TOKEN", kToken}, {"TALLY_CHECKSUM", "1"}}), &params)
          .isOk());
  params.logProvenance();
  const std::string logs = LogCapture::text();
  EXPECT_NE(logs.find("TALLY_JOB_TOKEN set by environment"), std::string::npos) << logs;
  EXPECT_NE(logs.find("TALLY_CHECKSUM set by environment to 1"), std::string::npos) << logs;
  EXPECT_EQ(logs.find(kToken), std::string::npos) << logs;
}

}  // namespace
}  // namespace tally::security_test
