// SPDX-License-Identifier: Apache-2.0
// Fuzz target fuzz_reducer_session: the reducer's connection state machine (reducer/peer.cc,
// loop_peer.cc, session.cc, failover.cc) behind a real loopback listener.
//
// Two in-process ReducerServers are started on first use and serve every input: one without a
// job token (everything past the opening is reachable) and one that requires kJobToken (the
// pre-authentication surface; kAnswer records get a session past it). An input is a list of
// records (session_format.h): messages with any tag and any bytes sent over up to four transport
// connections, well-formed failover messages (Ack, Ping, Relay, Dismiss), receives, answers and
// closes; or, in raw mode, bytes written below the transport's framing. Each input's
// connections are closed at its end.
//
// Properties: the servers never crash (ASan/UBSan watch them), and every kCheckEvery inputs (every
// input under the replay driver) each still does its job: two fresh clients all-reduce a
// multi-slice call and get the exact sum (and then its Commit, a Pong and a Relay), then every
// connection and communicator the server opened is closed again within kSettleMs (nothing leaks
// from one malicious session to the next) and no internal error was counted.
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "common/log.h"
#include "fuzz_util.h"
#include "protocol/opening.h"
#include "reducer/server.h"
#include "protocol/wire.h"
#include "session_client.h"
#include "session_format.h"

// Defined by replay_main.cc only: check the server after every input, not every kCheckEvery.
extern "C" __attribute__((weak)) const int tally_fuzz_replaying;

namespace tally::fuzz::session {
namespace {

namespace wire = protocol::wire;
namespace opening = protocol::opening;

constexpr uint64_t kCheckEvery = 32;
constexpr int64_t kSendMs = 500;
constexpr int64_t kRecvMs = 20;        // replies on loopback come within a millisecond or two
constexpr int kMaxRecvsPerInput = 12;  // each may cost kRecvMs
constexpr int64_t kSettleMs = 10000;

// Counts what the server opens and closes.
class Counter final : public reducer::ServerObserver {
 public:
  void connectionOpened() override { conns_open_++; }
  void connectionClosed() override { conns_closed_++; }
  void communicatorOpened() override { comms_open_++; }
  void communicatorClosed() override { comms_closed_++; }
  void communicatorFailed() override {}
  void memoryReserved(uint64_t n) override { reserved_ += static_cast<int64_t>(n); }
  void memoryReleased(uint64_t n) override { reserved_ -= static_cast<int64_t>(n); }
  void sliceReduced(uint64_t, std::chrono::nanoseconds) override {}
  void error(reducer::ServerError e) override {
    if (e == reducer::ServerError::kInternal) internal_++;
  }
  void epochDecided(reducer::EpochChange) override {}
  void communicatorRejoined() override {}
  void zerocopySent(uint64_t, uint64_t, uint64_t) override {}
  bool settled() const {
    return conns_open_.load() == conns_closed_.load() &&
           comms_open_.load() == comms_closed_.load() && reserved_.load() == 0;
  }
  std::string describe() const {
    return std::to_string(conns_open_.load()) + " connections opened, " +
           std::to_string(conns_closed_.load()) + " closed; " + std::to_string(comms_open_.load()) +
           " communicators opened, " + std::to_string(comms_closed_.load()) + " closed; " +
           std::to_string(reserved_.load()) + " bytes reserved";
  }
  uint64_t internalErrors() const { return internal_.load(); }

