// SPDX-License-Identifier: Apache-2.0
// Fuzz target fuzz_wire: the reducer protocol's frame decoders (protocol/wire.h).
//
// Each input is used twice:
//  1. as a received header: peekType and every decode* run on it. A decode that succeeds must
//     have seen exactly its type's size (never one byte more or less), must leave fields that
//     pass the documented checks, and must re-encode to the same bytes (all of them for the
//     canonical messages; Reject/Error/Dismiss text and a Relay's texts are followed by padding
//     that decode does not check, so for those the fields and the texts are compared). A decode
//     that fails must leave its output untouched. An Error decodes the same with or without
//     its scope asked for.
//  2. as field values: a SliceHeader, Hello, Reason, Ack point, Ping and Relay are built from the
//     bytes, encoded and decoded again. validateSlice and describeSlice run on raw (possibly
//     invalid) type and op codes; whatever validateSlice accepts must survive encode -> decode
//     unchanged, and a Relay decodes exactly when its kinds and slot are valid.
#include <array>
#include <cstring>
#include <string>

#include "fuzz_util.h"
#include "protocol/wire.h"

namespace tally::fuzz {
namespace {

namespace wire = protocol::wire;
using wire::MsgType;

std::string bytesOf(const wire::Frame& f) {
  return std::string(reinterpret_cast<const char*>(f.data()), f.size);
}

// The one encoded size of each type, taken from the encoders themselves.
size_t encodedSize(MsgType t) {
  switch (t) {
    case MsgType::kHello:
      return wire::encodeHello(wire::Hello{}).size;
    case MsgType::kReady:
      return wire::encodeReady(wire::Ready{}).size;
    case MsgType::kReject:
      return wire::encodeReject(wire::Reason{}).size;
    case MsgType::kSlice:
      return wire::encodeSlice(wire::SliceHeader{}).size;
    case MsgType::kResult:
      return wire::encodeResult(wire::SliceHeader{}).size;
    case MsgType::kError:
      return wire::encodeError(wire::Reason{}).size;
    case MsgType::kBye:
      return wire::encodeBye().size;
    case MsgType::kChallenge:
      return wire::encodeChallenge(wire::Challenge{}).size;
    case MsgType::kAnswer:
      return wire::encodeAnswer(wire::Answer{}).size;
    case MsgType::kProof:
      return wire::encodeProof(wire::Proof{}).size;
    case MsgType::kAck:
      return wire::encodeAck(wire::AckPoint{}).size;
    case MsgType::kCommit:
      return wire::encodeCommit(wire::AckPoint{}).size;
    case MsgType::kPing:
      return wire::encodePing(wire::Ping{}).size;
    case MsgType::kPong:
      return wire::encodePong(wire::Ping{}).size;
    case MsgType::kRelay:
      return wire::encodeRelay(wire::Relay{}).size;
    case MsgType::kDismiss:
      return wire::encodeDismiss(wire::Reason{}).size;
  }
  return 0;
}

// A Relay's layout: from and a reserved word (8 bytes), the control's fixed fields (kind, change,
// flags u16, epoch, slot, reserved u32, commit calls u64, next_call u64, first_call u64, commit
// recovery epoch u32, the two text lengths, reserved u16: 48 bytes), then the address and reason
// fields, each padded. Counted here from the layout in wire_failover.cc, not taken from it.
constexpr size_t kRelayAddressAt = wire::kPreambleBytes + 8 + 48;
constexpr size_t kRelayReasonAt = kRelayAddressAt + wire::kMaxControlAddressBytes;

bool validControl(const wire::Control& c) {
  const auto kind = static_cast<uint8_t>(c.kind);
  const auto change = static_cast<uint8_t>(c.change);
  return kind >= 1 && kind <= 4 && change >= 1 && change <= 4 && c.slot < wire::kMaxReducers;
}

// Properties every successful decode shares: peekType agrees on the type, the size is the
// type's, and one byte more or less is refused by both peekType and the decode.
template <typename Decode>
void checkAccepted(const uint8_t* data, size_t size, MsgType want, Decode decode) {
  MsgType peeked;
  Status st = wire::peekType(data, size, &peeked);
  TALLY_FUZZ_CHECK(st.isOk(), "decode accepted what peekType refuses: %s", st.toString().c_str());
  TALLY_FUZZ_CHECK(peeked == want, "decode of %s accepted a %s", wire::msgTypeName(want),
                   wire::msgTypeName(peeked));
  TALLY_FUZZ_CHECK(size == encodedSize(want), "%s of %zu bytes accepted, encoded size is %zu",
                   wire::msgTypeName(want), size, encodedSize(want));
  std::array<uint8_t, wire::kMaxHeaderBytes + 1> longer{};
  std::memcpy(longer.data(), data, size);
  TALLY_FUZZ_CHECK(!decode(longer.data(), size + 1).isOk(), "one byte more accepted");
  TALLY_FUZZ_CHECK(!wire::peekType(longer.data(), size + 1, &peeked).isOk(),
                   "peekType took one byte more");
  TALLY_FUZZ_CHECK(!decode(data, size - 1).isOk(), "one byte less accepted");
}

// A message whose every byte is a field: what decodes re-encodes to the input, and a failed
// decode leaves the output as it was (compared through its encoding). True when it decoded.
template <typename T>
bool checkCanonical(const uint8_t* data, size_t size, MsgType type,
                    Status (*decode)(const uint8_t*, size_t, T*), wire::Frame (*encode)(const T&),
                    T* value) {
  const std::string before = bytesOf(encode(*value));
  if (!decode(data, size, value).isOk()) {
    TALLY_FUZZ_CHECK(bytesOf(encode(*value)) == before, "failed decode of %s wrote its output",
                     wire::msgTypeName(type));
    return false;
  }
  checkAccepted(data, size, type, [&](const uint8_t* d, size_t n) {
    T scratch;
    return decode(d, n, &scratch);
  });
  TALLY_FUZZ_CHECK(
      bytesOf(encode(*value)) == std::string(reinterpret_cast<const char*>(data), size),
      "%s does not re-encode to its bytes", wire::msgTypeName(type));
  return true;
}

void checkSliceFields(const wire::SliceHeader& h) {
  TALLY_FUZZ_CHECK(wire::validateSlice(h).isOk(), "decoded slice fails validateSlice");
  // Only all-gather and reduce-scatter pieces may be empty (protocol/wire.h SliceHeader).
  const bool all_reduce = h.kind == wire::CollKind::kAllReduce;
  TALLY_FUZZ_CHECK((h.count >= 1 || !all_reduce) && h.payloadBytes() <= wire::kMaxSliceBytes,
                   "slice of %llu elements accepted", static_cast<unsigned long long>(h.count));
  TALLY_FUZZ_CHECK(all_reduce == (h.rank_count == 0),
                   "%s slice with %llu elements per rank accepted", wire::collKindName(h.kind),
                   static_cast<unsigned long long>(h.rank_count));
  TALLY_FUZZ_CHECK(h.kind != wire::CollKind::kAllGather || h.type == DataType::kUint8,
                   "all-gather slice of %s accepted", dataTypeName(h.type));
  TALLY_FUZZ_CHECK(h.offset <= h.total_count && h.count <= h.total_count - h.offset,
                   "slice past its call accepted: %s", wire::describeSlice(h).c_str());
  const std::string text = wire::describeSlice(h);
  TALLY_FUZZ_CHECK(text.rfind("call " + std::to_string(h.seq) + " slice", 0) == 0,
                   "describeSlice says %s", text.c_str());
}

// Part 1: the input as a received header.
void decodeAsFrame(const uint8_t* data, size_t size) {
  MsgType type;
  if (wire::peekType(data, size, &type).isOk()) {
    TALLY_FUZZ_CHECK(size == encodedSize(type), "peekType took %zu bytes for a %s", size,
                     wire::msgTypeName(type));
  }

  wire::Hello hello;
  hello.rank = 0xdeadbeef;
  if (checkCanonical(data, size, MsgType::kHello, &wire::decodeHello, &wire::encodeHello, &hello)) {
    TALLY_FUZZ_CHECK(
        hello.nranks >= 1 && hello.nranks <= wire::kMaxRanks && hello.rank < hello.nranks,
        "Hello rank %u of %u accepted", hello.rank, hello.nranks);
    TALLY_FUZZ_CHECK(hello.nreducers >= 1 && hello.nreducers <= wire::kMaxReducers &&
                         hello.reducer_index < hello.nreducers,
                     "Hello reducer %u of %u accepted", hello.reducer_index, hello.nreducers);
    TALLY_FUZZ_CHECK(hello.slice_bytes >= 1 && hello.slice_bytes <= wire::kMaxSliceBytes,
                     "Hello slice size accepted");
    TALLY_FUZZ_CHECK(hello.window >= 1 && hello.window <= wire::kMaxWindow,
                     "Hello window %u accepted", hello.window);
  }

  wire::Ready ready;
  ready.window = 0xdeadbeef;
  if (checkCanonical(data, size, MsgType::kReady, &wire::decodeReady, &wire::encodeReady, &ready)) {
    TALLY_FUZZ_CHECK(ready.nranks >= 1 && ready.nranks <= wire::kMaxRanks && ready.window >= 1 &&
                         ready.window <= wire::kMaxWindow,
                     "Ready with %u ranks, window %u accepted", ready.nranks, ready.window);
  }

  for (MsgType t : {MsgType::kSlice, MsgType::kResult}) {
    wire::SliceHeader h;
    h.seq = 0xdeadbeef;
    const bool slice = t == MsgType::kSlice;
    if (checkCanonical(data, size, t, slice ? &wire::decodeSlice : &wire::decodeResult,
                       slice ? &wire::encodeSlice : &wire::encodeResult, &h)) {
      checkSliceFields(h);
    }
  }

  wire::Challenge challenge;
  challenge.nonce.fill(0xab);
  checkCanonical(data, size, MsgType::kChallenge, &wire::decodeChallenge, &wire::encodeChallenge,
                 &challenge);
  wire::Answer answer;
  answer.mac.fill(0xcd);
  checkCanonical(data, size, MsgType::kAnswer, &wire::decodeAnswer, &wire::encodeAnswer, &answer);
  wire::Proof proof;
  proof.mac.fill(0xef);
  checkCanonical(data, size, MsgType::kProof, &wire::decodeProof, &wire::encodeProof, &proof);

  for (MsgType t : {MsgType::kReject, MsgType::kError, MsgType::kDismiss}) {
    wire::ErrorScope scope = wire::ErrorScope::kCommunicator;
    auto decode = [t, &scope](const uint8_t* d, size_t n, wire::Reason* r) {
      switch (t) {
        case MsgType::kReject:
          return wire::decodeReject(d, n, r);
        case MsgType::kError:
          return wire::decodeError(d, n, r, &scope);
        default:
          return wire::decodeDismiss(d, n, r);
      }
    };
    wire::Reason reason{"untouched"};
    if (decode(data, size, &reason).isOk()) {
      checkAccepted(data, size, t, [&](const uint8_t* d, size_t n) {
        wire::Reason r;
        return decode(d, n, &r);
      });
      TALLY_FUZZ_CHECK(reason.text.size() <= wire::kMaxReasonBytes, "reason of %zu bytes",
                       reason.text.size());
      TALLY_FUZZ_CHECK(
          scope == wire::ErrorScope::kCommunicator || scope == wire::ErrorScope::kReducer,
          "Error of scope %d accepted", static_cast<int>(scope));
      if (t == MsgType::kError) {
        // A caller that does not ask for the scope decodes the same text.
        wire::Reason plain;
        TALLY_FUZZ_CHECK(wire::decodeError(data, size, &plain).isOk() && plain.text == reason.text,
                         "Error of scope %d does not decode without its scope",
                         static_cast<int>(scope));
      }
      wire::Frame f = t == MsgType::kReject  ? wire::encodeReject(reason)
                      : t == MsgType::kError ? wire::encodeError(reason, scope)
                                             : wire::encodeDismiss(reason);
      // Preamble, u16 length, u16 reserved, then the text; the padding after it is not checked.
      const size_t meaningful = wire::kPreambleBytes + 4 + reason.text.size();
      TALLY_FUZZ_CHECK(f.size == size && std::memcmp(f.data(), data, meaningful) == 0,
                       "%s does not re-encode to its bytes", wire::msgTypeName(t));
    } else {
      TALLY_FUZZ_CHECK(reason.text == "untouched", "failed decode of %s wrote its output",
                       wire::msgTypeName(t));
    }
  }

  // Ack and Commit, Ping and Pong: every byte a field (a reserved word that must be zero).
  for (MsgType t : {MsgType::kAck, MsgType::kCommit}) {
    wire::AckPoint point{0xdeadbeef, 7};
    const bool ack = t == MsgType::kAck;
    checkCanonical(data, size, t, ack ? &wire::decodeAck : &wire::decodeCommit,
                   ack ? &wire::encodeAck : &wire::encodeCommit, &point);
  }
  for (MsgType t : {MsgType::kPing, MsgType::kPong}) {
    wire::Ping ping{0xdeadbeef};
    const bool is_ping = t == MsgType::kPing;
    checkCanonical(data, size, t, is_ping ? &wire::decodePing : &wire::decodePong,
                   is_ping ? &wire::encodePing : &wire::encodePong, &ping);
  }

  wire::Relay relay;
  relay.from = 0xdeadbeef;
  if (wire::decodeRelay(data, size, &relay).isOk()) {
    checkAccepted(data, size, MsgType::kRelay, [](const uint8_t* d, size_t n) {
      wire::Relay r;
      return wire::decodeRelay(d, n, &r);
    });
    const wire::Control& c = relay.control;
    TALLY_FUZZ_CHECK(validControl(c), "Relay of kind %d, change %d, slot %u accepted",
                     static_cast<int>(c.kind), static_cast<int>(c.change), c.slot);
    TALLY_FUZZ_CHECK(c.address.size() <= wire::kMaxControlAddressBytes &&
                         c.reason.size() <= wire::kMaxControlReasonBytes,
                     "Relay texts of %zu and %zu bytes", c.address.size(), c.reason.size());
    const wire::Frame f = wire::encodeRelay(relay);
    TALLY_FUZZ_CHECK(
        f.size == size && std::memcmp(f.data(), data, kRelayAddressAt) == 0 &&
            std::memcmp(f.data() + kRelayAddressAt, data + kRelayAddressAt, c.address.size()) ==
                0 &&
            std::memcmp(f.data() + kRelayReasonAt, data + kRelayReasonAt, c.reason.size()) == 0,
        "Relay does not re-encode to its bytes");
    // Where a reducer stamps the sender.
    uint32_t from = 0;
    for (int i = 0; i < 4; ++i)
      from |= static_cast<uint32_t>(data[wire::kRelayFromOffset + i]) << (8 * i);
    TALLY_FUZZ_CHECK(from == relay.from, "Relay from %u, its bytes say %u", relay.from, from);
  } else {
    TALLY_FUZZ_CHECK(relay.from == 0xdeadbeef, "failed decode of Relay wrote its output");
  }

  if (wire::decodeBye(data, size).isOk()) {
    checkAccepted(data, size, MsgType::kBye,
                  [](const uint8_t* d, size_t n) { return wire::decodeBye(d, n); });
    TALLY_FUZZ_CHECK(
        bytesOf(wire::encodeBye()) == std::string(reinterpret_cast<const char*>(data), size),
        "Bye does not re-encode to its bytes");
  }
}

// Part 2: the input as field values, through encode and decode.
void roundTrip(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  wire::SliceHeader h;
  h.seq = in.take<uint64_t>();
  h.slice = in.take<uint32_t>();
  h.offset = in.take<uint64_t>();
  h.count = in.take<uint64_t>();
  h.total_count = in.take<uint64_t>();
  // Any byte, valid or not: validateSlice and describeSlice must cope with both.
  h.type = static_cast<DataType>(in.take<uint8_t>());
  h.op = static_cast<ReduceOp>(in.take<uint8_t>());
  h.crc = in.take<uint32_t>();
  const bool valid = wire::validateSlice(h).isOk();
  TALLY_FUZZ_CHECK(!wire::describeSlice(h).empty(), "describeSlice said nothing");
  for (MsgType t : {MsgType::kSlice, MsgType::kResult}) {
    wire::Frame f = t == MsgType::kSlice ? wire::encodeSlice(h) : wire::encodeResult(h);
    TALLY_FUZZ_CHECK(f.size == encodedSize(t), "encoded %s of %zu bytes", wire::msgTypeName(t),
                     f.size);
    wire::SliceHeader back;
    Status st = t == MsgType::kSlice ? wire::decodeSlice(f.data(), f.size, &back)
                                     : wire::decodeResult(f.data(), f.size, &back);
    TALLY_FUZZ_CHECK(st.isOk() == valid, "validateSlice says %d but decode of the encoding says %s",
                     valid, st.toString().c_str());
    if (st.isOk()) {
      TALLY_FUZZ_CHECK(back.seq == h.seq && back.slice == h.slice && back.offset == h.offset &&
                           back.count == h.count && back.total_count == h.total_count &&
                           back.type == h.type && back.op == h.op && back.crc == h.crc,
                       "%s changed in a round trip", wire::describeSlice(h).c_str());
      checkSliceFields(back);
    }
  }

  wire::Hello hello;
  hello.comm.hi = in.take<uint64_t>();
  hello.comm.lo = in.take<uint64_t>();
  hello.rank = in.take<uint32_t>();
  hello.nranks = in.take<uint32_t>();
  hello.reducer_index = in.take<uint32_t>();
  hello.nreducers = in.take<uint32_t>();
  hello.slice_bytes = in.take<uint64_t>();
  hello.slices_per_reducer = in.take<uint32_t>();
  hello.min_slice_bytes = in.take<uint32_t>();
  hello.window = in.take<uint32_t>();
  hello.checksum = (in.take<uint8_t>() & 1) != 0;
  hello.epoch = in.take<uint32_t>();
  wire::Frame f = wire::encodeHello(hello);
  wire::Hello back;
  if (wire::decodeHello(f.data(), f.size, &back).isOk()) {
    TALLY_FUZZ_CHECK(
        back.comm == hello.comm && back.rank == hello.rank && back.nranks == hello.nranks &&
            back.reducer_index == hello.reducer_index && back.nreducers == hello.nreducers &&
            back.slice_bytes == hello.slice_bytes &&
            back.slices_per_reducer == hello.slices_per_reducer &&
            back.min_slice_bytes == hello.min_slice_bytes && back.window == hello.window &&
            back.checksum == hello.checksum && back.epoch == hello.epoch,
        "Hello changed in a round trip");
  }

  wire::Reason reason{in.takeString(255)};
  const auto scope = static_cast<wire::ErrorScope>(in.take<uint8_t>() & 1);
  for (MsgType t : {MsgType::kReject, MsgType::kError, MsgType::kDismiss}) {
    wire::Frame rf = t == MsgType::kReject  ? wire::encodeReject(reason)
                     : t == MsgType::kError ? wire::encodeError(reason, scope)
                                            : wire::encodeDismiss(reason);
    wire::Reason rback;
    wire::ErrorScope sback = wire::ErrorScope::kCommunicator;
    Status st = t == MsgType::kReject  ? wire::decodeReject(rf.data(), rf.size, &rback)
                : t == MsgType::kError ? wire::decodeError(rf.data(), rf.size, &rback, &sback)
                                       : wire::decodeDismiss(rf.data(), rf.size, &rback);
    TALLY_FUZZ_CHECK(st.isOk(), "encoded %s does not decode: %s", wire::msgTypeName(t),
                     st.toString().c_str());
    TALLY_FUZZ_CHECK(rback.text == reason.text.substr(0, wire::kMaxReasonBytes),
                     "reason text changed in a round trip");
    TALLY_FUZZ_CHECK(t != MsgType::kError || sback == scope, "Error scope changed in a round trip");
  }

  const wire::AckPoint point{in.take<uint64_t>(), in.take<uint32_t>()};
  for (MsgType t : {MsgType::kAck, MsgType::kCommit}) {
    const bool ack = t == MsgType::kAck;
    const wire::Frame af = ack ? wire::encodeAck(point) : wire::encodeCommit(point);
    wire::AckPoint point_back;
    Status st = ack ? wire::decodeAck(af.data(), af.size, &point_back)
                    : wire::decodeCommit(af.data(), af.size, &point_back);
    TALLY_FUZZ_CHECK(st.isOk() && point_back == point, "%s changed in a round trip: %s",
                     wire::msgTypeName(t), st.toString().c_str());
  }
  const wire::Ping ping{in.take<uint64_t>()};
  for (MsgType t : {MsgType::kPing, MsgType::kPong}) {
    const bool is_ping = t == MsgType::kPing;
    const wire::Frame pf = is_ping ? wire::encodePing(ping) : wire::encodePong(ping);
    wire::Ping ping_back;
    Status st = is_ping ? wire::decodePing(pf.data(), pf.size, &ping_back)
                        : wire::decodePong(pf.data(), pf.size, &ping_back);
    TALLY_FUZZ_CHECK(st.isOk() && ping_back.token == ping.token, "%s changed in a round trip",
                     wire::msgTypeName(t));
  }

  // Any kind, change and slot, valid or not: the decode must take exactly the valid ones.
  wire::Relay relay;
  relay.from = in.take<uint32_t>();
  wire::Control& c = relay.control;
  c.kind = static_cast<wire::ControlKind>(in.take<uint8_t>() % 6);
  c.change = static_cast<wire::Change>(in.take<uint8_t>() % 6);
  c.epoch = in.take<uint32_t>();
  c.slot = in.take<uint32_t>() % (2 * wire::kMaxReducers);
  c.commit.calls = in.take<uint64_t>();
  c.commit.recovery_epoch = in.take<uint32_t>();
  c.next_call = in.take<uint64_t>();
  c.ok = (in.take<uint8_t>() & 1) != 0;
  c.address = in.takeString(255);
  c.reason = in.takeString(255);
  const wire::Frame rf = wire::encodeRelay(relay);
  TALLY_FUZZ_CHECK(rf.size == encodedSize(MsgType::kRelay), "encoded Relay of %zu bytes", rf.size);
  wire::Relay relay_back;
  Status st = wire::decodeRelay(rf.data(), rf.size, &relay_back);
  TALLY_FUZZ_CHECK(st.isOk() == validControl(c), "Relay of kind %d, change %d, slot %u: %s",
                   static_cast<int>(c.kind), static_cast<int>(c.change), c.slot,
                   st.toString().c_str());
  if (st.isOk()) {
    wire::Control want = c;
    want.address = want.address.substr(0, wire::kMaxControlAddressBytes);
    want.reason = want.reason.substr(0, wire::kMaxControlReasonBytes);
    TALLY_FUZZ_CHECK(relay_back.from == relay.from && relay_back.control == want,
                     "Relay changed in a round trip");
  }
}

}  // namespace
}  // namespace tally::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tally::fuzz::decodeAsFrame(data, size);
  tally::fuzz::roundTrip(data, size);
  return 0;
}
