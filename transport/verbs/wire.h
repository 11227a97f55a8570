// SPDX-License-Identifier: Apache-2.0
// What the verbs backend puts on the wire. Every integer is little-endian.
//
// Setup message (one each way over the TCP side channel, before any queue pair is used):
//   u32 magic "TlyV", u16 version, u16 queue pair count n (1..kMaxQps),
//   u8 link layer (1 InfiniBand, 2 Ethernet/RoCE), u8 port, u8 active MTU (ibv_mtu 1..5), u8 0,
//   u16 LID, u16 0, 16 bytes GID,
//   u32 max_requests (receives the sender may have in flight: each costs the peer one control
//       receive), u32 receive depth (receives posted on each of the sender's queue pairs),
//   n x (u32 qp_num, u32 first PSN), both 24-bit values.
// Then each side sends one kReadyByte (tag kReadyTag) once its queue pairs are in RTS, and
// uses them only after the peer's came (connect.cc says why).
//
// Control messages (ibv_post_send SEND on queue pair 0 into the peer's control ring):
//   Clear to send, for each posted receive: u8 kind 1, u8 buffer count n (1..kMaxRecvs), u16 0,
//     u32 receive sequence, then n x (i32 tag, u32 rkey, u64 address, u64 capacity).
//   Mismatch, when a message does not fit the receive it matched: u8 kind 2, u8 0, u16 0,
//     i32 tag, u64 message size, i64 capacity (-1: no free buffer with that tag).
//
// Data: each message is RDMA-written with immediate straight into the buffer the clear to send
// named, cut into 1..255 chunks spread over the queue pairs. The immediate carries the receive
// sequence (kSeqBits), the buffer index (3 bits) and the chunk count (8 bits); every chunk has
// it, so the receiver knows when a buffer is complete whichever queue pair finishes last.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "transport/transport.h"

namespace tally::transport::verbs {

inline constexpr uint32_t kSetupMagic = 0x56796c54u;  // "TlyV"
inline constexpr uint16_t kSetupVersion = 1;
inline constexpr int kMaxQps = 16;
inline constexpr size_t kSetupFixedBytes = 40;
inline constexpr size_t kSetupQpBytes = 8;
inline constexpr size_t kMaxSetupBytes = kSetupFixedBytes + kMaxQps * kSetupQpBytes;
inline constexpr uint8_t kReadyByte = 0x52;  // 'R'
inline constexpr uint32_t kMaxWireRequests = 1u << 16;

struct SetupQp {
  uint32_t qp_num = 0;
  uint32_t psn = 0;
};

struct SetupMessage {
  uint16_t version = kSetupVersion;
  uint8_t link_layer = 1;
  uint8_t port = 1;
  uint8_t mtu = 3;
  uint16_t lid = 0;
  uint8_t gid[16] = {};
  uint32_t max_requests = 0;
  uint32_t recv_depth = 0;
  std::vector<SetupQp> qps;
};

// Appends the encoding of `message` to *out. Fails (kInternal) when it is not valid itself.
Status encodeSetup(const SetupMessage& message, std::vector<uint8_t>* out);
// Decodes exactly `size` bytes. Fails with kRemote naming the problem: short or long message,
// bad magic, other version, queue pair count, link layer, MTU, port, a 24-bit field out of range,
// a request count or depth of 0 or too large, an InfiniBand LID of 0 or a RoCE GID of zeros.
Status decodeSetup(const uint8_t* data, size_t size, SetupMessage* out);
// How many bytes a setup message has, from its first 8; 0 when they are not one (bad magic or
// count), so the reader knows how much to wait for.
size_t setupSize(const uint8_t* first8);

// Control messages.
inline constexpr size_t kControlBytes = 8 + kMaxRecvs * 24;  // the largest, a full clear to send
enum class ControlKind : uint8_t { kClearToSend = 1, kMismatch = 2 };

struct CtsEntry {
  int32_t tag = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;
  uint64_t capacity = 0;
};

struct ClearToSend {
  uint32_t seq = 0;
  int n = 0;
  CtsEntry entries[kMaxRecvs];
};

struct Mismatch {
  int32_t tag = 0;
  uint64_t size = 0;
  int64_t capacity = -1;
};

// Encoders return the bytes written into out (at most kControlBytes).
size_t encodeClearToSend(const ClearToSend& cts, uint8_t* out);
size_t encodeMismatch(const Mismatch& mismatch, uint8_t* out);
// Reads the kind and decodes into the matching struct; fails with kRemote on a bad kind, count or
// length.
Status decodeControl(const uint8_t* data, size_t size, ControlKind* kind, ClearToSend* cts,
                     Mismatch* mismatch);

// The immediate of a data chunk.
inline constexpr int kSeqBits = 21;
inline constexpr uint32_t kSeqMask = (1u << kSeqBits) - 1;
inline constexpr int kMaxChunks = 255;

struct Immediate {
  uint32_t seq = 0;  // receive sequence, modulo 2^kSeqBits
  int slot = 0;      // buffer index in the receive, 0..kMaxRecvs-1
  int chunks = 1;    // chunks of this message, 1..kMaxChunks
};

uint32_t encodeImmediate(const Immediate& imm);
// Fails with kRemote when chunks is 0.
Status decodeImmediate(uint32_t value, Immediate* out);

}  // namespace tally::transport::verbs
