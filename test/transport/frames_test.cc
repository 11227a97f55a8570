// SPDX-License-Identifier: Apache-2.0
// The TCP framing on a caller-driven socket (transport/raw_stream.h), over a socketpair: many
// messages of odd sizes, partial reads and writes through a tiny send buffer, garbage, and the
// two kinds of EOF.
#include "transport/raw_stream.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "transport/tcp/fd.h"
#include "transport/tcp/wire.h"

namespace tally::transport::tcp {
namespace {

struct Pair {
  Fd a, b;
};

Pair socketPair(int sndbuf = 0) {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  Pair p{Fd(fds[0]), Fd(fds[1])};
  if (sndbuf > 0) {
    EXPECT_EQ(::setsockopt(p.a.get(), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
    EXPECT_EQ(::setsockopt(p.b.get(), SOL_SOCKET, SO_RCVBUF, &sndbuf, sizeof(sndbuf)), 0);
  }
  return p;
}

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 9)) & 0xff);
  return v;
}

void waitFor(int fd, short events) {
  pollfd p{fd, events, 0};
  ASSERT_GE(::poll(&p, 1, 5000), 1) << "socket never became ready";
}

// Reads one whole message with `reader`, polling when it would block.
Status readMessage(FrameReader* reader, int fd, FrameHeader* header, std::vector<uint8_t>* body) {
  FrameReader::Event ev = FrameReader::Event::kNone;
  for (;;) {
    TALLY_RETURN_IF_ERROR(reader->read(fd, &ev));
    if (ev == FrameReader::Event::kHeader) break;
    if (ev == FrameReader::Event::kNone) waitFor(fd, POLLIN);
  }
  *header = reader->header();
  body->assign(header->size, 0);
  reader->setBody(body->data());
  for (;;) {
    TALLY_RETURN_IF_ERROR(reader->read(fd, &ev));
    if (ev == FrameReader::Event::kBody) return Status::ok();
    EXPECT_EQ(ev, FrameReader::Event::kNone);
    waitFor(fd, POLLIN);
  }
}

const std::vector<size_t> kSizes = {0,       1,     15,    16,           17, 4095, 16383,  16384,
                                    32767,   32768, 32769, 65536 + 3,    0,  7,    200000, 3,
                                    1 << 20, 0,     12345, (1 << 20) + 1};

// Writer and reader run at once; every message must arrive whole, in order, with its tag.
void roundTrip(int sndbuf) {
  Pair p = socketPair(sndbuf);
  std::vector<std::vector<uint8_t>> bodies;
  for (size_t i = 0; i < kSizes.size(); ++i) bodies.push_back(pattern(kSizes[i], i));
  std::thread writer([&] {
    FrameQueue q;
    size_t total_written = 0;
    for (size_t i = 0; i < bodies.size(); ++i)
      q.push(static_cast<int>(100 + i), bodies[i].data(), bodies[i].size());
    EXPECT_EQ(q.size(), bodies.size());
    while (!q.empty()) {
      size_t written = 0;
      bool blocked = false;
      ASSERT_TRUE(q.flush(p.a.get(), "b", &written, &blocked).isOk());
      total_written += written;
      if (blocked)
        waitFor(p.a.get(), POLLOUT);
      else
        EXPECT_TRUE(q.empty());
    }
    EXPECT_EQ(total_written, bodies.size());
  });
  FrameReader reader("a");
  for (size_t i = 0; i < bodies.size(); ++i) {
    FrameHeader h;
    std::vector<uint8_t> got;
    Status st = readMessage(&reader, p.b.get(), &h, &got);
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_EQ(h.tag, static_cast<int>(100 + i));
    ASSERT_EQ(got.size(), bodies[i].size()) << "message " << i;
    EXPECT_TRUE(got == bodies[i]) << "message " << i << " differs";
  }
  writer.join();
  EXPECT_TRUE(reader.betweenMessages());
}

TEST(FramesTest, ManyOddSizesRoundTrip) { roundTrip(0); }

TEST(FramesTest, TinySendBufferForcesPartialWritesAndReads) { roundTrip(4096); }

