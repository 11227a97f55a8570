// SPDX-License-Identifier: Apache-2.0
// A member whose connection dies of the I/O timeout is released. The worker here
// is a raw socket speaking the TCP transport's framing, so it can stop anywhere: it joins a
// one-rank communicator and then either stops in the middle of a slice's payload or sends slices
// and never reads their results. Once nothing moves for the I/O timeout the reducer must drop
// the connection, its communicator and its reservation, and not poll the dead connection as a
// live one. Both ways a connection is served: an event loop (one socket) and a reader and a
// writer thread (two sockets); and the event loop with zero-copy sends.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/fd.h"
#include "protocol/wire.h"
#include "test/support/counting_observer.h"
#include "test/support/harness.h"
#include "test/support/raw_streams.h"
#include "transport/raw_stream.h"

namespace tally::reducer::test {
namespace {

namespace tcp = transport::tcp;

constexpr int64_t kIoTimeoutMs = 300;
constexpr int64_t kWaitMs = 5000;
constexpr uint64_t kSliceBytes = 4096;

enum class Stall { kMidPayload, kNotReading };

// zerocopy: results go with MSG_ZEROCOPY, every write of them.
void expectReleasedAtTheIoTimeout(int streams, Stall stall, bool zerocopy) {
  CountingObserver observer;
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.threads = 1;
  o.window = 4;
  o.timeouts.io_ms = kIoTimeoutMs;
  o.observer = &observer;
  if (zerocopy) {
    o.zerocopy = transport::ZerocopyMode::kAlways;
    o.zerocopy_min_bytes = 0;
  }
  std::unique_ptr<ReducerServer> server;
  ASSERT_TRUE(ReducerServer::start(o, &server).isOk());

  std::vector<Fd> fds = connectStreams(server->address(), streams, 0x57a11ed);
  ASSERT_EQ(fds.size(), static_cast<size_t>(streams));
  const int fd = fds[0].get();  // headers and small payloads travel on stream 0 alone
  std::array<uint8_t, wire::kMaxHeaderBytes> buf;
  size_t got = 0;
  ASSERT_TRUE(recvMsg(fd, &buf, &got).isOk());  // the Challenge
  wire::Hello hello;
  hello.comm = wire::CommId{0x57a11, static_cast<uint64_t>(streams)};
  hello.nranks = 1;
  hello.nreducers = 1;
  hello.slice_bytes = kSliceBytes;
  hello.min_slice_bytes = kSliceBytes;
  hello.window = 4;
  ASSERT_TRUE(sendMsg(fd, wire::encodeHello(hello)).isOk());
  ASSERT_TRUE(recvMsg(fd, &buf, &got).isOk());  // Ready
  ASSERT_EQ(observer.communicators.load(), 1);

  std::vector<float> payload(kSliceBytes / sizeof(float), 1.0f);
  wire::SliceHeader h;
  h.count = payload.size();
  h.total_count = payload.size();
  // Mid-payload: the payload's transport header and 100 of its 4096 bytes, then nothing. Not
  // reading: slices whose results are never read, until the socket takes no more.
  const Status st = stall == Stall::kMidPayload
                        ? sendPartOfASlice(fd, h, payload.data(), kSliceBytes, 100)
                        : sendSlicesUntilBlocked(fd, h, payload.data(), kSliceBytes);
  ASSERT_TRUE(st.isOk()) << st.toString();
  // Within a few timeouts the connection, the communicator and its reservation are gone.
  EXPECT_TRUE(waitUntil(
      [&] { return observer.connections.load() == 0 && observer.communicators.load() == 0; },
      std::chrono::milliseconds(10 * kIoTimeoutMs + 3000)))
      << observer.connections.load() << " connections, " << observer.communicators.load()
      << " communicators still open";
  if (zerocopy) {
    EXPECT_GT(observer.zerocopy_sends.load(), 0u);
  }
  fds.clear();
  server->stop();
}

class StalledMember : public ::testing::TestWithParam<std::tuple<int, Stall>> {};

TEST_P(StalledMember, IsReleasedAtTheIoTimeout) {
  const auto [streams, stall] = GetParam();
  expectReleasedAtTheIoTimeout(streams, stall, false);
}

// With zero-copy sends the results a worker does not read are never acknowledged, so they wait
// for completions rather than for room in the socket: the same timeout ends the connection, and
// its close (a reset, with the buffers kept a moment) ends the communicator.
TEST(StalledMemberZerocopy, NotReadingIsReleasedAtTheIoTimeout) {
  expectReleasedAtTheIoTimeout(1, Stall::kNotReading, true);
}

INSTANTIATE_TEST_SUITE_P(
    Served, StalledMember,
    ::testing::Combine(::testing::Values(1, 2),
                       ::testing::Values(Stall::kMidPayload, Stall::kNotReading)),
    [](const ::testing::TestParamInfo<std::tuple<int, Stall>>& param) {
      return std::string(std::get<0>(param.param) == 1 ? "EventLoop" : "Threads") +
             (std::get<1>(param.param) == Stall::kMidPayload ? "_MidPayload" : "_NotReading");
    });

}  // namespace
}  // namespace tally::reducer::test
