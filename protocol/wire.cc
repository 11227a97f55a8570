// SPDX-License-Identifier: Apache-2.0
#include "protocol/wire.h"

#include "protocol/codec.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>


namespace tally::protocol::wire {
using codec::Reader;
using codec::Writer;
using codec::start;
using codec::expect;

namespace {

// Body sizes (after the preamble) of each message type. Fixed per type: decode insists on them.
// comm, 4 x u32, slice_bytes, slices_per_reducer, min_slice_bytes, window, flags, epoch,
// reserved
constexpr size_t kHelloBody = 16 + 4 * 4 + 8 + 4 + 4 + 4 + 4 + 4 + 4;
constexpr size_t kReadyBody = 16 + 4 + 4;
// length, scope (Error; 0 for the others), text
constexpr size_t kReasonBody = 2 + 2 + kMaxReasonBytes;
// seq, slice, kind, reserved (3), offset, count, total_count, type, op, reserved (2), crc,
// rank_count, window_offset, ack calls, ack recovery epoch, reserved.
constexpr size_t kSliceBody = 8 + 4 + 1 + 3 + 8 + 8 + 8 + 1 + 1 + 2 + 4 + 8 + 8 + 8 + 4 + 4;
constexpr size_t kByeBody = 0;
constexpr size_t kChallengeBody = 4 + 4 + auth::kNonceBytes;  // flags, reserved, nonce
constexpr size_t kAnswerBody = auth::kNonceBytes + auth::kMacBytes;
constexpr size_t kProofBody = auth::kMacBytes;
// Flag bits; any other bit set is refused.
constexpr uint32_t kHelloChecksum = 1u << 0;
constexpr uint32_t kChallengeAuth = 1u << 0;
static_assert(kPreambleBytes + kReasonBody <= kMaxHeaderBytes);
static_assert(kPreambleBytes + kHelloBody <= kMaxHeaderBytes);
static_assert(kPreambleBytes + kAnswerBody <= kMaxHeaderBytes);

size_t bodySize(MsgType t) {
  switch (t) {
    case MsgType::kHello: return kHelloBody;
    case MsgType::kReady: return kReadyBody;
    case MsgType::kReject:
    case MsgType::kError:
    case MsgType::kDismiss: return kReasonBody;
    case MsgType::kSlice:
    case MsgType::kResult: return kSliceBody;
    case MsgType::kBye: return kByeBody;
    case MsgType::kChallenge: return kChallengeBody;
    case MsgType::kAnswer: return kAnswerBody;
    case MsgType::kProof: return kProofBody;
    case MsgType::kAck:
    case MsgType::kCommit:
    case MsgType::kPing:
    case MsgType::kPong:
    case MsgType::kRelay: return codec::failoverBodySize(t);
  }
  return 0;
}

bool isKnownType(uint8_t t) { return t >= 1 && t <= 16; }

void putComm(Writer* w, const CommId& id) {
  w->u64(id.hi);
  w->u64(id.lo);
}
CommId getComm(Reader* r) {
  CommId id;
  id.hi = r->u64();
  id.lo = r->u64();
  return id;
}

Frame encodeReason(MsgType t, const Reason& m, uint16_t scope = 0) {
  Frame f;
  Writer w(&f);
  start(t, &w);
  size_t n = std::min(m.text.size(), kMaxReasonBytes);
  w.u16(static_cast<uint16_t>(n));
  w.u16(scope);
  w.raw(m.text.data(), n);
  w.zeros(kMaxReasonBytes - n);
  return f;
}

Frame encodeSliceAs(MsgType t, const SliceHeader& m) {
  Frame f;
  Writer w(&f);
  start(t, &w);
  w.u64(m.seq);
  w.u32(m.slice);
  w.u8(static_cast<uint8_t>(m.kind));
  w.zeros(3);
  w.u64(m.offset);
  w.u64(m.count);
  w.u64(m.total_count);
  w.u8(static_cast<uint8_t>(m.type));
  w.u8(static_cast<uint8_t>(m.op));
  w.u16(0);
  w.u32(m.crc);
  w.u64(m.rank_count);
  w.u64(m.window_offset);
  w.u64(m.ack.calls);
  w.u32(m.ack.recovery_epoch);
  w.u32(0);
  return f;
}

// `scope`: where an Error's scope goes (null: the field must be 0).
Status decodeReason(const uint8_t* data, size_t size, MsgType t, Reason* out,
                    ErrorScope* scope = nullptr) {
  TALLY_RETURN_IF_ERROR(expect(data, size, t));
  Reader r(data + kPreambleBytes);
  uint16_t n = r.u16();
  uint16_t field = r.u16();
  const uint16_t max_field = scope != nullptr ? static_cast<uint16_t>(ErrorScope::kReducer) : 0;
  if (n > kMaxReasonBytes || field > max_field) {
    return Status::remote(std::string("malformed ") + msgTypeName(t) + " message: text length " +
                          std::to_string(n) + ", scope " + std::to_string(field));
  }
  const uint8_t* text = r.take(kMaxReasonBytes);
  out->text.assign(reinterpret_cast<const char*>(text), n);
  if (scope != nullptr) *scope = static_cast<ErrorScope>(field);
  return Status::ok();
}

Status decodeSliceAs(const uint8_t* data, size_t size, MsgType t, SliceHeader* out) {
  TALLY_RETURN_IF_ERROR(expect(data, size, t));
  Reader r(data + kPreambleBytes);
  SliceHeader m;
  m.seq = r.u64();
  m.slice = r.u32();
  const uint8_t kind = r.u8();
  const uint8_t* pad1 = r.take(3);
  m.offset = r.u64();
  m.count = r.u64();
  m.total_count = r.u64();
  uint8_t type = r.u8();
  uint8_t op = r.u8();
  uint16_t pad2 = r.u16();
  m.crc = r.u32();
  m.rank_count = r.u64();
  m.window_offset = r.u64();
  m.ack.calls = r.u64();
  m.ack.recovery_epoch = r.u32();
  const uint32_t pad3 = r.u32();
  if (pad1[0] != 0 || pad1[1] != 0 || pad1[2] != 0 || pad2 != 0 || pad3 != 0) {
    return Status::remote(std::string("malformed ") + msgTypeName(t) +
                          " header: reserved bytes are not zero");
  }
  if (!isValidDataType(type)) {
    return Status::remote(std::string(msgTypeName(t)) + " header has unknown data type " +
                          std::to_string(type));
  }
  if (!isValidReduceOp(op)) {
    return Status::remote(std::string(msgTypeName(t)) + " header has unknown reduction op " +
                          std::to_string(op));
  }
  if (kind > static_cast<uint8_t>(CollKind::kReduceScatter)) {
    return Status::remote(std::string(msgTypeName(t)) + " header has unknown kind " +
                          std::to_string(kind));
  }
  m.kind = static_cast<CollKind>(kind);
  m.type = static_cast<DataType>(type);
  m.op = static_cast<ReduceOp>(op);
  TALLY_RETURN_IF_ERROR(validateSlice(m));
  *out = m;
  return Status::ok();
}

}  // namespace

Status codec::expect(const uint8_t* data, size_t size, MsgType want) {
  MsgType got;
  TALLY_RETURN_IF_ERROR(peekType(data, size, &got));
  if (got != want) {
    return Status::remote(std::string("expected a ") + msgTypeName(want) + " message, got " +
                          msgTypeName(got));
  }
  return Status::ok();
}

const char* msgTypeName(MsgType t) {
  switch (t) {
    case MsgType::kHello: return "Hello";
    case MsgType::kReady: return "Ready";
    case MsgType::kReject: return "Reject";
    case MsgType::kSlice: return "Slice";
    case MsgType::kResult: return "Result";
    case MsgType::kError: return "Error";
    case MsgType::kBye: return "Bye";
    case MsgType::kChallenge: return "Challenge";
    case MsgType::kAnswer: return "Answer";
    case MsgType::kProof: return "Proof";
    case MsgType::kAck: return "Ack";
    case MsgType::kCommit: return "Commit";
    case MsgType::kPing: return "Ping";
    case MsgType::kPong: return "Pong";
    case MsgType::kRelay: return "Relay";
    case MsgType::kDismiss: return "Dismiss";
  }
  return "unknown";
}

std::string CommId::toString() const {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(hi),
                static_cast<unsigned long long>(lo));
  return buf;
}

