// SPDX-License-Identifier: Apache-2.0
// Pure pieces of the TCP backend: interface selection, striping, wire encodings, addresses.
#include <gtest/gtest.h>

#include "transport/tcp/interfaces.h"
#include "transport/tcp/socket.h"
#include "transport/tcp/wire.h"

namespace tally::transport::tcp {
namespace {

std::vector<Interface> fakeHost() {
  return {{"eth0", "10.0.0.1", false},     {"eth1", "10.0.1.1", false},
          {"ib0", "192.168.0.1", false},   {"docker0", "172.17.0.1", false},
          {"ens5", "fe80::1%ens5", false}, {"lo", "127.0.0.1", true}};
}

std::vector<std::string> names(const std::string& spec, const std::vector<Interface>& host) {
  std::vector<Interface> out;
  Status status = selectInterfaces(spec, host, &out);
  EXPECT_TRUE(status.isOk()) << spec << ": " << status.toString();
  std::vector<std::string> result;
  for (const auto& iface : out) result.push_back(iface.name);
  return result;
}

using Names = std::vector<std::string>;

TEST(SelectInterfaces, EmptySpecTakesNonLoopback) {
  EXPECT_EQ(names("", fakeHost()), (Names{"eth0", "eth1", "ib0", "docker0", "ens5"}));
}

TEST(SelectInterfaces, EmptySpecFallsBackToLoopback) {
  EXPECT_EQ(names("", {{"lo", "127.0.0.1", true}}), (Names{"lo"}));
}

TEST(SelectInterfaces, Prefixes) {
  EXPECT_EQ(names("eth", fakeHost()), (Names{"eth0", "eth1"}));
  EXPECT_EQ(names("ib,eth1", fakeHost()), (Names{"eth1", "ib0"}));
  EXPECT_EQ(names("e", fakeHost()), (Names{"eth0", "eth1", "ens5"}));
  EXPECT_EQ(names("lo", fakeHost()), (Names{"lo"}));
  EXPECT_EQ(names("eth,,", fakeHost()), (Names{"eth0", "eth1"}));
}

TEST(SelectInterfaces, Exact) {
  EXPECT_EQ(names("=eth1", fakeHost()), (Names{"eth1"}));
  EXPECT_EQ(names("=eth0,ib0", fakeHost()), (Names{"eth0", "ib0"}));
  std::vector<Interface> out;
  EXPECT_EQ(selectInterfaces("=eth", fakeHost(), &out).code(), StatusCode::kInvalidUsage);
}

TEST(SelectInterfaces, Exclude) {
  EXPECT_EQ(names("^docker,lo", fakeHost()), (Names{"eth0", "eth1", "ib0", "ens5"}));
  EXPECT_EQ(names("^eth", fakeHost()), (Names{"ib0", "docker0", "ens5", "lo"}));
  EXPECT_EQ(names("^=eth0", fakeHost()), (Names{"eth1", "ib0", "docker0", "ens5", "lo"}));
}

TEST(SelectInterfaces, NoMatchNamesTheSpec) {
  std::vector<Interface> out = {{"keep", "1.2.3.4", false}};
  Status status = selectInterfaces("mlx", fakeHost(), &out);
  EXPECT_EQ(status.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(status.message().find("\"mlx\""), std::string::npos) << status.toString();
  EXPECT_EQ(out.size(), 1u) << "output untouched on error";
  EXPECT_FALSE(selectInterfaces("", {}, &out).isOk());
}

TEST(Stripes, CountFollowsSizeAndStreams) {
  constexpr uint64_t kMin = 65536;
  EXPECT_EQ(stripeCount(0, 4, kMin), 1);
  EXPECT_EQ(stripeCount(2 * kMin - 1, 4, kMin), 1);
  EXPECT_EQ(stripeCount(2 * kMin, 4, kMin), 2);
  EXPECT_EQ(stripeCount(3 * kMin + 5, 4, kMin), 3);
  EXPECT_EQ(stripeCount(64u << 20, 4, kMin), 4);
  EXPECT_EQ(stripeCount(64u << 20, 1, kMin), 1);
  EXPECT_EQ(stripeCount(10, 4, 0), 4) << "min_stripe 0 is taken as 1";
}

TEST(Stripes, RangesCoverTheMessageExactly) {
  for (uint64_t size : {0ull, 1ull, 7ull, 131072ull, 1048579ull, 67108864ull + 3}) {
    for (int n = 1; n <= 16; ++n) {
      uint64_t next = 0;
      uint64_t smallest = ~0ull;
      uint64_t largest = 0;
      for (int i = 0; i < n; ++i) {
        uint64_t offset = 0;
        uint64_t length = 0;
        stripeRange(size, n, i, &offset, &length);
        EXPECT_EQ(offset, next);
        next = offset + length;
        smallest = std::min(smallest, length);
        largest = std::max(largest, length);
      }
      EXPECT_EQ(next, size);
      EXPECT_LE(largest - smallest, 1u);
    }
  }
}

TEST(Wire, HelloAndHeaderRoundTrip) {
  Hello hello;
  hello.index = 3;
  hello.count = 4;
  hello.connection_id = 0x0123456789abcdefull;
  hello.min_stripe = 1 << 20;
  uint8_t bytes[kHelloBytes];
  encodeHello(hello, bytes);
  EXPECT_EQ(bytes[0], 'T');  // little-endian whatever the host
  Hello back = decodeHello(bytes);
  EXPECT_EQ(back.magic, kHelloMagic);
  EXPECT_EQ(back.version, kProtocolVersion);
  EXPECT_EQ(back.index, 3);
  EXPECT_EQ(back.count, 4);
  EXPECT_EQ(back.connection_id, hello.connection_id);
  EXPECT_EQ(back.min_stripe, hello.min_stripe);

  uint8_t header_bytes[kHeaderBytes];
  encodeHeader(Header{kHeaderMagic, -5, 5ull << 32}, header_bytes);
  Header header = decodeHeader(header_bytes);
  EXPECT_EQ(header.magic, kHeaderMagic);
  EXPECT_EQ(header.tag, -5);
  EXPECT_EQ(header.size, 5ull << 32);
}

TEST(Wire, HandleRoundTrip) {
  for (const char* text : {"10.1.2.3", "::1"}) {
    SockAddr addr;
    ASSERT_TRUE(resolve(text, 4321, false, &addr).isOk()) << text;
    ConnectHandle handle{};
    ASSERT_TRUE(encodeHandle(addr, &handle).isOk());
    SockAddr back;
    ASSERT_TRUE(decodeHandle(handle, &back).isOk());
    EXPECT_EQ(back.toString(), addr.toString());
    EXPECT_EQ(back.port(), 4321);
  }
  ConnectHandle zero{};
  SockAddr addr;
  EXPECT_EQ(decodeHandle(zero, &addr).code(), StatusCode::kInvalidUsage);
}

TEST(Address, ResolveNamesAndFormats) {
  SockAddr addr;
  ASSERT_TRUE(resolve("localhost", 80, false, &addr).isOk());
  EXPECT_EQ(addr.port(), 80);
  ASSERT_TRUE(resolve("127.0.0.1", 9, false, &addr).isOk());
  EXPECT_EQ(addr.toString(), "127.0.0.1:9");
  ASSERT_TRUE(resolve("::1", 9, false, &addr).isOk());
  EXPECT_EQ(addr.toString(), "[::1]:9");
  EXPECT_FALSE(resolve("no-such-host.invalid", 1, false, &addr).isOk());
}

}  // namespace
}  // namespace tally::transport::tcp
