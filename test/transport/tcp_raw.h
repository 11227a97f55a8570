// SPDX-License-Identifier: Apache-2.0
// The TCP transport's own bytes, for tests outside test/transport that play a raw peer of a
// reducer: the hello that opens each stream and the header in front of a message. The one place
// outside transport/tcp/ and its own tests that knows the TCP framing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "transport/tcp/wire.h"

namespace tally::test::tcp_raw {

inline constexpr size_t kHelloBytes = transport::tcp::kHelloBytes;
inline constexpr size_t kHeaderBytes = transport::tcp::kHeaderBytes;

// The hello of stream `index` of `count` of connection `id`.
inline std::array<uint8_t, kHelloBytes> hello(uint16_t index, uint16_t count, uint64_t id) {
  transport::tcp::Hello h;
  h.index = index;
  h.count = count;
  h.connection_id = id;
  h.min_stripe = 64 * 1024;
  std::array<uint8_t, kHelloBytes> bytes{};
  transport::tcp::encodeHello(h, bytes.data());
  return bytes;
}

// The header of a message of `bytes` bytes with `tag`.
inline std::array<uint8_t, kHeaderBytes> header(int32_t tag, uint64_t bytes) {
  std::array<uint8_t, kHeaderBytes> out{};
  transport::tcp::encodeHeader(transport::tcp::Header{transport::tcp::kHeaderMagic, tag, bytes},
                               out.data());
  return out;
}

}  // namespace tally::test::tcp_raw
