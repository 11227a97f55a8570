// SPDX-License-Identifier: Apache-2.0
// FrameQueue's MSG_ZEROCOPY sends (transport/raw_stream.h) over a TCP connection on loopback: a
// message is released only once the kernel's completion for it was read, in order, and the
// bytes arrive whole. On loopback the kernel copies when it delivers, and says so in the
// completion: mode `on` then goes back to copying, `always` does not. What these tests cannot
// show is the saving, which needs a device that sends from the pages (docs/datapath.md).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <thread>
#include <vector>

#include "common/fd.h"
#include "transport/raw_stream.h"

namespace tally::transport {
namespace {

struct TcpPair {
  Fd sender, receiver;
};

// A connected pair of TCP sockets on 127.0.0.1; the sender non-blocking.
TcpPair tcpPair() {
  TcpPair p;
  Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(::listen(listener.get(), 1), 0);
  EXPECT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  p.sender.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_EQ(::connect(p.sender.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  p.receiver.reset(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  EXPECT_TRUE(p.receiver.valid());
  EXPECT_TRUE(setStreamNonBlocking(p.sender.get(), true).isOk());
  return p;
}

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 167 + seed * 29 + (i >> 11)));
  return v;
}

struct Received {
  int tag;
  std::vector<uint8_t> body;
};

// Reads `count` messages from a blocking socket.
std::vector<Received> readMessages(int fd, size_t count) {
  std::vector<Received> out;
  FrameReader reader("sender");
  FrameReader::Event ev = FrameReader::Event::kNone;
  size_t whole = 0;
  while (whole < count) {
    const Status st = reader.read(fd, &ev);
    if (!st.isOk()) {
      ADD_FAILURE() << st.toString();
      return out;
    }
    if (ev == FrameReader::Event::kHeader) {
      out.push_back({reader.header().tag, std::vector<uint8_t>(reader.header().size)});
      reader.setBody(out.back().body.data());
    } else if (ev == FrameReader::Event::kBody) {
      ++whole;
    } else if (ev == FrameReader::Event::kNone) {
      pollfd pfd{fd, POLLIN, 0};
      if (::poll(&pfd, 1, 5000) != 1) {
        ADD_FAILURE() << "nothing to read for 5 s after " << out.size() << " messages";
        return out;
      }
    }
  }
  return out;
}

// Flushes and reads completions until every message was released; false after 5 s.
bool drain(FrameQueue* q, int fd, size_t* released) {
  for (int i = 0; i < 500 && !q->empty(); ++i) {
    size_t n = 0;
    bool blocked = false;
    bool any = false;
    if (!q->flush(fd, "receiver", &n, &blocked).isOk()) return false;
    *released += n;
    pollfd pfd{fd, static_cast<short>(blocked ? POLLOUT : 0), 0};
    ::poll(&pfd, 1, 10);  // POLLERR: completions are in
    if (!q->reapCompletions(fd, &n, &any).isOk()) return false;
    *released += n;
  }
  return q->empty();
}

TEST(ZerocopyTest, ModesParse) {
  ZerocopyMode m = ZerocopyMode::kOff;
  ASSERT_TRUE(parseZerocopyMode("always", &m).isOk());
  EXPECT_EQ(m, ZerocopyMode::kAlways);
  ASSERT_TRUE(parseZerocopyMode("on", &m).isOk());
  EXPECT_EQ(m, ZerocopyMode::kOn);
  ASSERT_TRUE(parseZerocopyMode("off", &m).isOk());
  EXPECT_EQ(m, ZerocopyMode::kOff);
  EXPECT_FALSE(parseZerocopyMode("yes", &m).isOk());
  EXPECT_STREQ(zerocopyModeName(ZerocopyMode::kAlways), "always");
}

// Large bodies with small ones between them: nothing is released by the writes themselves, the
// small messages wait behind the large ones, and every byte arrives.
TEST(ZerocopyTest, MessagesAreReleasedOnlyAfterTheirCompletionsInOrder) {
  TcpPair p = tcpPair();
  FrameQueue q;
  Status st = q.enableZerocopy(p.sender.get(), ZerocopyMode::kAlways);
  if (!st.isOk()) GTEST_SKIP() << "this kernel has no MSG_ZEROCOPY: " << st.toString();
  std::vector<std::vector<uint8_t>> bodies;
  const size_t sizes[] = {256 * 1024, 40, 300 * 1024 + 7, 0, 128 * 1024, 3};
  for (size_t i = 0; i < std::size(sizes); ++i) bodies.push_back(pattern(sizes[i], i));
  for (size_t i = 0; i < bodies.size(); ++i)
    q.push(static_cast<int>(10 + i), bodies[i].data(), bodies[i].size());

  std::vector<Received> got;
  std::thread reader([&] { got = readMessages(p.receiver.get(), bodies.size()); });
  size_t released = 0;
  bool blocked = false;
  ASSERT_TRUE(q.flush(p.sender.get(), "receiver", &released, &blocked).isOk());
  // The first message went with MSG_ZEROCOPY: it and every one behind it wait for completions.
  EXPECT_EQ(released, 0u);
  EXPECT_TRUE(q.awaitingCompletions());
  EXPECT_GE(q.zerocopyCounts().sends, 1u);
  ASSERT_TRUE(drain(&q, p.sender.get(), &released));
  reader.join();
  EXPECT_EQ(released, bodies.size());
  EXPECT_FALSE(q.awaitingCompletions());
  ASSERT_EQ(got.size(), bodies.size());
  for (size_t i = 0; i < bodies.size(); ++i) {
    EXPECT_EQ(got[i].tag, static_cast<int>(10 + i));
    EXPECT_TRUE(got[i].body == bodies[i]) << "message " << i << " differs";
  }
  // Loopback delivers by copying, and the completions say so; `always` kept sending zero-copy.
  EXPECT_EQ(q.zerocopyCounts().copied, q.zerocopyCounts().sends);
}

// A body reused as soon as its message is released must not change what was sent: the bytes
// the receiver gets are those of the time of the push, over many rounds through one buffer.
TEST(ZerocopyTest, ABufferReusedAfterItsReleaseSendsWhatItHeldThen) {
  TcpPair p = tcpPair();
  FrameQueue q;
  Status st = q.enableZerocopy(p.sender.get(), ZerocopyMode::kAlways, 0);
  if (!st.isOk()) GTEST_SKIP() << "this kernel has no MSG_ZEROCOPY: " << st.toString();
  constexpr size_t kRounds = 64;
  constexpr size_t kBytes = 96 * 1024 + 5;
  std::vector<Received> got;
  std::thread reader([&] { got = readMessages(p.receiver.get(), kRounds); });
  std::vector<uint8_t> buffer(kBytes);
  for (size_t r = 0; r < kRounds; ++r) {
    buffer = pattern(kBytes, static_cast<uint32_t>(r));
    q.push(static_cast<int>(r), buffer.data(), buffer.size());
    size_t released = 0;
    ASSERT_TRUE(drain(&q, p.sender.get(), &released));
    ASSERT_EQ(released, 1u) << "round " << r;
  }
  reader.join();
  ASSERT_EQ(got.size(), kRounds);
  for (size_t r = 0; r < kRounds; ++r) {
    EXPECT_TRUE(got[r].body == pattern(kBytes, static_cast<uint32_t>(r))) << "round " << r;
  }
  EXPECT_EQ(q.zerocopyCounts().sends, kRounds);
}

// `on` stops pinning pages once a completion says the kernel copied (as loopback always does).
TEST(ZerocopyTest, OnGoesBackToCopyingWhenTheKernelCopied) {
  TcpPair p = tcpPair();
  FrameQueue q;
  Status st = q.enableZerocopy(p.sender.get(), ZerocopyMode::kOn);
  if (!st.isOk()) GTEST_SKIP() << "this kernel has no MSG_ZEROCOPY: " << st.toString();
  const auto big = pattern(512 * 1024, 1);
  std::vector<Received> got;
  std::thread reader([&] { got = readMessages(p.receiver.get(), 3); });
  size_t released = 0;
  q.push(1, big.data(), big.size());
  ASSERT_TRUE(drain(&q, p.sender.get(), &released));
  const uint64_t sends = q.zerocopyCounts().sends;
  EXPECT_GE(sends, 1u);
  ASSERT_EQ(q.zerocopyCounts().copied, sends);
  // Copied from now on: released as soon as written.
  q.push(2, big.data(), big.size());
  q.push(3, big.data(), big.size());
  bool blocked = true;
  size_t written = 0;
  while (blocked) {
    ASSERT_TRUE(q.flush(p.sender.get(), "receiver", &written, &blocked).isOk());
    released += written;
    if (blocked) {
      pollfd pfd{p.sender.get(), POLLOUT, 0};
      ::poll(&pfd, 1, 1000);
    }
  }
  EXPECT_EQ(released, 3u);
  EXPECT_EQ(q.zerocopyCounts().sends, sends);
  reader.join();
  ASSERT_EQ(got.size(), 3u);
  for (const Received& r : got) EXPECT_TRUE(r.body == big) << "message " << r.tag;
}

// Batches under the threshold are copied and released at once, even in `always`.
TEST(ZerocopyTest, SmallBatchesAreCopied) {
  TcpPair p = tcpPair();
  FrameQueue q;
  Status st = q.enableZerocopy(p.sender.get(), ZerocopyMode::kAlways);
  if (!st.isOk()) GTEST_SKIP() << "this kernel has no MSG_ZEROCOPY: " << st.toString();
  const auto small = pattern(1000, 3);
  q.push(7, small.data(), small.size());
  size_t released = 0;
  bool blocked = false;
  ASSERT_TRUE(q.flush(p.sender.get(), "receiver", &released, &blocked).isOk());
  EXPECT_EQ(released, 1u);
  EXPECT_EQ(q.zerocopyCounts().sends, 0u);
  std::vector<Received> got = readMessages(p.receiver.get(), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].body == small);
}

// A plain TCP option on a socket that is not TCP: refused, and the queue goes on copying.
TEST(ZerocopyTest, ASocketWithoutItKeepsCopying) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  Fd a(fds[0]), b(fds[1]);
  FrameQueue q;
  const Status st = q.enableZerocopy(a.get(), ZerocopyMode::kOn);
  if (st.isOk()) GTEST_SKIP() << "this kernel takes SO_ZEROCOPY on a Unix socket";
  EXPECT_FALSE(q.zerocopyEnabled());
  const auto body = pattern(200 * 1024, 5);
  q.push(1, body.data(), body.size());
  std::vector<Received> got;
  std::thread reader([&] { got = readMessages(b.get(), 1); });
  size_t released = 0;
  bool blocked = true;
  while (blocked) {
    size_t n = 0;
    ASSERT_TRUE(q.flush(a.get(), "b", &n, &blocked).isOk());
    released += n;
    if (blocked) {
      pollfd pfd{a.get(), POLLOUT, 0};
      ::poll(&pfd, 1, 1000);
    }
  }
  reader.join();
  EXPECT_EQ(released, 1u);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].body == body);
}

}  // namespace
}  // namespace tally::transport
