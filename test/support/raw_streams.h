// SPDX-License-Identifier: Apache-2.0
// Raw TCP sockets to a reducer for tests that play a misbehaving peer: a plain connect, and a
// connection of one or more streams that said the TCP transport's hello and then do whatever the
// test makes them do (nothing, junk, a stall). Loopback only.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/fd.h"
#include "common/status.h"
#include "protocol/wire.h"
#include "test/transport/tcp_raw.h"
#include "transport/raw_stream.h"

namespace tally::reducer::test {
// The protocol and the worker-side client, as the tests drive both ends.
namespace wire = protocol::wire;
using namespace ::tally::protocol;

// The port of "HOST:PORT".
inline int portOf(const std::string& address) {
  return std::stoi(address.substr(address.rfind(':') + 1));
}

// A socket connected to 127.0.0.1:port that has said nothing; invalid when none could be made.
// Close-on-exec, so a reducer started later does not inherit it.
inline Fd rawConnect(int port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return fd;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Fd();
  }
  return fd;
}

// One connection of `streams` raw sockets to `address`, each of which sent its transport hello
// (connection `id`). Empty when a socket could not be connected or its hello not sent whole.
inline std::vector<Fd> connectStreams(const std::string& address, int streams, uint64_t id) {
  std::vector<Fd> fds;
  for (int i = 0; i < streams; ++i) {
    Fd fd = rawConnect(portOf(address));
    if (!fd.valid()) return {};
    const auto bytes =
        ::tally::test::tcp_raw::hello(static_cast<uint16_t>(i), static_cast<uint16_t>(streams), id);
    if (::send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(bytes.size())) {
      return {};
    }
    fds.push_back(std::move(fd));
  }
  return fds;
}

// How long the helpers below wait for a socket to take or give a message.
inline constexpr int64_t kRawWaitMs = 5000;

// A header-tagged message on stream 0 (every control message is small enough to travel there
// alone), and the next one read from it.
inline Status sendMsg(int fd, const wire::Frame& f) {
  return transport::sendFrame(fd, wire::kTagHeader, f.data(), f.size, kRawWaitMs, "reducer");
}
inline Status recvMsg(int fd, std::array<uint8_t, wire::kMaxHeaderBytes>* buf, size_t* got) {
  return transport::recvFrame(fd, wire::kTagHeader, buf->data(), buf->size(), got, kRawWaitMs,
                              "reducer");
}

// A member that stalls mid-payload: the slice header h, then the payload's transport header and
// the first `sent` of its `bytes` bytes, then nothing.
inline Status sendPartOfASlice(int fd, const wire::SliceHeader& h, const void* payload,
                               size_t bytes, size_t sent) {
  Status st = sendMsg(fd, wire::encodeSlice(h));
  if (!st.isOk()) return st;
  const auto header = ::tally::test::tcp_raw::header(wire::kTagPayload, bytes);
  if (::send(fd, header.data(), header.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(header.size()) ||
      ::send(fd, payload, sent, MSG_NOSIGNAL) != static_cast<ssize_t>(sent)) {
    return Status::system("test: could not send part of a slice");
  }
  return Status::ok();
}

// A member that does not read its results: whole slices like h (seq counting up from 0) until
// the socket takes no more, so the reducer's results back up behind them (the last one is sent
// only in part, a stall mid-payload later on).
inline Status sendSlicesUntilBlocked(int fd, wire::SliceHeader h, const void* payload,
                                     size_t bytes) {
  for (uint64_t seq = 0; seq < 100000; ++seq) {
    h.seq = seq;
    const wire::Frame slice = wire::encodeSlice(h);
    transport::FrameQueue q;
    q.push(wire::kTagHeader, slice.data(), slice.size);
    q.push(wire::kTagPayload, payload, bytes);
    size_t written = 0;
    bool blocked = false;
    Status st = q.flush(fd, "reducer", &written, &blocked);
    if (!st.isOk() || blocked) return st;
  }
  return Status::internal("test: the reducer never stopped reading");
}

}  // namespace tally::reducer::test
