// SPDX-License-Identifier: Apache-2.0
// What the TCP backend puts on the wire, and how it cuts messages into stripes.
//
// Every integer is little-endian, whatever the host, so the layout is fixed.
//
// Hello (kHelloBytes), sent once by the connecting side at the start of every stream:
//   u64 magic, u32 version, u16 stream index, u16 stream count, u64 connection id,
//   u64 min_stripe (the connector's; both sides stripe with it)
// Message header (kHeaderBytes), on stream 0 before the message's first stripe:
//   u32 magic, i32 tag, u64 size
// Connect handle (ConnectHandle bytes):
//   u32 magic, u8 family (4 or 6), u8 unused, u16 port, u32 IPv6 scope id, 16 bytes address
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "transport/tcp/socket.h"
#include "transport/transport.h"

namespace tally::transport::tcp {

inline constexpr uint64_t kHelloMagic = 0x6f6c6c6548796c54ull;  // "TlyHello"
inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr uint32_t kHeaderMagic = 0x4d796c54u;  // "TlyM"
inline constexpr uint32_t kHandleMagic = 0x48796c54u;  // "TlyH"
inline constexpr size_t kHelloBytes = 32;
inline constexpr size_t kHeaderBytes = 16;
inline constexpr size_t kHandleBytes = 28;
inline constexpr int kMaxStreams = 16;
static_assert(kHandleBytes <= kMaxHandleBytes, "connect handle must fit ConnectHandle");

struct Hello {
  uint64_t magic = kHelloMagic;
  uint32_t version = kProtocolVersion;
  uint16_t index = 0;
  uint16_t count = 0;
  uint64_t connection_id = 0;
  uint64_t min_stripe = 0;
};

struct Header {
  uint32_t magic = kHeaderMagic;
  int32_t tag = 0;
  uint64_t size = 0;
};

void encodeHello(const Hello& hello, uint8_t out[kHelloBytes]);
Hello decodeHello(const uint8_t in[kHelloBytes]);
void encodeHeader(const Header& header, uint8_t out[kHeaderBytes]);
Header decodeHeader(const uint8_t in[kHeaderBytes]);

// Writes addr into a handle; fails with kInvalidUsage for a family other than IPv4/IPv6.
Status encodeHandle(const SockAddr& addr, ConnectHandle* out);
// Reads a handle; fails with kInvalidUsage when it was not written by encodeHandle.
Status decodeHandle(const ConnectHandle& handle, SockAddr* out);

// How a message of `size` bytes is cut over `streams` streams: one stripe below 2*min_stripe,
// else min(streams, size / min_stripe) near-equal stripes (the first size % n one byte longer).
// Stripe i goes on stream i. Both sides compute the same cut from the same inputs.
int stripeCount(uint64_t size, int streams, uint64_t min_stripe);
// Offset and length of stripe i of n.
void stripeRange(uint64_t size, int n, int i, uint64_t* offset, uint64_t* length);

}  // namespace tally::transport::tcp
