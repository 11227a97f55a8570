// SPDX-License-Identifier: Apache-2.0
// What the ofi backend puts on the fabric and on the side channel.
//
// Every Tally message is a control message (a header, with the payload inline when it is small)
// and, for a larger payload, one or more tagged payload chunks. The receiver pre-posts control
// receives, reads each header in sequence order, picks the buffer of the posted receive the
// message belongs to (transport.h: the oldest receive, the free buffer with the message's tag),
// and only then posts the payload receives into that buffer. So the tag rules, grouped receives
// and truncation checks are exactly those of TCP, and no payload is ever copied except inline.
//
// libfabric tags (exact match, nothing ignored); the top 4 bits stay clear because some
// providers reserve them:
//   bit 59        1: control message
//   bits 40..58   payload chunk index (0 for control)
//   bits 0..39    message sequence number, per direction, modulo 2^40
//
// Control message: header (kHeaderBytes) then `size` payload bytes when inline:
//   u32 magic "TlyF", i32 Tally tag, u64 size, u32 flags (kInline), u32 chunk count
// Setup (the side channel's setup bytes): u32 magic "TlyO", u16 version, u16 provider name
//   length, u64 largest chunk, u32 control slot bytes, u16 endpoint name length, the provider
//   name, the endpoint name (fi_getname). Each side cuts payloads into chunks of the smaller of
//   the two largest-chunk values, so both cut the same.
// Farewell (the side channel's farewell on an orderly close): u64 messages this side posted.
//
// Integers are little-endian whatever the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace tally::transport::ofi {

inline constexpr uint64_t kControlBit = 1ull << 59;
inline constexpr int kSeqBits = 40;
inline constexpr uint64_t kSeqMask = (1ull << kSeqBits) - 1;
inline constexpr int kChunkBits = 19;
inline constexpr uint64_t kMaxChunks = 1ull << kChunkBits;

inline constexpr uint32_t kHeaderMagic = 0x46796c54u;  // "TlyF"
inline constexpr uint32_t kSetupMagic = 0x4f796c54u;   // "TlyO"
inline constexpr uint16_t kWireVersion = 2;
inline constexpr size_t kHeaderBytes = 24;
inline constexpr uint32_t kInline = 1;

inline uint64_t controlTag(uint64_t seq) { return kControlBit | (seq & kSeqMask); }
inline uint64_t chunkTag(uint64_t seq, uint64_t chunk) {
  return (chunk << kSeqBits) | (seq & kSeqMask);
}

struct Header {
  uint32_t magic = kHeaderMagic;
  int32_t tag = 0;
  uint64_t size = 0;
  uint32_t flags = 0;
  uint32_t chunks = 0;
};

void encodeHeader(const Header& header, uint8_t out[kHeaderBytes]);
Header decodeHeader(const uint8_t in[kHeaderBytes]);

struct SetupMessage {
  std::string provider;
  uint64_t max_chunk = 0;
  uint32_t slot_bytes = 0;
  // This side takes no payload inline: its receive buffers may be CUDA memory (FI_HMEM), which
  // the helper thread cannot copy into. The peer then sends every payload as chunks.
  bool no_inline = false;
  std::vector<uint8_t> endpoint;  // fi_getname bytes
};

std::vector<uint8_t> encodeSetup(const SetupMessage& setup);
// kRemote naming `peer` when the bytes are not a setup of this version.
Status decodeSetup(const std::vector<uint8_t>& bytes, const std::string& peer, SetupMessage* out);

std::vector<uint8_t> encodeFarewell(uint64_t messages_sent);
// False when the bytes are not a farewell.
bool decodeFarewell(const std::vector<uint8_t>& bytes, uint64_t* messages_sent);

// How many chunks a payload of `size` bytes takes with chunks of at most `max_chunk` (at least
// one for a non-empty payload).
uint64_t chunkCount(uint64_t size, uint64_t max_chunk);

}  // namespace tally::transport::ofi
