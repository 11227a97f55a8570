// SPDX-License-Identifier: Apache-2.0
// Writes the seed corpora of the fuzz targets: valid frames and short valid sessions, made with
// the real encoders so they follow the wire format of this build.
//   tally_fuzz_seeds DIR   writes DIR/fuzz_wire/*, DIR/fuzz_tcp_wire/*, DIR/fuzz_reducer_session/*
// `make fuzz-seeds` refreshes the committed copies in test/system/fuzz/corpus/.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "protocol/wire.h"
#include "session_format.h"
#include "transport/tcp/socket.h"
#include "transport/tcp/wire.h"

namespace tally::fuzz {
namespace {

namespace wire = protocol::wire;
namespace tcp = transport::tcp;
using session::Action;
using session::InputWriter;

using Bytes = std::vector<uint8_t>;

Bytes bytesOf(const wire::Frame& f) { return Bytes(f.data(), f.data() + f.size); }

class Out {
 public:
  explicit Out(std::filesystem::path dir) : dir_(std::move(dir)) {}
  bool write(const std::string& target, const std::string& name, const Bytes& bytes) {
    std::filesystem::create_directories(dir_ / target);
    std::ofstream out(dir_ / target / name, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    ok_ = ok_ && static_cast<bool>(out);
    return ok_;
  }
  bool ok() const { return ok_; }

 private:
  std::filesystem::path dir_;
  bool ok_ = true;
};

wire::Hello hello(uint32_t rank, uint32_t nranks, uint64_t comm_lo) {
  wire::Hello h;
  h.comm = {0x5eed5eed5eed5eedull, comm_lo};
  h.rank = rank;
  h.nranks = nranks;
  h.reducer_index = 0;
  h.nreducers = 1;
  h.slice_bytes = 64 * 1024;
  h.window = 4;
  return h;
}

wire::SliceHeader slice(uint64_t count, DataType type = DataType::kFloat32,
                        ReduceOp op = ReduceOp::kSum) {
  wire::SliceHeader s;
  s.seq = 0;
  s.slice = 0;
  s.offset = 0;
  s.count = count;
  s.total_count = count;
  s.type = type;
  s.op = op;
  return s;
}

wire::Relay relay(wire::ControlKind kind, uint32_t epoch) {
  wire::Relay r;
  r.from = 2;
  r.control.kind = kind;
  r.control.change = wire::Change::kLost;
  r.control.epoch = epoch;
  r.control.slot = 3;
  r.control.commit = {1200, 1};
  r.control.next_call = 1234;
  r.control.address = "10.0.0.9:2222";
  r.control.reason = "connection reset";
  return r;
}

void wireSeeds(Out* out) {
  const std::string t = "fuzz_wire";
  out->write(t, "hello", bytesOf(wire::encodeHello(hello(1, 4, 1))));
  wire::Ready ready;
  ready.comm = {1, 2};
  ready.nranks = 4;
  ready.window = 16;
  out->write(t, "ready", bytesOf(wire::encodeReady(ready)));
  out->write(t, "reject",
             bytesOf(wire::encodeReject({"rank 1 says 3 ranks, earlier members said 4"})));
  out->write(t, "error", bytesOf(wire::encodeError({"rank 0 (peer 127.0.0.1:4000) was lost"})));
  out->write(t, "slice_f32_sum", bytesOf(wire::encodeSlice(slice(1000))));
  wire::SliceHeader mid = slice(8192, DataType::kBfloat16, ReduceOp::kMax);
  mid.seq = 7;
  mid.slice = 3;
  mid.offset = 3 * 8192;
  mid.total_count = 100000;
  out->write(t, "slice_bf16_max", bytesOf(wire::encodeSlice(mid)));
  out->write(t, "result", bytesOf(wire::encodeResult(mid)));
  out->write(t, "bye", bytesOf(wire::encodeBye()));
  wire::Hello checked = hello(0, 2, 3);
  checked.checksum = true;
  out->write(t, "hello_checksum", bytesOf(wire::encodeHello(checked)));
  wire::SliceHeader crc = slice(100);
  crc.crc = 0x1edc6f41;
  out->write(t, "slice_crc", bytesOf(wire::encodeSlice(crc)));
  // Wire v4: a reduce-scatter slice, an all-gather piece and an empty one, a narrowed result.
  wire::SliceHeader rs = slice(500, DataType::kInt32, ReduceOp::kMax);
  rs.kind = wire::CollKind::kReduceScatter;
  rs.rank_count = 300;
  rs.window_offset = 100;
  out->write(t, "slice_reduce_scatter", bytesOf(wire::encodeSlice(rs)));
  wire::SliceHeader ag = slice(200, DataType::kUint8);
  ag.kind = wire::CollKind::kAllGather;
  ag.total_count = 600;
  ag.rank_count = 300;
  out->write(t, "slice_all_gather", bytesOf(wire::encodeSlice(ag)));
  ag.count = 0;
  out->write(t, "slice_all_gather_empty", bytesOf(wire::encodeSlice(ag)));
  rs.offset = 200;
  rs.count = 0;
  out->write(t, "result_reduce_scatter_empty", bytesOf(wire::encodeResult(rs)));
  wire::Challenge challenge;
  challenge.auth_required = true;
  for (size_t i = 0; i < challenge.nonce.size(); ++i) challenge.nonce[i] = static_cast<uint8_t>(i);
  out->write(t, "challenge", bytesOf(wire::encodeChallenge(challenge)));
  wire::Answer answer;
  answer.nonce.fill(0x11);
  answer.mac.fill(0x22);
  out->write(t, "answer", bytesOf(wire::encodeAnswer(answer)));
  wire::Proof proof;
  proof.mac.fill(0x33);
  out->write(t, "proof", bytesOf(wire::encodeProof(proof)));
  // Wire v6: failover.
  wire::Hello joining = hello(2, 4, 13);
  joining.epoch = 3;
  out->write(t, "hello_epoch", bytesOf(wire::encodeHello(joining)));
  out->write(t, "error_reducer_scope",
             bytesOf(wire::encodeError({"rank 2 (peer 127.0.0.1:4000) was lost: reset"},
                                       wire::ErrorScope::kReducer)));
  out->write(t, "ack", bytesOf(wire::encodeAck({1234, 2})));
  out->write(t, "commit", bytesOf(wire::encodeCommit({1200, 1})));
  out->write(t, "ping", bytesOf(wire::encodePing({0x70696e67})));
  out->write(t, "pong", bytesOf(wire::encodePong({0x70696e67})));
  out->write(t, "relay_decide", bytesOf(wire::encodeRelay(relay(wire::ControlKind::kDecide, 3))));
  wire::Relay report = relay(wire::ControlKind::kReport, 1);
  report.control.ok = false;
  out->write(t, "relay_report", bytesOf(wire::encodeRelay(report)));
  out->write(t, "dismiss", bytesOf(wire::encodeDismiss({"no Pong within 10000 ms"})));
}

Bytes tagged(uint8_t subject, const uint8_t* p, size_t n) {
  Bytes b{subject};
  b.insert(b.end(), p, p + n);
  return b;
}

void tcpSeeds(Out* out) {
  const std::string t = "fuzz_tcp_wire";
  tcp::Hello h;
  h.index = 0;
  h.count = 2;
  h.connection_id = 0x1234;
  h.min_stripe = 64 * 1024;
  uint8_t hb[tcp::kHelloBytes];
  tcp::encodeHello(h, hb);
  out->write(t, "hello", tagged(0, hb, sizeof(hb)));
  tcp::Header m;
  m.tag = wire::kTagHeader;
  m.size = 48;
  uint8_t mb[tcp::kHeaderBytes];
  tcp::encodeHeader(m, mb);
  out->write(t, "header", tagged(1, mb, sizeof(mb)));
  for (const char* host : {"127.0.0.1", "::1"}) {
    tcp::SockAddr addr;
    transport::ConnectHandle handle{};
    if (tcp::resolve(host, 5555, false, &addr).isOk() && tcp::encodeHandle(addr, &handle).isOk()) {
      out->write(t, std::string("handle_v") + (addr.family() == AF_INET ? "4" : "6"),
                 tagged(2, handle.bytes, tcp::kHandleBytes));
    }
  }
  // u64 size, i8 streams, u64 min_stripe
  uint8_t stripes[17] = {};
  const uint64_t size = 1 << 20;
  const uint64_t min_stripe = 64 * 1024;
  for (int i = 0; i < 8; ++i) stripes[i] = static_cast<uint8_t>(size >> (8 * i));
  stripes[8] = 4;
  for (int i = 0; i < 8; ++i) stripes[9 + i] = static_cast<uint8_t>(min_stripe >> (8 * i));
  out->write(t, "stripes", tagged(3, stripes, sizeof(stripes)));
  for (const std::string text : {"127.0.0.1:5555", "[::1]:80", ":9400"}) {
    out->write(t, "hostport_" + std::to_string(text.size()),
               tagged(4, reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  }
}

void frame(InputWriter* in, int conn, const wire::Frame& f) {
  in->record(Action::kSendHeader, conn, f.data(), f.size);
}

// A whole call on `ranks` connections: the opening (with the job token when `guarded`), Hello,
// Ready, one slice each, the result, Bye when `bye`.
// With `gather`, the call is an all-gather of 1000 bytes per rank over the whole vector: each
// rank's piece of the one slice is its own part, and each gets the whole slice back.
Bytes framedCall(int ranks, uint64_t comm, bool bye, bool guarded = false, bool gather = false) {
  InputWriter in(false, guarded);
  for (int r = 0; r < ranks; ++r) {
    in.record(guarded ? Action::kAnswer : Action::kRecvHeader, r);  // the Challenge
    frame(&in, r, wire::encodeHello(hello(r, ranks, comm)));
  }
  for (int r = 0; r < ranks; ++r) {
    if (guarded) in.record(Action::kRecvHeader, r);  // Proof
    in.record(Action::kRecvHeader, r);               // Ready
  }
  wire::SliceHeader s = slice(1000);
  if (gather) {
    s = slice(1000 * static_cast<uint64_t>(ranks), DataType::kUint8);
    s.kind = wire::CollKind::kAllGather;
    s.rank_count = 1000;
  }
  for (int r = 0; r < ranks; ++r) {
    wire::SliceHeader mine = s;
    if (gather) {
      mine.offset = 1000 * static_cast<uint64_t>(r);
      mine.count = 1000;
    }
    frame(&in, r, wire::encodeSlice(mine));
    in.recordU32(Action::kSendFill, r, static_cast<uint32_t>(mine.payloadBytes()));
  }
  for (int r = 0; r < ranks; ++r) {
    in.record(Action::kRecvHeader, r);
    in.recordU32(Action::kRecvPayload, r, static_cast<uint32_t>(s.payloadBytes()));
    if (bye) frame(&in, r, wire::encodeBye());
  }
  return in.bytes();
}

// Bytes as the TCP transport frames one message: header (magic, tag, size), then the bytes.
void rawMessage(Bytes* b, int tag, const Bytes& body) {
  tcp::Header m;
  m.tag = tag;
  m.size = body.size();
  uint8_t mb[tcp::kHeaderBytes];
  tcp::encodeHeader(m, mb);
  b->insert(b->end(), mb, mb + sizeof(mb));
  b->insert(b->end(), body.begin(), body.end());
}

// Two ranks after their first call: both Ack it and read the Commit, rank 1 Pings, each relays
// a failover message to the other (the rank 0 one as a kSendFailover record), and rank 1
// dismisses the reducer; both read on to the Error.
Bytes failoverSession(uint64_t comm) {
  InputWriter in(false);
  for (int r = 0; r < 2; ++r) {
    in.record(Action::kRecvHeader, r);  // the Challenge
    frame(&in, r, wire::encodeHello(hello(r, 2, comm)));
  }
  for (int r = 0; r < 2; ++r) in.record(Action::kRecvHeader, r);  // Ready
  for (int r = 0; r < 2; ++r) frame(&in, r, wire::encodeAck({1, 0}));
  for (int r = 0; r < 2; ++r) in.record(Action::kRecvHeader, r);  // Commit
  frame(&in, 1, wire::encodePing({7}));
  in.record(Action::kRecvHeader, 1);  // Pong
  frame(&in, 1, wire::encodeRelay(relay(wire::ControlKind::kSuspect, 0)));
  in.record(Action::kRecvHeader, 0);
  // kSendFailover: Relay, from 0, Propose, Lost, epoch 1, slot 0, then zeros.
  const uint8_t propose[] = {
      static_cast<uint8_t>(session::Failover::kRelay), 0, 0, 0, 0, 1, 0, 1, 0, 0, 0};
  in.record(Action::kSendFailover, 0, propose, sizeof(propose));
  in.record(Action::kRecvHeader, 1);
  const std::string why = "\x03no Pong within 10000 ms";  // kSendFailover: Dismiss
  in.record(Action::kSendFailover, 1, why.data(), why.size());
  in.record(Action::kRecvHeader, 0);  // the Error, of reducer scope
  return in.bytes();
}

void sessionSeeds(Out* out) {
  const std::string t = "fuzz_reducer_session";
  out->write(t, "failover_two_ranks", failoverSession(14));
  {
    InputWriter in(false);  // every failover message before Hello, one connection each
    in.record(Action::kRecvHeader, 0);
    frame(&in, 0, wire::encodeAck({1, 0}));
    in.record(Action::kRecvHeader, 1);
    frame(&in, 1, wire::encodePing({1}));
    in.record(Action::kRecvHeader, 2);
    frame(&in, 2, wire::encodeRelay(relay(wire::ControlKind::kDecide, 1)));
    in.record(Action::kRecvHeader, 3);
    frame(&in, 3, wire::encodeDismiss({"go away"}));
    for (int c = 0; c < 4; ++c) in.record(Action::kRecvHeader, c);
    out->write(t, "failover_before_hello", in.bytes());
  }
  {
    InputWriter in(false, true);  // a Ping in place of the job token's Answer
    in.record(Action::kRecvHeader, 0);
    frame(&in, 0, wire::encodePing({1}));
    in.record(Action::kRecvHeader, 0);
    out->write(t, "guarded_ping_before_answer", in.bytes());
  }
  {
    InputWriter in(false);  // an Ack before the communicator formed
    in.record(Action::kRecvHeader, 0);
    frame(&in, 0, wire::encodeHello(hello(0, 2, 15)));
    frame(&in, 0, wire::encodeAck({1, 0}));
    in.record(Action::kRecvHeader, 0);
    out->write(t, "ack_before_ready", in.bytes());
  }
  {
    InputWriter in(false);  // rank 1 floods rank 0 with relays past its allowance
    for (int r = 0; r < 2; ++r) {
      in.record(Action::kRecvHeader, r);
      frame(&in, r, wire::encodeHello(hello(r, 2, 16)));
    }
    for (int r = 0; r < 2; ++r) in.record(Action::kRecvHeader, r);  // Ready: it formed
    const wire::Frame suspect = wire::encodeRelay(relay(wire::ControlKind::kSuspect, 0));
    for (int i = 0; i < 70; ++i) frame(&in, 1, suspect);
    in.record(Action::kRecvHeader, 0);
    out->write(t, "relay_flood", in.bytes());
  }
  {
    InputWriter in(false);  // a joining reducer: the ranks disagree on the epoch
    in.record(Action::kRecvHeader, 0);
    wire::Hello h0 = hello(0, 2, 17);
    h0.epoch = 2;
    frame(&in, 0, wire::encodeHello(h0));
    wire::Hello h1 = hello(1, 2, 17);
    h1.epoch = 3;
    frame(&in, 1, wire::encodeHello(h1));
    in.record(Action::kRecvHeader, 1);
    in.record(Action::kRecvHeader, 1);
    out->write(t, "epoch_mismatch", in.bytes());
  }
  out->write(t, "one_rank_call", framedCall(1, 1, true));
  out->write(t, "two_rank_call", framedCall(2, 2, true));
  out->write(t, "two_rank_all_gather", framedCall(2, 12, true, false, true));
  out->write(t, "two_rank_call_lost", framedCall(2, 3, false));
  out->write(t, "guarded_one_rank_call", framedCall(1, 8, true, true));
  out->write(t, "guarded_two_rank_call", framedCall(2, 9, true, true));
  {
    InputWriter in(false, true);  // a wrong MAC, then a Hello anyway
    const uint8_t spoil = 1;
    in.record(Action::kAnswer, 0, &spoil, 1);
    frame(&in, 0, wire::encodeHello(hello(0, 1, 10)));
    in.record(Action::kRecvHeader, 0);
    out->write(t, "guarded_wrong_mac", in.bytes());
  }
  {
    InputWriter in(false, true);  // no Answer: a Hello straight away
    frame(&in, 0, wire::encodeHello(hello(0, 1, 11)));
    in.record(Action::kRecvHeader, 0);
    in.record(Action::kRecvHeader, 0);
    out->write(t, "guarded_no_answer", in.bytes());
  }
  {
    InputWriter in(false);  // a worker with a token meets a reducer without one
    in.record(Action::kAnswer, 0);
    in.record(Action::kRecvHeader, 0);
    out->write(t, "answer_to_open_reducer", in.bytes());
  }
  {
    InputWriter in(false);
    frame(&in, 0, wire::encodeSlice(slice(10)));
    out->write(t, "slice_before_hello", in.bytes());
  }
  {
    InputWriter in(false);
    in.record(Action::kRecvHeader, 0);  // Challenge
    frame(&in, 0, wire::encodeHello(hello(0, 1, 4)));
    frame(&in, 0, wire::encodeHello(hello(0, 1, 4)));
    in.record(Action::kRecvHeader, 0);
    out->write(t, "second_hello", in.bytes());
  }
  {
    InputWriter in(false);              // the second rank disagrees on the count
    in.record(Action::kRecvHeader, 0);  // Challenge
    frame(&in, 0, wire::encodeHello(hello(0, 2, 5)));
    frame(&in, 1, wire::encodeHello(hello(1, 2, 5)));
    frame(&in, 0, wire::encodeSlice(slice(100)));
    in.recordU32(Action::kSendFill, 0, 400);
    frame(&in, 1, wire::encodeSlice(slice(200)));
    in.recordU32(Action::kSendFill, 1, 800);
    in.record(Action::kRecvHeader, 0);
    in.record(Action::kRecvHeader, 0);
    out->write(t, "mismatch", in.bytes());
  }
  {
    InputWriter in(false);  // short payload, then a message with a tag nobody waits for
    frame(&in, 0, wire::encodeHello(hello(0, 1, 6)));
    frame(&in, 0, wire::encodeSlice(slice(100)));
    in.recordU32(Action::kSendFill, 0, 399);
    uint8_t tagged_msg[8] = {7, 0, 0, 0, 1, 2, 3, 4};
    in.record(Action::kSendTagged, 1, tagged_msg, sizeof(tagged_msg));
    out->write(t, "short_payload_wrong_tag", in.bytes());
  }
  {
    InputWriter in(true);  // below the transport: stream hello, then framed messages
    tcp::Hello h;
    h.index = 0;
    h.count = 1;
    h.connection_id = 42;
    h.min_stripe = 64 * 1024;
    uint8_t hb[tcp::kHelloBytes];
    tcp::encodeHello(h, hb);
    in.append(hb, sizeof(hb));
    Bytes b;
    rawMessage(&b, wire::kTagHeader, bytesOf(wire::encodeHello(hello(0, 1, 7))));
    const wire::SliceHeader s = slice(16);
    rawMessage(&b, wire::kTagHeader, bytesOf(wire::encodeSlice(s)));
    rawMessage(&b, wire::kTagPayload, Bytes(s.payloadBytes(), 0x3f));
    rawMessage(&b, wire::kTagHeader, bytesOf(wire::encodeBye()));
    in.append(b.data(), b.size());
    out->write(t, "raw_one_rank_call", in.bytes());
  }
}

}  // namespace
}  // namespace tally::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  tally::fuzz::Out out{std::filesystem::path(argv[1])};
  tally::fuzz::wireSeeds(&out);
  tally::fuzz::tcpSeeds(&out);
  tally::fuzz::sessionSeeds(&out);
  if (!out.ok()) {
    std::fprintf(stderr, "tally_fuzz_seeds: cannot write under %s\n", argv[1]);
    return 1;
  }
  std::printf("tally_fuzz_seeds: wrote seeds under %s\n", argv[1]);
  return 0;
}