// A slice's payload follows its header: once the header is part-way out, dropping what has not
// started keeps the payload (and the stream well formed), and drops the next slice whole.
// Before, the payload went and the next message landed where the reader expected its bytes.
TEST(FramesTest, DropUnstartedKeepsTheFollowerOfAStartedMessage) {
  Pair p = socketPair(4096);
  const auto header = pattern(1 << 20, 3);  // big enough to block part-way
  const auto payload = pattern(5000, 4);
  const uint8_t next[4] = {9, 8, 7, 6};
  const uint8_t last[3] = {1, 2, 3};
  constexpr int kHeaderTag = 1, kPayloadTag = 2;
  FrameQueue q;
  q.push(kHeaderTag, header.data(), header.size());
  q.push(kPayloadTag, payload.data(), payload.size());
  q.push(kHeaderTag, next, sizeof(next));
  q.push(kPayloadTag, next, sizeof(next));
  size_t written = 0;
  bool blocked = false;
  ASSERT_TRUE(q.flush(p.a.get(), "b", &written, &blocked).isOk());
  ASSERT_TRUE(blocked);
  q.dropUnstarted(kPayloadTag);
  EXPECT_EQ(q.size(), 2u);  // the started header and its payload
  q.push(3, last, sizeof(last));
  std::thread writer([&] {
    while (!q.empty()) {
      size_t w = 0;
      bool b = false;
      ASSERT_TRUE(q.flush(p.a.get(), "b", &w, &b).isOk());
      if (b) waitFor(p.a.get(), POLLOUT);
    }
  });
  FrameReader reader("a");
  FrameHeader h;
  std::vector<uint8_t> got;
  ASSERT_TRUE(readMessage(&reader, p.b.get(), &h, &got).isOk());
  EXPECT_EQ(h.tag, kHeaderTag);
  EXPECT_EQ(got, header);
  ASSERT_TRUE(readMessage(&reader, p.b.get(), &h, &got).isOk());
  EXPECT_EQ(h.tag, kPayloadTag);
  EXPECT_EQ(got, payload);
  ASSERT_TRUE(readMessage(&reader, p.b.get(), &h, &got).isOk());
  EXPECT_EQ(h.tag, 3);
  EXPECT_EQ(got, std::vector<uint8_t>(last, last + sizeof(last)));
  writer.join();
}

TEST(FramesTest, FlushBlocksWhenNobodyReadsAndResumesExactly) {
  Pair p = socketPair(4096);
  const auto big = pattern(1 << 20, 9);
  const uint8_t small[3] = {1, 2, 3};
  FrameQueue q;
  q.push(1, big.data(), big.size());
  q.push(2, small, sizeof(small));
  size_t written = 0;
  bool blocked = false;
  ASSERT_TRUE(q.flush(p.a.get(), "b", &written, &blocked).isOk());
  EXPECT_TRUE(blocked);
  EXPECT_EQ(written, 0u);
  EXPECT_EQ(q.size(), 2u);
  // The part-way message stays; the untouched one goes.
  q.dropUnstarted();
  EXPECT_EQ(q.size(), 1u);
  q.push(3, small, sizeof(small));
  std::thread writer([&] {
    while (!q.empty()) {
      size_t w = 0;
      bool b = false;
      ASSERT_TRUE(q.flush(p.a.get(), "b", &w, &b).isOk());
      if (b) waitFor(p.a.get(), POLLOUT);
    }
  });
  FrameReader reader("a");
  FrameHeader h;
  std::vector<uint8_t> got;
  ASSERT_TRUE(readMessage(&reader, p.b.get(), &h, &got).isOk());
  EXPECT_EQ(h.tag, 1);
  EXPECT_TRUE(got == big);
  ASSERT_TRUE(readMessage(&reader, p.b.get(), &h, &got).isOk());
  EXPECT_EQ(h.tag, 3);
  EXPECT_EQ(got, std::vector<uint8_t>(small, small + 3));
  writer.join();
}

TEST(FramesTest, GarbageMagicIsAnError) {
  Pair p = socketPair();
  uint8_t junk[kHeaderBytes];
  std::memset(junk, 0x5a, sizeof(junk));
  ASSERT_EQ(::write(p.a.get(), junk, sizeof(junk)), static_cast<ssize_t>(sizeof(junk)));
  FrameReader reader("peer-a");
  FrameReader::Event ev;
  Status st = reader.read(p.b.get(), &ev);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("garbage"), std::string::npos) << st.toString();

  // recvFrame too.
  Pair q = socketPair();
  ASSERT_EQ(::write(q.a.get(), junk, sizeof(junk)), static_cast<ssize_t>(sizeof(junk)));
  uint8_t body[64];
  size_t size = 0;
  st = recvFrame(q.b.get(), 7, body, sizeof(body), &size, 1000, "peer-a");
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("garbage"), std::string::npos) << st.toString();
}

