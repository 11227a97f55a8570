// SPDX-License-Identifier: Apache-2.0
// The input format of fuzz_reducer_session, shared by the target and the seed generator.
//
//   u8 mode: bit 0 clear = framed, set = raw; bit 1 set = the reducer that requires the job
//            token (kJobToken), clear = the one without a token
//   framed: records until the input ends, each
//     u8 op       action * kConnections + connection (taken modulo kActions * kConnections)
//     u16 length  little-endian, then `length` bytes of argument
//   raw: the rest of the input is written as-is to one plain TCP socket, below the transport's
//     own framing (its stream hello, message headers and stripes are then the fuzzer's to write).
//
// Framed records act on up to kConnections transport connections to the reducer, each opened
// when first used:
//   kSendHeader   the argument as one message with tag wire::kTagHeader
//   kSendPayload  the argument as one message with tag wire::kTagPayload
//   kSendTagged   u32 tag, then the rest as one message with that tag
//   kSendFill     u32 n: a kTagPayload message of n bytes (at most kMaxFillBytes), for payloads
//                 too big to spell out in the input
//   kRecvHeader   receive one message of at most wire::kMaxHeaderBytes with tag kTagHeader
//   kRecvPayload  u32 n: receive one message of at most n (<= kMaxFillBytes) bytes, kTagPayload
//   kClose        close the connection (without Bye)
//   kAnswer       answer the connection's Challenge (received now if no receive took it yet) as
//                 a worker holding kJobToken; an odd first argument byte spoils the MAC. Where
//                 the worker side refuses the Challenge, it sends the Reject a worker would.
//   kSendFailover u8 which, then fields: a well-formed failover message, made with the real
//                 encoders, so a session reaches the reducer's handling of them without
//                 spelling out their frames. which % 4: 0 Ack (u64 calls, u32 recovery epoch),
//                 1 Ping (u64 token), 2 Relay (u32 from, u8 kind, u8 change, both taken modulo
//                 their four values, u32 epoch, u32 slot modulo kMaxReducers, u64 commit calls,
//                 u32 commit epoch, u64 next call, then u8-length address and reason), 3 Dismiss
//                 (the rest is the reason). Fields past the end are zero.
//
// Every connection starts with the reducer's Challenge (protocol/wire.h): a session that wants the
// reducer's replies receives it first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tally::fuzz::session {

inline constexpr int kConnections = 4;
inline constexpr uint8_t kModeRaw = 1;
inline constexpr uint8_t kModeGuarded = 2;
inline constexpr const char* kJobToken = "fuzz-job-token-0123456789abcdef";
inline constexpr size_t kMaxFillBytes = 1 << 20;

enum class Action : uint8_t {
  kSendHeader = 0,
  kSendPayload = 1,
  kSendTagged = 2,
  kSendFill = 3,
  kRecvHeader = 4,
  kRecvPayload = 5,
  kClose = 6,
  kAnswer = 7,
  kSendFailover = 8,
};
inline constexpr int kActions = 9;

// kSendFailover's first argument byte.
enum class Failover : uint8_t { kAck = 0, kPing = 1, kRelay = 2, kDismiss = 3 };

struct Record {
  Action action = Action::kSendHeader;
  int connection = 0;
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// Cuts records from a framed input (after the mode byte). A record whose length runs past the
// end takes what is left.
class RecordReader {
 public:
  RecordReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool next(Record* r) {
    if (pos_ + 3 > size_) return false;
    const int op = data_[pos_] % (kActions * kConnections);
    size_t len = data_[pos_ + 1] | (static_cast<size_t>(data_[pos_ + 2]) << 8);
    pos_ += 3;
    if (len > size_ - pos_) len = size_ - pos_;
    r->action = static_cast<Action>(op / kConnections);
    r->connection = op % kConnections;
    r->data = data_ + pos_;
    r->size = len;
    pos_ += len;
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Builds inputs (the seed generator).
class InputWriter {
 public:
  explicit InputWriter(bool raw, bool guarded = false) {
    bytes_.push_back(static_cast<uint8_t>((raw ? kModeRaw : 0) | (guarded ? kModeGuarded : 0)));
  }
  void record(Action a, int connection, const void* data = nullptr, size_t size = 0) {
    bytes_.push_back(static_cast<uint8_t>(static_cast<int>(a) * kConnections + connection));
    bytes_.push_back(static_cast<uint8_t>(size));
    bytes_.push_back(static_cast<uint8_t>(size >> 8));
    append(data, size);
  }
  void recordU32(Action a, int connection, uint32_t value) {
    uint8_t le[4] = {static_cast<uint8_t>(value), static_cast<uint8_t>(value >> 8),
                     static_cast<uint8_t>(value >> 16), static_cast<uint8_t>(value >> 24)};
    record(a, connection, le, sizeof(le));
  }
  void append(const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    if (size > 0) bytes_.insert(bytes_.end(), p, p + size);
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

inline uint32_t readU32(const uint8_t* p, size_t size) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4 && i < size; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace tally::fuzz::session
