// SPDX-License-Identifier: Apache-2.0
// The failover messages of the wire protocol (wire.h; the design is docs/failover.md): Ack,
// Commit, Ping, Pong and Relay with its Control body. Dismiss is a Reason (wire.cc).
#include <algorithm>
#include <cstdint>
#include <string>

#include "protocol/codec.h"
#include "protocol/wire.h"

namespace tally::protocol::wire {
using codec::expect;
using codec::Reader;
using codec::start;
using codec::Writer;

namespace {

// calls u64, recovery_epoch u32, reserved u32
constexpr size_t kAckBody = 8 + 4 + 4;
constexpr size_t kPingBody = 8;
// kind, change, flags u16, epoch, slot, reserved u32, commit calls u64, next_call u64,
// first_call u64, commit recovery epoch u32, address length u8, reason length u8, reserved u16,
// address, reason.
constexpr size_t kControlBytes = 1 + 1 + 2 + 4 + 4 + 4 + 8 + 8 + 8 + 4 + 1 + 1 + 2 +
                                 kMaxControlAddressBytes + kMaxControlReasonBytes;
// from u32, reserved u32, the control, the seal.
constexpr size_t kRelayBody = 4 + 4 + kControlBytes + kRelaySealBytes;
static_assert(kPreambleBytes + kRelayBody <= kMaxHeaderBytes);
static_assert(kMaxControlAddressBytes < 256 && kMaxControlReasonBytes < 256);

constexpr uint16_t kControlOk = 1u << 0;

Frame encodeAckAs(MsgType t, const AckPoint& m) {
  Frame f;
  Writer w(&f);
  start(t, &w);
  w.u64(m.calls);
  w.u32(m.recovery_epoch);
  w.u32(0);
  return f;
}

Status decodeAckAs(const uint8_t* data, size_t size, MsgType t, AckPoint* out) {
  TALLY_RETURN_IF_ERROR(expect(data, size, t));
  Reader r(data + kPreambleBytes);
  AckPoint m;
  m.calls = r.u64();
  m.recovery_epoch = r.u32();
  if (r.u32() != 0) {
    return Status::remote(std::string("malformed ") + msgTypeName(t) +
                          ": reserved bytes are not zero");
  }
  *out = m;
  return Status::ok();
}

Frame encodePingAs(MsgType t, const Ping& m) {
  Frame f;
  Writer w(&f);
  start(t, &w);
  w.u64(m.token);
  return f;
}

Status decodePingAs(const uint8_t* data, size_t size, MsgType t, Ping* out) {
  TALLY_RETURN_IF_ERROR(expect(data, size, t));
  Reader r(data + kPreambleBytes);
  out->token = r.u64();
  return Status::ok();
}

}  // namespace

size_t codec::failoverBodySize(MsgType t) {
  switch (t) {
    case MsgType::kAck:
    case MsgType::kCommit: return kAckBody;
    case MsgType::kPing:
    case MsgType::kPong: return kPingBody;
    case MsgType::kRelay: return kRelayBody;
    default: return 0;
  }
}

const char* controlKindName(ControlKind k) {
  switch (k) {
    case ControlKind::kSuspect: return "Suspect";
    case ControlKind::kPropose: return "Propose";
    case ControlKind::kReport: return "Report";
    case ControlKind::kDecide: return "Decide";
  }
  return "?";
}

const char* changeName(Change c) {
  switch (c) {
    case Change::kLost: return "lost";
    case Change::kJoin: return "join";
    case Change::kVoid: return "void";
    case Change::kFail: return "fail";
  }
  return "?";
}

Frame encodeAck(const AckPoint& m) { return encodeAckAs(MsgType::kAck, m); }
Frame encodeCommit(const AckPoint& m) { return encodeAckAs(MsgType::kCommit, m); }
Status decodeAck(const uint8_t* data, size_t size, AckPoint* out) {
  return decodeAckAs(data, size, MsgType::kAck, out);
}
Status decodeCommit(const uint8_t* data, size_t size, AckPoint* out) {
  return decodeAckAs(data, size, MsgType::kCommit, out);
}
Frame encodePing(const Ping& m) { return encodePingAs(MsgType::kPing, m); }
Frame encodePong(const Ping& m) { return encodePingAs(MsgType::kPong, m); }
Status decodePing(const uint8_t* data, size_t size, Ping* out) {
  return decodePingAs(data, size, MsgType::kPing, out);
}
Status decodePong(const uint8_t* data, size_t size, Ping* out) {
  return decodePingAs(data, size, MsgType::kPong, out);
}

Frame encodeRelay(const Relay& m) {
  Frame f;
  Writer w(&f);
  start(MsgType::kRelay, &w);
  w.u32(m.from);
  w.u32(0);
  const Control& c = m.control;
  w.u8(static_cast<uint8_t>(c.kind));
  w.u8(static_cast<uint8_t>(c.change));
  w.u16(c.ok ? kControlOk : 0);
  w.u32(c.epoch);
  w.u32(c.slot);
  w.u32(0);
  w.u64(c.commit.calls);
  w.u64(c.next_call);
  w.u64(c.first_call);
  w.u32(c.commit.recovery_epoch);
  const size_t address = std::min(c.address.size(), kMaxControlAddressBytes);
  const size_t reason = std::min(c.reason.size(), kMaxControlReasonBytes);
  w.u8(static_cast<uint8_t>(address));
  w.u8(static_cast<uint8_t>(reason));
  w.u16(0);
  w.text(c.address, kMaxControlAddressBytes);
  w.text(c.reason, kMaxControlReasonBytes);
  for (uint8_t b : m.seal) w.u8(b);
  return f;
}

Status decodeRelay(const uint8_t* data, size_t size, Relay* out) {
  TALLY_RETURN_IF_ERROR(expect(data, size, MsgType::kRelay));
  Reader r(data + kPreambleBytes);
  Relay m;
  m.from = r.u32();
  const uint32_t reserved1 = r.u32();
  Control& c = m.control;
  const uint8_t kind = r.u8();
  const uint8_t change = r.u8();
  const uint16_t flags = r.u16();
  c.epoch = r.u32();
  c.slot = r.u32();
  const uint32_t reserved2 = r.u32();
  c.commit.calls = r.u64();
  c.next_call = r.u64();
  c.first_call = r.u64();
  c.commit.recovery_epoch = r.u32();
  const uint8_t address = r.u8();
  const uint8_t reason = r.u8();
  const uint16_t reserved3 = r.u16();
  if (reserved1 != 0 || reserved2 != 0 || reserved3 != 0 || (flags & ~kControlOk) != 0) {
    return Status::remote("malformed Relay: reserved bytes or flags are not zero");
  }
  if (kind < static_cast<uint8_t>(ControlKind::kSuspect) ||
      kind > static_cast<uint8_t>(ControlKind::kDecide) ||
      change < static_cast<uint8_t>(Change::kLost) || change > static_cast<uint8_t>(Change::kFail)) {
    return Status::remote("Relay with unknown kind " + std::to_string(kind) + " or change " +
                          std::to_string(change));
  }
  if (c.slot >= kMaxReducers) {
    return Status::remote("Relay for reducer slot " + std::to_string(c.slot) + ", at most " +
                          std::to_string(kMaxReducers));
  }
  if (address > kMaxControlAddressBytes || reason > kMaxControlReasonBytes) {
    return Status::remote("malformed Relay: text lengths " + std::to_string(address) + " and " +
                          std::to_string(reason));
  }
  c.kind = static_cast<ControlKind>(kind);
  c.change = static_cast<Change>(change);
  c.ok = (flags & kControlOk) != 0;
  c.address.assign(reinterpret_cast<const char*>(r.take(kMaxControlAddressBytes)), address);
  c.reason.assign(reinterpret_cast<const char*>(r.take(kMaxControlReasonBytes)), reason);
  for (uint8_t& b : m.seal) b = r.u8();
  *out = std::move(m);
  return Status::ok();
}

}  // namespace tally::protocol::wire