Frame encodeHello(const Hello& m) {
  Frame f;
  Writer w(&f);
  start(MsgType::kHello, &w);
  putComm(&w, m.comm);
  w.u32(m.rank);
  w.u32(m.nranks);
  w.u32(m.reducer_index);
  w.u32(m.nreducers);
  w.u64(m.slice_bytes);
  w.u32(m.slices_per_reducer);
  w.u32(m.min_slice_bytes);
  w.u32(m.window);
  w.u32(m.checksum ? kHelloChecksum : 0);
  w.u32(m.epoch);
  w.u32(0);
  return f;
}

Frame encodeReady(const Ready& m) {
  Frame f;
  Writer w(&f);
  start(MsgType::kReady, &w);
  putComm(&w, m.comm);
  w.u32(m.nranks);
  w.u32(m.window);
  return f;
}

Frame encodeReject(const Reason& m) { return encodeReason(MsgType::kReject, m); }
Frame encodeError(const Reason& m, ErrorScope scope) {
  return encodeReason(MsgType::kError, m, static_cast<uint16_t>(scope));
}
Frame encodeDismiss(const Reason& m) { return encodeReason(MsgType::kDismiss, m); }
Frame encodeSlice(const SliceHeader& m) { return encodeSliceAs(MsgType::kSlice, m); }
Frame encodeResult(const SliceHeader& m) { return encodeSliceAs(MsgType::kResult, m); }

