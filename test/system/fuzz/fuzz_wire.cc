// Fuzz target fuzz_wire: the reducer protocol's frame decoders (protocol/wire.h).
//
// Each input is used twice:
//  1. as a received header: peekType and every decode* run on it. A decode that succeeds must
//     have seen exactly its type's size (never one byte more or less), must leave fields that
//     pass the documented checks, and must re-encode to the same bytes (all of them for the
//     canonical messages; Reject/Error text is followed by padding that decode does not check,
//     so for those the length, reserved word and text are compared). A decode that fails must
//     leave its output untouched.
//  2. as field values: a SliceHeader, Hello and Reason are built from the bytes, encoded and
//     decoded again. validateSlice and describeSlice run on raw (possibly invalid) type and op
//     codes; whatever validateSlice accepts must survive encode -> decode unchanged.
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
  }
  return 0;
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

  for (MsgType t : {MsgType::kReject, MsgType::kError}) {
    auto decode = [t](const uint8_t* d, size_t n, wire::Reason* r) {
      return t == MsgType::kReject ? wire::decodeReject(d, n, r) : wire::decodeError(d, n, r);
    };
    wire::Reason reason{"untouched"};
    if (decode(data, size, &reason).isOk()) {
      checkAccepted(data, size, t, [&](const uint8_t* d, size_t n) {
        wire::Reason r;
        return decode(d, n, &r);
      });
      TALLY_FUZZ_CHECK(reason.text.size() <= wire::kMaxReasonBytes, "reason of %zu bytes",
                       reason.text.size());
      wire::Frame f =
          t == MsgType::kReject ? wire::encodeReject(reason) : wire::encodeError(reason);
      // Preamble, u16 length, u16 reserved, then the text; the padding after it is not checked.
      const size_t meaningful = wire::kPreambleBytes + 4 + reason.text.size();
      TALLY_FUZZ_CHECK(f.size == size && std::memcmp(f.data(), data, meaningful) == 0,
                       "%s does not re-encode to its bytes", wire::msgTypeName(t));
    } else {
      TALLY_FUZZ_CHECK(reason.text == "untouched", "failed decode of %s wrote its output",
                       wire::msgTypeName(t));
    }
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
  wire::Frame f = wire::encodeHello(hello);
  wire::Hello back;
  if (wire::decodeHello(f.data(), f.size, &back).isOk()) {
    TALLY_FUZZ_CHECK(back.comm == hello.comm && back.rank == hello.rank &&
                         back.nranks == hello.nranks && back.reducer_index == hello.reducer_index &&
                         back.nreducers == hello.nreducers &&
                         back.slice_bytes == hello.slice_bytes &&
                         back.slices_per_reducer == hello.slices_per_reducer &&
                         back.min_slice_bytes == hello.min_slice_bytes &&
                         back.window == hello.window &&
                         back.checksum == hello.checksum,
                     "Hello changed in a round trip");
  }

  wire::Reason reason{in.takeString(255)};
  for (MsgType t : {MsgType::kReject, MsgType::kError}) {
    wire::Frame rf = t == MsgType::kReject ? wire::encodeReject(reason) : wire::encodeError(reason);
    wire::Reason rback;
    Status st = t == MsgType::kReject ? wire::decodeReject(rf.data(), rf.size, &rback)
                                      : wire::decodeError(rf.data(), rf.size, &rback);
    TALLY_FUZZ_CHECK(st.isOk(), "encoded %s does not decode: %s", wire::msgTypeName(t),
                     st.toString().c_str());
    TALLY_FUZZ_CHECK(rback.text == reason.text.substr(0, wire::kMaxReasonBytes),
                     "reason text changed in a round trip");
  }
}

}  // namespace
}  // namespace tally::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tally::fuzz::decodeAsFrame(data, size);
  tally::fuzz::roundTrip(data, size);
  return 0;
}