TEST(FramesTest, CleanEofBetweenMessages) {
  Pair p = socketPair();
  const uint8_t msg[5] = {9, 8, 7, 6, 5};
  ASSERT_TRUE(sendFrame(p.a.get(), 4, msg, sizeof(msg), 1000, "b").isOk());
  p.a.reset();
  FrameReader reader("a");
  FrameHeader h;
  std::vector<uint8_t> got;
  ASSERT_TRUE(readMessage(&reader, p.b.get(), &h, &got).isOk());
  EXPECT_EQ(got, std::vector<uint8_t>(msg, msg + 5));
  FrameReader::Event ev;
  Status st = reader.read(p.b.get(), &ev);
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.code(), StatusCode::kRemote);
  EXPECT_TRUE(reader.cleanEof());
}

TEST(FramesTest, EofMidMessageIsNotClean) {
  for (size_t cut : {size_t{5}, kHeaderBytes + 10}) {
    Pair p = socketPair();
    const auto body = pattern(100, 1);
    // Write only the first `cut` bytes of the framed message by hand.
    uint8_t header[kHeaderBytes];
    encodeHeader(Header{kHeaderMagic, 1, body.size()}, header);
    std::vector<uint8_t> wire(header, header + kHeaderBytes);
    wire.insert(wire.end(), body.begin(), body.end());
    ASSERT_EQ(::write(p.a.get(), wire.data(), cut), static_cast<ssize_t>(cut));
    p.a.reset();
    FrameReader reader("a");
    std::vector<uint8_t> got(body.size());
    Status st;
    FrameReader::Event ev = FrameReader::Event::kNone;
    for (int i = 0; i < 10 && st.isOk(); ++i) {
      st = reader.read(p.b.get(), &ev);
      if (st.isOk() && ev == FrameReader::Event::kHeader) reader.setBody(got.data());
      ASSERT_NE(ev, FrameReader::Event::kBody);
    }
    ASSERT_FALSE(st.isOk()) << "cut " << cut;
    EXPECT_FALSE(reader.cleanEof()) << "cut " << cut;
  }
}

TEST(FramesTest, RecvFrameReadsExactlyOneMessageThenReaderTakesOver) {
  Pair p = socketPair();
  const uint8_t one[4] = {1, 1, 1, 1};
  const auto two = pattern(70000, 2);
  FrameQueue q;
  q.push(11, one, sizeof(one));
  q.push(12, two.data(), two.size());
  std::thread writer([&] {
    while (!q.empty()) {
      size_t w = 0;
      bool b = false;
      ASSERT_TRUE(q.flush(p.a.get(), "b", &w, &b).isOk());
      if (b) waitFor(p.a.get(), POLLOUT);
    }
  });
  uint8_t buf[16];
  size_t size = 0;
  ASSERT_TRUE(recvFrame(p.b.get(), 11, buf, sizeof(buf), &size, 2000, "a").isOk());
  EXPECT_EQ(size, 4u);
  FrameReader reader("a");
  FrameHeader h;
  std::vector<uint8_t> got;
  ASSERT_TRUE(readMessage(&reader, p.b.get(), &h, &got).isOk());
  EXPECT_EQ(h.tag, 12);
  EXPECT_TRUE(got == two);
  writer.join();
}

TEST(FramesTest, RecvFrameRefusesWrongTagOrSizeAndTimesOut) {
  Pair p = socketPair();
  const auto body = pattern(100, 3);
  ASSERT_TRUE(sendFrame(p.a.get(), 5, body.data(), body.size(), 1000, "b").isOk());
  uint8_t buf[64];
  size_t size = 0;
  Status st = recvFrame(p.b.get(), 5, buf, sizeof(buf), &size, 1000, "a");  // too big
  EXPECT_EQ(st.code(), StatusCode::kRemote) << st.toString();
  Pair q = socketPair();
  ASSERT_TRUE(sendFrame(q.a.get(), 6, body.data(), 10, 1000, "b").isOk());
  st = recvFrame(q.b.get(), 5, buf, sizeof(buf), &size, 1000, "a");  // wrong tag
  EXPECT_EQ(st.code(), StatusCode::kRemote) << st.toString();
  st = recvFrame(q.b.get(), 5, buf, sizeof(buf), &size, 50, "a");  // nothing more comes
  EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.toString();
}

TEST(FramesTest, SendFrameTimesOutWhenThePeerNeverReads) {
  Pair p = socketPair(4096);
  const auto big = pattern(4 << 20, 4);
  Status st = sendFrame(p.a.get(), 1, big.data(), big.size(), 50, "b");
  EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.toString();
}

TEST(FramesTest, WritingToAClosedPeerIsAnError) {
  Pair p = socketPair();
  p.b.reset();
  const uint8_t x = 1;
  FrameQueue q;
  q.push(1, &x, 1);
  size_t w = 0;
  bool b = false;
  Status st = q.flush(p.a.get(), "b", &w, &b);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("peer b"), std::string::npos) << st.toString();
}

}  // namespace
}  // namespace tally::transport::tcp
