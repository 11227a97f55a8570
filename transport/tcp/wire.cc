// SPDX-License-Identifier: Apache-2.0
#include "transport/tcp/wire.h"

#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace tally::transport::tcp {
namespace {

template <typename T>
void put(uint8_t* p, T value) {
  auto v = static_cast<std::make_unsigned_t<T>>(value);
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

template <typename T>
T get(const uint8_t* p) {
  std::make_unsigned_t<T> v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::make_unsigned_t<T>>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace

void encodeHello(const Hello& hello, uint8_t out[kHelloBytes]) {
  put(out + 0, hello.magic);
  put(out + 8, hello.version);
  put(out + 12, hello.index);
  put(out + 14, hello.count);
  put(out + 16, hello.connection_id);
  put(out + 24, hello.min_stripe);
}

Hello decodeHello(const uint8_t in[kHelloBytes]) {
  Hello hello;
  hello.magic = get<uint64_t>(in + 0);
  hello.version = get<uint32_t>(in + 8);
  hello.index = get<uint16_t>(in + 12);
  hello.count = get<uint16_t>(in + 14);
  hello.connection_id = get<uint64_t>(in + 16);
  hello.min_stripe = get<uint64_t>(in + 24);
  return hello;
}

void encodeHeader(const Header& header, uint8_t out[kHeaderBytes]) {
  put(out + 0, header.magic);
  put(out + 4, header.tag);
  put(out + 8, header.size);
}

Header decodeHeader(const uint8_t in[kHeaderBytes]) {
  Header header;
  header.magic = get<uint32_t>(in + 0);
  header.tag = get<int32_t>(in + 4);
  header.size = get<uint64_t>(in + 8);
  return header;
}

Status encodeHandle(const SockAddr& addr, ConnectHandle* out) {
  ConnectHandle handle{};
  uint8_t* p = handle.bytes;
  put(p, kHandleMagic);
  put<uint16_t>(p + 6, addr.port());
  if (addr.family() == AF_INET) {
    p[4] = 4;
    std::memcpy(p + 12, &reinterpret_cast<const sockaddr_in*>(&addr.storage)->sin_addr, 4);
  } else if (addr.family() == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr.storage);
    p[4] = 6;
    put<uint32_t>(p + 8, in6->sin6_scope_id);
    std::memcpy(p + 12, &in6->sin6_addr, 16);
  } else {
    return Status::invalidUsage("connect handle: unsupported address family " +
                                std::to_string(addr.family()));
  }
  *out = handle;
  return Status::ok();
}

Status decodeHandle(const ConnectHandle& handle, SockAddr* out) {
  const uint8_t* p = handle.bytes;
  if (get<uint32_t>(p) != kHandleMagic) {
    return Status::invalidUsage("connect handle was not written by the TCP transport");
  }
  SockAddr addr;
  if (p[4] == 4) {
    auto* in = reinterpret_cast<sockaddr_in*>(&addr.storage);
    in->sin_family = AF_INET;
    std::memcpy(&in->sin_addr, p + 12, 4);
    addr.length = sizeof(sockaddr_in);
  } else if (p[4] == 6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_scope_id = get<uint32_t>(p + 8);
    std::memcpy(&in6->sin6_addr, p + 12, 16);
    addr.length = sizeof(sockaddr_in6);
  } else {
    return Status::invalidUsage("connect handle: bad address family byte " + std::to_string(p[4]));
  }
  addr.setPort(get<uint16_t>(p + 6));
  *out = addr;
  return Status::ok();
}

int stripeCount(uint64_t size, int streams, uint64_t min_stripe) {
  min_stripe = std::max<uint64_t>(min_stripe, 1);
  if (streams <= 1 || size / 2 < min_stripe) return 1;  // not 2 * min_stripe: a peer chose it
  return static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(streams), size / min_stripe));
}

void stripeRange(uint64_t size, int n, int i, uint64_t* offset, uint64_t* length) {
  uint64_t base = size / static_cast<uint64_t>(n);
  uint64_t extra = size % static_cast<uint64_t>(n);
  uint64_t idx = static_cast<uint64_t>(i);
  *offset = idx * base + std::min(idx, extra);
  *length = base + (idx < extra ? 1 : 0);
}

}  // namespace tally::transport::tcp
