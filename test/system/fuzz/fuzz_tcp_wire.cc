// SPDX-License-Identifier: Apache-2.0
// Fuzz target fuzz_tcp_wire: the TCP transport's own framing (transport/tcp/wire.h).
//
// The first byte picks the subject, the rest is its input:
//   0  stream hello (32 bytes): decode -> encode gives the same bytes back
//   1  message header (16 bytes): the same
//   2  connect handle (up to 64 bytes): a handle that decodes re-encodes to the same meaningful
//      bytes (magic, family, port, address; IPv6 scope) and decodes again to the same address;
//      a refused handle leaves the output untouched
//   3  striping: u64 size, i8 streams, u64 min_stripe. Every value here can come from a peer (a
//      hello carries min_stripe, a header the size): stripeCount is 1..streams and the stripes
//      tile [0, size) in order, lengths differing by at most one
//   4  "host:port" text: splitHostPort, and what it accepts splits again to the same parts
#include <array>
#include <cstring>
#include <string>

#include "common/strings.h"
#include "fuzz_util.h"
#include "transport/tcp/socket.h"
#include "transport/tcp/wire.h"

namespace tally::fuzz {
namespace {

namespace tcp = transport::tcp;

// A fixed-size view of the input, zero-padded.
template <size_t N>
std::array<uint8_t, N> padded(ByteReader* in) {
  std::array<uint8_t, N> out{};
  size_t got = 0;
  const uint8_t* p = in->takeBytes(N, &got);
  if (got > 0) std::memcpy(out.data(), p, got);
  return out;
}

void fuzzHello(ByteReader* in) {
  auto bytes = padded<tcp::kHelloBytes>(in);
  tcp::Hello hello = tcp::decodeHello(bytes.data());
  std::array<uint8_t, tcp::kHelloBytes> again{};
  tcp::encodeHello(hello, again.data());
  TALLY_FUZZ_CHECK(again == bytes, "stream hello does not re-encode to its bytes");
}

void fuzzHeader(ByteReader* in) {
  auto bytes = padded<tcp::kHeaderBytes>(in);
  tcp::Header header = tcp::decodeHeader(bytes.data());
  std::array<uint8_t, tcp::kHeaderBytes> again{};
  tcp::encodeHeader(header, again.data());
  TALLY_FUZZ_CHECK(again == bytes, "message header does not re-encode to its bytes");
}

void fuzzHandle(ByteReader* in) {
  auto bytes = padded<transport::kMaxHandleBytes>(in);
  transport::ConnectHandle handle{};
  std::memcpy(handle.bytes, bytes.data(), sizeof(handle.bytes));
  tcp::SockAddr addr;
  addr.length = 4242;  // a value decodeHandle never writes
  if (!tcp::decodeHandle(handle, &addr).isOk()) {
    TALLY_FUZZ_CHECK(addr.length == 4242 && addr.family() == 0,
                     "a refused handle wrote its output");
    return;
  }
  const uint8_t family = handle.bytes[4];
  TALLY_FUZZ_CHECK(family == 4 || family == 6, "handle with family byte %u accepted", family);
  TALLY_FUZZ_CHECK(addr.family() == (family == 4 ? AF_INET : AF_INET6), "wrong family decoded");
  transport::ConnectHandle again{};
  Status st = tcp::encodeHandle(addr, &again);
  TALLY_FUZZ_CHECK(st.isOk(), "decoded handle does not encode: %s", st.toString().c_str());
  // Meaningful bytes: magic [0,4), family [4], port [6,8), then the address: IPv4 at [12,16),
  // IPv6 scope and address at [8,28).
  auto same = [&](size_t from, size_t to) {
    return std::memcmp(handle.bytes + from, again.bytes + from, to - from) == 0;
  };
  TALLY_FUZZ_CHECK(same(0, 5) && same(6, 8), "handle preamble changed in a round trip");
  TALLY_FUZZ_CHECK(family == 4 ? same(12, 16) : same(8, 28), "handle address changed");
  tcp::SockAddr back;
  TALLY_FUZZ_CHECK(tcp::decodeHandle(again, &back).isOk(), "re-encoded handle refused");
  TALLY_FUZZ_CHECK(back.length == addr.length && back.port() == addr.port() &&
                       std::memcmp(&back.storage, &addr.storage, addr.length) == 0 &&
                       back.toString() == addr.toString(),
                   "handle decodes to another address the second time");
}

void fuzzStripes(ByteReader* in) {
  const uint64_t size = in->take<uint64_t>();
  const int streams = static_cast<int>(in->take<int8_t>());
  const uint64_t min_stripe = in->take<uint64_t>();
  const int n = tcp::stripeCount(size, streams, min_stripe);
  TALLY_FUZZ_CHECK(n >= 1 && n <= (streams < 1 ? 1 : streams), "stripeCount(%llu, %d, %llu) = %d",
                   static_cast<unsigned long long>(size), streams,
                   static_cast<unsigned long long>(min_stripe), n);
  uint64_t next = 0;
  uint64_t shortest = UINT64_MAX;
  uint64_t longest = 0;
  for (int i = 0; i < n; ++i) {
    uint64_t offset = 0;
    uint64_t length = 0;
    tcp::stripeRange(size, n, i, &offset, &length);
    TALLY_FUZZ_CHECK(offset == next, "stripe %d of %d starts at %llu, expected %llu", i, n,
                     static_cast<unsigned long long>(offset),
                     static_cast<unsigned long long>(next));
    next = offset + length;
    shortest = length < shortest ? length : shortest;
    longest = length > longest ? length : longest;
  }
  TALLY_FUZZ_CHECK(next == size, "stripes end at %llu of %llu",
                   static_cast<unsigned long long>(next), static_cast<unsigned long long>(size));
  TALLY_FUZZ_CHECK(longest - shortest <= 1, "stripes of %llu and %llu bytes",
                   static_cast<unsigned long long>(shortest),
                   static_cast<unsigned long long>(longest));
}

void fuzzHostPort(ByteReader* in) {
  size_t got = 0;
  const uint8_t* p = in->takeBytes(in->remaining(), &got);
  const std::string text(reinterpret_cast<const char*>(p), got);
  std::string host = "untouched";
  uint16_t port = 4242;
  if (!splitHostPort(text, &host, &port).isOk()) {
    TALLY_FUZZ_CHECK(host == "untouched" && port == 4242, "refused split wrote its output");
    return;
  }
  const std::string again = joinHostPort(host, port);
  std::string host2;
  uint16_t port2 = 0;
  Status st = splitHostPort(again, &host2, &port2);
  TALLY_FUZZ_CHECK(st.isOk() && host2 == host && port2 == port,
                   "\"%s\" split, but its recomposition \"%s\" does not split the same way",
                   text.c_str(), again.c_str());
}

}  // namespace
}  // namespace tally::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tally::fuzz::ByteReader in(data, size);
  switch (in.take<uint8_t>() % 5) {
    case 0:
      tally::fuzz::fuzzHello(&in);
      break;
    case 1:
      tally::fuzz::fuzzHeader(&in);
      break;
    case 2:
      tally::fuzz::fuzzHandle(&in);
      break;
    case 3:
      tally::fuzz::fuzzStripes(&in);
      break;
    default:
      tally::fuzz::fuzzHostPort(&in);
      break;
  }
  return 0;
}
