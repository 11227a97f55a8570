// SPDX-License-Identifier: Apache-2.0
// Loopback numbers for the ofi backend beside TCP: ping-pong latency of small messages and the
// bandwidth of 4 MiB messages. Printed for the record, never asserted on (a shared CI machine's
// timings say nothing); the bytes are checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "test/transport/test_util.h"
#include "transport/ofi/ofi.h"

namespace tally::transport::test {
namespace {

using Clock = std::chrono::steady_clock;

Status ofiPair(std::unique_ptr<Connection>* a, std::unique_ptr<Connection>* b) {
  ofi::OfiOptions options;
  options.provider = "tcp";
  options.domains = "lo";
  std::shared_ptr<Network> network;
  TALLY_RETURN_IF_ERROR(ofi::createNetwork(options, &network));
  std::unique_ptr<Listener> listener;
  TALLY_RETURN_IF_ERROR(network->devices().front()->listen(&listener));
  std::unique_ptr<PendingConnection> pending;
  TALLY_RETURN_IF_ERROR(network->devices().front()->connect(listener->handle(), {}, &pending));
  return finishConnect(pending.get(), listener.get(), a, b);
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Round trips of `size` bytes; the median microseconds per round trip.
double pingPong(Connection* a, Connection* b, size_t size, int rounds) {
  std::vector<uint8_t> out = pattern(size, 1);
  std::vector<uint8_t> in(size);
  std::vector<uint8_t> echo(size);
  std::vector<double> each;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = Clock::now();
    std::unique_ptr<Request> r1, s1, r2, s2;
    void* p = echo.data();
    size_t cap = size;
    int tag = 0;
    EXPECT_TRUE(b->irecv(1, &p, &cap, &tag, nullptr, &r1).isOk());
    EXPECT_TRUE(a->isend(out.data(), size, 0, nullptr, &s1).isOk());
    EXPECT_TRUE(r1->wait(kWaitMs, nullptr).isOk());
    void* q = in.data();
    EXPECT_TRUE(a->irecv(1, &q, &cap, &tag, nullptr, &r2).isOk());
    EXPECT_TRUE(b->isend(echo.data(), size, 0, nullptr, &s2).isOk());
    EXPECT_TRUE(r2->wait(kWaitMs, nullptr).isOk());
    EXPECT_TRUE(s1->wait(kWaitMs, nullptr).isOk());
    EXPECT_TRUE(s2->wait(kWaitMs, nullptr).isOk());
    each.push_back(seconds(Clock::now() - t0) * 1e6);
  }
  EXPECT_EQ(in, out);
  // The median: the first round also pays for the provider's connection handshake.
  std::sort(each.begin(), each.end());
  return each[each.size() / 2];
}

// One-way streaming of `count` messages of `size` bytes, `window` in flight; MB/s.
double stream(Connection* a, Connection* b, size_t size, int count, int window) {
  std::vector<uint8_t> out = pattern(size, 2);
  std::vector<std::vector<uint8_t>> in(window, std::vector<uint8_t>(size));
  std::vector<std::unique_ptr<Request>> sends(count), recvs(count);
  auto start = Clock::now();
  for (int i = 0; i < count; ++i) {
    if (i >= window) {
      EXPECT_TRUE(recvs[i - window]->wait(kWaitMs, nullptr).isOk());
      EXPECT_TRUE(sends[i - window]->wait(kWaitMs, nullptr).isOk());
    }
    void* p = in[i % window].data();
    size_t cap = size;
    int tag = 0;
    EXPECT_TRUE(b->irecv(1, &p, &cap, &tag, nullptr, &recvs[i]).isOk());
    EXPECT_TRUE(a->isend(out.data(), size, 0, nullptr, &sends[i]).isOk());
  }
  for (int i = std::max(0, count - window); i < count; ++i) {
    EXPECT_TRUE(recvs[i]->wait(kWaitMs, nullptr).isOk());
    EXPECT_TRUE(sends[i]->wait(kWaitMs, nullptr).isOk());
  }
  const double elapsed = seconds(Clock::now() - start);
  for (const auto& buffer : in) EXPECT_EQ(buffer, out);
  return static_cast<double>(size) * count / elapsed / 1e6;
}

void report(const char* name, Connection* a, Connection* b) {
  const double small_us = pingPong(a, b, 8, 2000);
  const double medium_us = pingPong(a, b, 64 * 1024, 200);
  const double mbps = stream(a, b, 4u << 20, 200, 4);
  std::printf(
      "[ bench    ] %-4s round trip (median) 8 B %.0f us, 64 KiB %.0f us; "
      "4 MiB messages %.0f MB/s\n",
      name, small_us, medium_us, mbps);
}

TEST(OfiBench, LoopbackOfiAgainstTcp) {
  std::unique_ptr<Connection> a, b;
  Status status = ofiPair(&a, &b);
  if (!status.isOk()) GTEST_SKIP() << "ofi unavailable: " << status.toString();
  report("ofi", a.get(), b.get());
  a.reset();
  b.reset();
  tcp::TcpOptions options;
  ConnectionOptions conn_options;
  ASSERT_TRUE(tcpPair(options, conn_options, &a, &b).isOk());
  report("tcp", a.get(), b.get());
}

}  // namespace
}  // namespace tally::transport::test