Frame encodeBye() {
  Frame f;
  Writer w(&f);
  start(MsgType::kBye, &w);
  return f;
}

Status peekType(const uint8_t* data, size_t size, MsgType* type) {
  if (data == nullptr || size < kPreambleBytes) {
    return Status::remote("truncated message: " + std::to_string(size) + " bytes");
  }
  Reader r(data);
  uint32_t magic = r.u32();
  uint16_t version = r.u16();
  uint8_t t = r.u8();
  uint8_t reserved = r.u8();
  if (magic != kMagic) {
    char buf[80];
    std::snprintf(buf, sizeof(buf), "bad magic 0x%08x (not a Tally reducer peer?)", magic);
    return Status::remote(buf);
  }
  if (version != kVersion) {
    return Status::remote("protocol version " + std::to_string(version) + ", this side speaks " +
                          std::to_string(kVersion));
  }
  if (!isKnownType(t) || reserved != 0) {
    return Status::remote("unknown message type " + std::to_string(t));
  }
  MsgType mt = static_cast<MsgType>(t);
  size_t want = kPreambleBytes + bodySize(mt);
  if (size != want) {
    return Status::remote(std::string(msgTypeName(mt)) + " message of " + std::to_string(size) +
                          " bytes, expected " + std::to_string(want));
  }
  *type = mt;
  return Status::ok();
}

