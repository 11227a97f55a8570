// SPDX-License-Identifier: Apache-2.0
// The raw stream framing (transport/raw_stream.h): the TCP backend's message header (wire.h).
#include "transport/raw_stream.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "transport/tcp/socket.h"
#include "transport/tcp/wire.h"
#include "transport/transport.h"

namespace tally::transport {

using tcp::decodeHeader;
using tcp::encodeHeader;
using tcp::Header;
using tcp::kHeaderBytes;
using tcp::kHeaderMagic;
static_assert(kHeaderBytes == kFrameHeaderBytes, "raw stream frames carry the TCP header");

namespace {

// Staged reads take up to this much per recv; a body of at least half of it is read in place.
constexpr size_t kStageBytes = 32 * 1024;
// A body over this is not a small message (the reducer protocol's headers are a few dozen bytes).
constexpr uint64_t kSmallBody = 1024;
// While large bodies are coming, a staged read takes only this much past what it needs: what it
// takes of the next large body is copied out of the stage again, which for slices of tens of
// KiB read with a full stage cost a tenth of all the bytes a second copy.
constexpr size_t kLookAhead = 512;
// A body still missing at least this much when the socket runs dry sets the socket's receive
// low-water mark (SO_RCVLOWAT) to what is missing, up to kMaxLowat: epoll then wakes the loop
// once for the rest instead of once per arriving packet (at MTU 1500, dozens per slice).
constexpr uint64_t kMinLowat = 8 * 1024;
constexpr uint64_t kMaxLowat = 256 * 1024;

bool wouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

using Clock = std::chrono::steady_clock;

// Waits until fd is ready for `events` or the deadline; kTimeout naming `what` then.
Status waitReady(int fd, short events, Clock::time_point deadline, const std::string& what) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Status::timeout(what);
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n > 0) return Status::ok();  // readable, writable, or an error the next call reports
    if (n < 0 && errno != EINTR) return Status::fromErrno("poll", errno);
  }
}

Clock::time_point deadlineIn(int64_t timeout_ms) {
  return timeout_ms < 0 ? Clock::time_point::max() - std::chrono::hours(1)
                        : Clock::now() + std::chrono::milliseconds(timeout_ms);
}

// Reads exactly `length` bytes before the deadline.
Status readExact(int fd, uint8_t* data, size_t length, Clock::time_point deadline,
                 const std::string& peer, const std::string& what) {
  while (length > 0) {
    const ssize_t got = ::recv(fd, data, length, MSG_DONTWAIT);
    if (got == 0) return Status::remote("peer " + peer + " closed the connection");
    if (got < 0) {
      if (errno == EINTR) continue;
      if (!wouldBlock(errno)) return Status::fromErrno("receive from peer " + peer, errno);
      TALLY_RETURN_IF_ERROR(waitReady(fd, POLLIN, deadline, what));
      continue;
    }
    data += got;
    length -= static_cast<size_t>(got);
  }
  return Status::ok();
}

}  // namespace

FrameReader::FrameReader(std::string peer)
    : peer_(std::move(peer)), stage_(new uint8_t[kStageBytes]) {}

Status FrameReader::recvSome(int fd, uint8_t* dst, size_t room, size_t* got) {
  for (;;) {
    const ssize_t n = ::recv(fd, dst, room, MSG_DONTWAIT);
    if (n > 0) {
      *got = static_cast<size_t>(n);
      return Status::ok();
    }
    if (n == 0) {
      clean_eof_ = betweenMessages();
      return Status::remote("peer " + peer_ + " closed the connection");
    }
    if (errno == EINTR) continue;
    if (wouldBlock(errno)) {
      *got = 0;
      return Status::ok();
    }
    return Status::fromErrno("receive from peer " + peer_, errno);
  }
}

void FrameReader::setBody(uint8_t* body) {
  body_ = body;
  body_got_ = 0;
  state_ = State::kBody;
}