 private:
  std::atomic<uint64_t> conns_open_{0}, conns_closed_{0}, comms_open_{0}, comms_closed_{0};
  std::atomic<uint64_t> internal_{0};
  std::atomic<int64_t> reserved_{0};
};

void quietSink(log::Level, unsigned long, const char*, int, const char*) {}

// One reducer and what it has counted.
struct Server {
  explicit Server(const auth::JobToken& job_token) : token(job_token) {
    reducer::ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.threads = 2;
    o.window = 4;
    o.timeouts.connect_ms = 2000;  // half-open raw sessions are dropped after this
    o.pool_cache_bytes = 8 << 20;
    o.job_token = token;
    o.observer = &counter;
    Status st = reducer::ReducerServer::start(o, &server);
    TALLY_FUZZ_CHECK(st.isOk(), "cannot start the reducer: %s", st.toString().c_str());
    address = server->address();
  }
  ~Server() {
    if (server) server->stop();
  }
  Counter counter;  // outlives the server (declared first, destroyed last)
  auth::JobToken token;
  std::unique_ptr<reducer::ReducerServer> server;
  std::string address;
};

struct Harness {
  struct Setup {  // first member: runs before any server starts
    Setup() {
      // Thousands of refused sessions would log thousands of warnings.
      log::setSink(&quietSink, log::Level::kNone);
      // OpenSSL's libcrypto (the job token's HMAC) registers its exit-time cleanup on first
      // use. Used here first, its cleanup runs after this Harness is destroyed (exit handlers
      // run in reverse), so the servers' loop threads, which check Answers, still free their
      // per-thread OpenSSL state when they end; the other way round the cleanup deletes the key
      // that frees it first, and LSan reports that state as leaked at exit.
      const auth::Nonce nonce{};
      (void)auth::JobToken(kJobToken).prove(auth::Role::kWorker, nonce, nonce);
    }
  } setup;
  auth::JobToken token{kJobToken};
  Server open{auth::JobToken()};
  Server guarded{token};
  uint64_t inputs = 0;
  std::vector<uint8_t> fill = std::vector<uint8_t>(kMaxFillBytes, 0x3f);
  std::vector<uint8_t> sink = std::vector<uint8_t>(kMaxFillBytes);
};

Harness& harness() {
  static Harness h;
  return h;
}

// A Hello's communicator id is mixed with the input number, so a communicator left half-formed
// by one input (before the server noticed its connections closed) cannot meet the next input's.
std::vector<uint8_t> withFreshComm(const uint8_t* data, size_t size, uint64_t nonce) {
  std::vector<uint8_t> bytes(data, data + size);
  if (size >= 16 && data[0] == (wire::kMagic & 0xff) && data[6] == 1 /* Hello */) {
    for (int i = 0; i < 8; ++i) bytes[8 + i] ^= static_cast<uint8_t>(nonce >> (8 * i));
  }
  return bytes;
}

bool replaying() { return &tally_fuzz_replaying != nullptr; }

// Answers a Challenge as a worker holding the job token would (opening::WorkerSide).
void answer(Harness& h, Client* c, const std::string& address,
            const std::vector<uint8_t>& challenge, bool spoil) {
  opening::WorkerSide side(&h.token, address);
  bool send_answer = false;
  wire::Frame reply;
  std::string reject;
  Status st = side.onChallenge(challenge.data(), challenge.size(), &send_answer, &reply, &reject);
  if (st.isOk() && send_answer) {
    if (spoil) reply.bytes[reply.size - 1] ^= 1;  // the MAC's last byte
    (void)c->send(reply.data(), reply.size, wire::kTagHeader, kSendMs);
  } else if (!st.isOk() && !reject.empty()) {
    wire::Frame f = wire::encodeReject(wire::Reason{reject});
    (void)c->send(f.data(), f.size, wire::kTagHeader, kSendMs);
  }
}

// kSendFailover's message (session_format.h), from the record's argument.
wire::Frame failoverFrame(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  switch (static_cast<Failover>(in.take<uint8_t>() % 4)) {
    case Failover::kAck: {
      wire::AckPoint p;
      p.calls = in.take<uint64_t>();
      p.recovery_epoch = in.take<uint32_t>();
      return wire::encodeAck(p);
    }
    case Failover::kPing:
      return wire::encodePing(wire::Ping{in.take<uint64_t>()});
    case Failover::kRelay: {
      wire::Relay r;
      r.from = in.take<uint32_t>();
      wire::Control& c = r.control;
      c.kind = static_cast<wire::ControlKind>(1 + in.take<uint8_t>() % 4);
      c.change = static_cast<wire::Change>(1 + in.take<uint8_t>() % 4);
      c.epoch = in.take<uint32_t>();
      c.slot = in.take<uint32_t>() % wire::kMaxReducers;
      c.commit.calls = in.take<uint64_t>();
      c.commit.recovery_epoch = in.take<uint32_t>();
      c.next_call = in.take<uint64_t>();
      c.address = in.takeString(255);
      c.reason = in.takeString(255);
      return wire::encodeRelay(r);
    }
    case Failover::kDismiss:
      break;
  }
  size_t got = 0;
  const uint8_t* text = in.takeBytes(in.remaining(), &got);
  return wire::encodeDismiss(wire::Reason{std::string(reinterpret_cast<const char*>(text), got)});
}

void runFramed(Harness& h, Server& server, const uint8_t* data, size_t size) {
  std::array<Client, kConnections> clients;
  std::array<bool, kConnections> tried{};
  std::array<std::vector<uint8_t>, kConnections> challenge;  // as received, per connection
  int recvs = 0;
  RecordReader reader(data, size);
  Record r;
  while (reader.next(&r)) {
    Client& c = clients[r.connection];
    if (!tried[r.connection]) {
      tried[r.connection] = true;
      if (!c.connect(server.address).isOk()) continue;
    }
    if (!c.connected()) continue;
    switch (r.action) {
      case Action::kSendHeader: {
        auto bytes = withFreshComm(r.data, r.size, h.inputs);
        (void)c.send(bytes.data(), bytes.size(), wire::kTagHeader, kSendMs);
        break;
      }
      case Action::kSendPayload:
        (void)c.send(r.data, r.size, wire::kTagPayload, kSendMs);
        break;
      case Action::kSendTagged: {
        const int tag = static_cast<int>(readU32(r.data, r.size));
        const size_t skip = r.size < 4 ? r.size : 4;
        auto bytes = withFreshComm(r.data + skip, r.size - skip, h.inputs);
        (void)c.send(bytes.data(), bytes.size(), tag, kSendMs);
        break;
      }
      case Action::kSendFill: {
        const size_t n = std::min<size_t>(readU32(r.data, r.size), kMaxFillBytes);
        (void)c.send(h.fill.data(), n, wire::kTagPayload, kSendMs);
        break;
      }
      case Action::kRecvHeader:
      case Action::kRecvPayload:
      case Action::kAnswer: {
        const bool header = r.action != Action::kRecvPayload;
        if (r.action == Action::kAnswer && !challenge[r.connection].empty()) {
          answer(h, &c, server.address, challenge[r.connection], r.size > 0 && (r.data[0] & 1));
          break;
        }
        if (++recvs > kMaxRecvsPerInput) break;
        const size_t cap = header ? wire::kMaxHeaderBytes
                                  : std::min<size_t>(readU32(r.data, r.size), kMaxFillBytes);
        size_t got = 0;
        Status st = c.recv(h.sink.data(), cap, header ? wire::kTagHeader : wire::kTagPayload,
                           r.action == Action::kAnswer ? kSendMs : kRecvMs, &got);
        wire::MsgType type;
        const bool known = st.isOk() && header && wire::peekType(h.sink.data(), got, &type).isOk();
        if (known && type == wire::MsgType::kChallenge) {
          challenge[r.connection].assign(h.sink.data(), h.sink.data() + got);
        }
        if (replaying()) {  // what the session got, for whoever reads the log
          std::fprintf(stderr, "  connection %d received %s\n", r.connection,
                       !st.isOk() ? st.toString().c_str()
                       : known    ? wire::msgTypeName(type)
                                  : (std::to_string(got) + " bytes").c_str());
        }
        if (r.action == Action::kAnswer && !challenge[r.connection].empty()) {
          answer(h, &c, server.address, challenge[r.connection], r.size > 0 && (r.data[0] & 1));
        }
        break;
      }
      case Action::kSendFailover: {
        const wire::Frame f = failoverFrame(r.data, r.size);
        (void)c.send(f.data(), f.size, wire::kTagHeader, kSendMs);
        break;
      }
      case Action::kClose:
        c.close();
        break;
    }
  }
  for (auto& c : clients) c.close();
}

void checkServer(Harness& h, Server& server, const char* which) {
  Status st = healthCheck(server.address, server.token, 0x6865616c74680000ull, h.inputs);
  TALLY_FUZZ_CHECK(st.isOk(), "after input %llu the %s reducer fails a fresh client: %s",
                   static_cast<unsigned long long>(h.inputs), which, st.toString().c_str());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kSettleMs);
  while (!server.counter.settled() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  TALLY_FUZZ_CHECK(server.counter.settled(), "after input %llu the %s reducer still holds: %s",
                   static_cast<unsigned long long>(h.inputs), which,
                   server.counter.describe().c_str());
  TALLY_FUZZ_CHECK(server.counter.internalErrors() == 0, "the %s reducer counted an internal error",
                   which);
}

}  // namespace
}  // namespace tally::fuzz::session

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tally::fuzz::session;
  Harness& h = harness();
  h.inputs++;
  if (size >= 1) {
    Server& server = (data[0] & kModeGuarded) ? h.guarded : h.open;
    if (data[0] & kModeRaw) {
      sendRaw(server.address, data + 1, size - 1);
    } else {
      runFramed(h, server, data + 1, size - 1);
    }
  }
  if (replaying() || h.inputs % kCheckEvery == 0) {
    checkServer(h, h.open, "open");
    checkServer(h, h.guarded, "token-guarded");
  }
  return 0;
}