Status decodeHello(const uint8_t* data, size_t size, Hello* out) {
  TALLY_RETURN_IF_ERROR(expect(data, size, MsgType::kHello));
  Reader r(data + kPreambleBytes);
  Hello m;
  m.comm = getComm(&r);
  m.rank = r.u32();
  m.nranks = r.u32();
  m.reducer_index = r.u32();
  m.nreducers = r.u32();
  m.slice_bytes = r.u64();
  m.slices_per_reducer = r.u32();
  m.min_slice_bytes = r.u32();
  m.window = r.u32();
  const uint32_t flags = r.u32();
  m.epoch = r.u32();
  const uint32_t reserved = r.u32();
  if ((flags & ~kHelloChecksum) != 0 || reserved != 0) {
    return Status::remote("malformed Hello: unknown flags " + std::to_string(flags));
  }
  m.checksum = (flags & kHelloChecksum) != 0;
  if (m.nranks < 1 || m.nranks > kMaxRanks || m.rank >= m.nranks) {
    return Status::remote("Hello with rank " + std::to_string(m.rank) + " of " +
                          std::to_string(m.nranks) + " ranks");
  }
  if (m.nreducers < 1 || m.nreducers > kMaxReducers || m.reducer_index >= m.nreducers) {
    return Status::remote("Hello for reducer " + std::to_string(m.reducer_index) + " of " +
                          std::to_string(m.nreducers));
  }
  if (m.slice_bytes < 1 || m.slice_bytes > kMaxSliceBytes) {
    return Status::remote("Hello with slice size " + std::to_string(m.slice_bytes) +
                          " bytes (1 to " + std::to_string(kMaxSliceBytes) + ")");
  }
  if (m.slices_per_reducer < 1 || m.slices_per_reducer > kMaxSlicesPerReducer ||
      m.min_slice_bytes < 1 || m.min_slice_bytes > kMaxSliceBytes) {
    return Status::remote("Hello with slice plan " + std::to_string(m.slices_per_reducer) +
                          " per reducer, at least " + std::to_string(m.min_slice_bytes) +
                          " bytes (1 to " + std::to_string(kMaxSlicesPerReducer) + ", 1 to " +
                          std::to_string(kMaxSliceBytes) + ")");
  }
  if (m.window < 1 || m.window > kMaxWindow) {
    return Status::remote("Hello with window " + std::to_string(m.window));
  }
  *out = m;
  return Status::ok();
}

Status decodeReady(const uint8_t* data, size_t size, Ready* out) {
  TALLY_RETURN_IF_ERROR(expect(data, size, MsgType::kReady));
  Reader r(data + kPreambleBytes);
  Ready m;
  m.comm = getComm(&r);
  m.nranks = r.u32();
  m.window = r.u32();
  if (m.nranks < 1 || m.nranks > kMaxRanks || m.window < 1 || m.window > kMaxWindow) {
    return Status::remote("malformed Ready: " + std::to_string(m.nranks) + " ranks, window " +
                          std::to_string(m.window));
  }
  *out = m;
  return Status::ok();
}

Status decodeReject(const uint8_t* data, size_t size, Reason* out) {
  return decodeReason(data, size, MsgType::kReject, out);
}
Status decodeError(const uint8_t* data, size_t size, Reason* out, ErrorScope* scope) {
  ErrorScope s = ErrorScope::kCommunicator;
  TALLY_RETURN_IF_ERROR(decodeReason(data, size, MsgType::kError, out, &s));
  if (scope != nullptr) *scope = s;
  return Status::ok();
}
Status decodeDismiss(const uint8_t* data, size_t size, Reason* out) {
  return decodeReason(data, size, MsgType::kDismiss, out);
}
Status decodeSlice(const uint8_t* data, size_t size, SliceHeader* out) {
  return decodeSliceAs(data, size, MsgType::kSlice, out);
}
Status decodeResult(const uint8_t* data, size_t size, SliceHeader* out) {
  return decodeSliceAs(data, size, MsgType::kResult, out);
}
Status decodeBye(const uint8_t* data, size_t size) { return expect(data, size, MsgType::kBye); }

Frame encodeChallenge(const Challenge& m) {
  Frame f;
  Writer w(&f);
  start(MsgType::kChallenge, &w);
  w.u32(m.auth_required ? kChallengeAuth : 0);
  w.u32(0);
  w.raw(m.nonce.data(), m.nonce.size());
  return f;
}

Frame encodeAnswer(const Answer& m) {
  Frame f;
  Writer w(&f);
  start(MsgType::kAnswer, &w);
  w.raw(m.nonce.data(), m.nonce.size());
  w.raw(m.mac.data(), m.mac.size());
  return f;
}

Frame encodeProof(const Proof& m) {
  Frame f;
  Writer w(&f);
  start(MsgType::kProof, &w);
  w.raw(m.mac.data(), m.mac.size());
  return f;
}

Status decodeChallenge(const uint8_t* data, size_t size, Challenge* out) {
  TALLY_RETURN_IF_ERROR(expect(data, size, MsgType::kChallenge));
  Reader r(data + kPreambleBytes);
  const uint32_t flags = r.u32();
  const uint32_t reserved = r.u32();
  if ((flags & ~kChallengeAuth) != 0 || reserved != 0) {
    return Status::remote("malformed Challenge: flags " + std::to_string(flags) + ", reserved " +
                          std::to_string(reserved));
  }
  Challenge m;
  m.auth_required = (flags & kChallengeAuth) != 0;
  std::memcpy(m.nonce.data(), r.take(m.nonce.size()), m.nonce.size());
  *out = m;
  return Status::ok();
}