Status FrameReader::read(int fd, Event* event) {
  for (;;) {
    const size_t staged = end_ - begin_;
    if (state_ == State::kHeader) {
      if (staged >= kHeaderBytes) {
        const Header header = decodeHeader(stage_.get() + begin_);
        if (header.magic != kHeaderMagic) {
          return protocolViolation(StatusCode::kRemote,
                                   "peer " + peer_ + " sent garbage instead of a message header");
        }
        header_ = FrameHeader{header.tag, header.size};
        begin_ += kHeaderBytes;
        state_ = State::kAwaitBody;
        *event = Event::kHeader;
        return Status::ok();
      }
      if (begin_ > 0) {  // keep the partial header at the front
        std::memmove(stage_.get(), stage_.get() + begin_, staged);
        begin_ = 0;
        end_ = staged;
      }
      size_t got = 0;
      const size_t room = kStageBytes - end_;
      const size_t want = large_bodies_ ? std::min(room, kHeaderBytes - staged + kLookAhead) : room;
      TALLY_RETURN_IF_ERROR(recvSome(fd, stage_.get() + end_, want, &got));
      if (got == 0) {
        *event = Event::kNone;
        return Status::ok();
      }
      end_ += got;
      continue;
    }
    if (state_ == State::kAwaitBody) {
      return Status::internal("FrameReader: read before setBody for the message in hand");
    }
    // The body: first what is staged, then the socket.
    const uint64_t left = header_.size - body_got_;
    const size_t take = static_cast<size_t>(std::min<uint64_t>(left, staged));
    if (take > 0) {
      std::memcpy(body_ + body_got_, stage_.get() + begin_, take);
      begin_ += take;
      body_got_ += take;
    }
    if (body_got_ == header_.size) {
      if (begin_ == end_) begin_ = end_ = 0;
      if (header_.size > kSmallBody) large_bodies_ = header_.size >= kStageBytes / 2;
      setLowat(fd, 1);  // the next header wakes the loop at once
      state_ = State::kHeader;
      *event = Event::kBody;
      return Status::ok();
    }
    begin_ = end_ = 0;  // everything staged went into the body
    const uint64_t rest = header_.size - body_got_;
    size_t got = 0;
    if (rest >= kStageBytes / 2) {
      TALLY_RETURN_IF_ERROR(recvSome(fd, body_ + body_got_, static_cast<size_t>(rest), &got));
      body_got_ += got;
    } else {
      const size_t want = large_bodies_ ? static_cast<size_t>(rest) + kLookAhead : kStageBytes;
      TALLY_RETURN_IF_ERROR(recvSome(fd, stage_.get(), std::min(want, kStageBytes), &got));
      end_ = got;
    }
    if (got == 0) {
      setLowat(fd, rest >= kMinLowat ? std::min(rest, kMaxLowat) : 1);
      *event = Event::kNone;
      return Status::ok();
    }
  }
}

void FrameReader::setLowat(int fd, uint64_t bytes) {
  if (bytes == lowat_) return;
  const int value = static_cast<int>(bytes);
  // Best effort: without it the loop only wakes more often.
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &value, sizeof(value)) == 0) lowat_ = bytes;
}

Status sendFrame(int fd, int tag, const void* body, size_t size, int64_t timeout_ms,
                 const std::string& peer) {
  const auto deadline = deadlineIn(timeout_ms);
  FrameQueue q;
  q.push(tag, body, size);
  while (!q.empty()) {
    size_t written = 0;
    bool blocked = false;
    TALLY_RETURN_IF_ERROR(q.flush(fd, peer, &written, &blocked));
    if (blocked) {
      TALLY_RETURN_IF_ERROR(
          waitReady(fd, POLLOUT, deadline,
                    "peer " + peer + " took no data within " + std::to_string(timeout_ms) + " ms"));
    }
  }
  return Status::ok();
}

Status recvFrame(int fd, int tag, void* body, size_t capacity, size_t* size, int64_t timeout_ms,
                 const std::string& peer) {
  const auto deadline = deadlineIn(timeout_ms);
  const std::string what =
      "no message from peer " + peer + " within " + std::to_string(timeout_ms) + " ms";
  uint8_t raw[kHeaderBytes];
  TALLY_RETURN_IF_ERROR(readExact(fd, raw, kHeaderBytes, deadline, peer, what));
  const Header h = decodeHeader(raw);
  if (h.magic != kHeaderMagic) {
    return protocolViolation(StatusCode::kRemote,
                             "peer " + peer + " sent garbage instead of a message header");
  }
  if (h.tag != tag || h.size > capacity) {
    return protocolViolation(StatusCode::kRemote,
                             "peer " + peer + " sent a message of " + std::to_string(h.size) +
                                 " bytes with tag " + std::to_string(h.tag) +
                                 " where one of at most " + std::to_string(capacity) +
                                 " with tag " + std::to_string(tag) + " was expected");
  }
  TALLY_RETURN_IF_ERROR(readExact(fd, static_cast<uint8_t*>(body), static_cast<size_t>(h.size),
                                  deadline, peer, what));
  *size = static_cast<size_t>(h.size);
  return Status::ok();
}

Status setStreamNonBlocking(int fd, bool non_blocking) {
  return tcp::setNonBlocking(fd, non_blocking);
}

}  // namespace tally::transport