Status decodeAnswer(const uint8_t* data, size_t size, Answer* out) {
  TALLY_RETURN_IF_ERROR(expect(data, size, MsgType::kAnswer));
  Reader r(data + kPreambleBytes);
  Answer m;
  std::memcpy(m.nonce.data(), r.take(m.nonce.size()), m.nonce.size());
  std::memcpy(m.mac.data(), r.take(m.mac.size()), m.mac.size());
  *out = m;
  return Status::ok();
}

Status decodeProof(const uint8_t* data, size_t size, Proof* out) {
  TALLY_RETURN_IF_ERROR(expect(data, size, MsgType::kProof));
  Reader r(data + kPreambleBytes);
  Proof m;
  std::memcpy(m.mac.data(), r.take(m.mac.size()), m.mac.size());
  *out = m;
  return Status::ok();
}

Status validateSlice(const SliceHeader& m) {
  if (!isValidDataType(static_cast<int>(m.type)) || !isValidReduceOp(static_cast<int>(m.op))) {
    return Status::remote("slice with unknown data type or op");
  }
  const uint64_t elt = dataTypeSize(m.type);
  const bool all_reduce = m.kind == CollKind::kAllReduce;
  if (m.count == 0 && all_reduce) return Status::remote("empty slice: " + describeSlice(m));
  if (all_reduce && (m.rank_count != 0 || m.window_offset != 0)) {
    return Status::remote("all-reduce slice with a window: " + describeSlice(m));
  }
  if (!all_reduce) {
    if (m.rank_count == 0 || m.total_count == 0) {
      return Status::remote("empty window or rank part: " + describeSlice(m));
    }
    if (m.kind == CollKind::kAllGather && (m.type != DataType::kUint8 || m.op != ReduceOp::kSum)) {
      return Status::remote("all-gather slice that is not bytes: " + describeSlice(m));
    }
    if (m.window_offset > UINT64_MAX / elt - m.total_count ||
        m.rank_count > UINT64_MAX / elt) {
      return Status::remote("window overflows: " + describeSlice(m));
    }
  }
  if (m.count > kMaxSliceBytes / elt) {
    return Status::remote("slice larger than " + std::to_string(kMaxSliceBytes) +
                          " bytes: " + describeSlice(m));
  }
  if (m.total_count > UINT64_MAX / elt) {
    return Status::remote("call size overflows: " + describeSlice(m));
  }
  if (m.offset > m.total_count || m.count > m.total_count - m.offset) {
    return Status::remote("slice past the end of its call: " + describeSlice(m));
  }
  return Status::ok();
}

const char* collKindName(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce: return "all-reduce";
    case CollKind::kAllGather: return "all-gather";
    case CollKind::kReduceScatter: return "reduce-scatter";
  }
  return "?";
}

std::string describeSlice(const SliceHeader& m) {
  char buf[300];
  const char* type = isValidDataType(static_cast<int>(m.type)) ? dataTypeName(m.type) : "?";
  const char* op = isValidReduceOp(static_cast<int>(m.op)) ? reduceOpName(m.op) : "?";
  std::snprintf(buf, sizeof(buf), "call %llu slice %u [offset %llu, count %llu of %llu] %s %s",
                static_cast<unsigned long long>(m.seq), m.slice,
                static_cast<unsigned long long>(m.offset),
                static_cast<unsigned long long>(m.count),
                static_cast<unsigned long long>(m.total_count), type, op);
  std::string text = buf;
  if (m.kind != CollKind::kAllReduce) {
    std::snprintf(buf, sizeof(buf), " %s window at %llu, %llu per rank", collKindName(m.kind),
                  static_cast<unsigned long long>(m.window_offset),
                  static_cast<unsigned long long>(m.rank_count));
    text += buf;
  }
  return text;
}

}  // namespace tally::protocol::wire
