// SPDX-License-Identifier: Apache-2.0
// A raw stream: the one socket of a connection handed over by Connection::takeSocket, which the
// caller then drives itself in the connection's own framing (a header of kFrameHeaderBytes with
// the tag and size, then the message body), for event loops that own many sockets: the reducer's
// loops and the worker's progress thread. One stream, so no stripes. Only the TCP backend hands
// sockets over; the framing is its own, implemented beside it.
//
// FrameReader and FrameQueue do non-blocking I/O and say when the socket has nothing more to
// give or take (wait for EPOLLIN / EPOLLOUT then). sendFrame and recvFrame block up to a timeout,
// for the few messages of a connection's opening; recvFrame reads exactly one message, so a
// FrameReader can take over the socket after it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/params.h"
#include "common/small_pool.h"
#include "common/status.h"
#include "common/fd.h"

namespace tally::transport {

// Bytes of a frame's header on the stream.
inline constexpr size_t kFrameHeaderBytes = 16;

// A frame's header as read: the tag its sender gave it and the size of the body that follows.
struct FrameHeader {
  int32_t tag = 0;
  uint64_t size = 0;
};

// Sets a handed-over socket non-blocking (for FrameReader and FrameQueue) or back to blocking.
Status setStreamNonBlocking(int fd, bool non_blocking);

// Reads messages with as few recv calls as it can: headers and small bodies come through a
// staging buffer, several per call; a large body is read straight into its destination, and
// while large bodies come the staged reads stop just past the next header, so little of a large
// body is copied twice. A body that is still missing many bytes when the socket runs dry sets
// SO_RCVLOWAT, so the caller's epoll wakes once for the rest rather than per packet.
class FrameReader {
 public:
  enum class Event {
    kNone,    // the socket has nothing more now
    kHeader,  // header() is complete: call setBody() before reading on
    kBody,    // the body given to setBody() is complete
  };

  explicit FrameReader(std::string peer);

  // Reads until an event or until the socket has nothing more. Errors: the peer closed (kRemote;
  // cleanEof() tells whether between messages), garbage instead of a header, a failed recv.
  Status read(int fd, Event* event);
  const FrameHeader& header() const { return header_; }
  // Where the body of header() goes: header().size bytes, which the caller checked fit.
  void setBody(uint8_t* body);
  // The last error was an EOF between two messages (how a peer normally ends).
  bool cleanEof() const { return clean_eof_; }
  // No message is part-way read (for idle timeouts: a connection may idle between messages).
  bool betweenMessages() const { return state_ == State::kHeader && begin_ == end_; }

 private:
  enum class State { kHeader, kAwaitBody, kBody };
  // Receives into [dst, dst+room); *got = 0 when nothing is there.
  Status recvSome(int fd, uint8_t* dst, size_t room, size_t* got);
  // Sets the socket's SO_RCVLOWAT when it changes.
  void setLowat(int fd, uint64_t bytes);

  std::string peer_;
  std::unique_ptr<uint8_t[]> stage_;
  size_t begin_ = 0;  // unread staged bytes are [begin_, end_)
  size_t end_ = 0;
  State state_ = State::kHeader;
  FrameHeader header_{};
  uint8_t* body_ = nullptr;
  uint64_t body_got_ = 0;
  bool clean_eof_ = false;
  // The last body of more than a few header bytes was a large one: read little ahead.
  bool large_bodies_ = false;
  uint64_t lowat_ = 1;  // the socket's SO_RCVLOWAT as last set
};

// How a FrameQueue writes large batches (docs/datapath.md, "Zero-copy sends"):
//   off     copied into the socket by sendmsg, as always;
//   on      with MSG_ZEROCOPY: the kernel sends from the caller's pages and says on the socket's
//           error queue when it no longer needs them. A connection whose completions say the
//           kernel copied anyway (loopback, a device without scatter-gather) copies from then on;
//   always  the same, never going back to copying (for tests and measurements).
enum class ZerocopyMode { kOff, kOn, kAlways };
Status parseZerocopyMode(const std::string& text, ZerocopyMode* out);
const char* zerocopyModeName(ZerocopyMode mode);
// The smallest batch (headers and bodies of one sendmsg) sent with MSG_ZEROCOPY: below about
// 10 KB pinning pages and the completion cost more than the copy they save. Its value is
// TALLY_ZEROCOPY_MIN_BYTES's default in the parameter registry.
inline constexpr uint64_t kZerocopyMinBytes = paramDefaultBytes("TALLY_ZEROCOPY_MIN_BYTES");
static_assert(paramDefaultBytes("TALLY_ZEROCOPY_MIN_BYTES") > 0,
              "TALLY_ZEROCOPY_MIN_BYTES needs a plain default");

// What a FrameQueue's zero-copy sends did.
struct ZerocopyCounts {
  uint64_t sends = 0;    // sendmsg calls with MSG_ZEROCOPY
  uint64_t copied = 0;   // of those, ones the kernel copied after all (its completions say so)
  uint64_t refused = 0;  // batches copied because the kernel refused to pin more (ENOBUFS)
};

// Messages waiting to be written to one socket, in order. A body is borrowed: it must stay valid
// until the queue counts its message released. Without zero-copy that is when its last byte
// was written; with it, also when the kernel's completion for it came back (reapCompletions),
// and messages are released in order.
class FrameQueue {
 public:
  void push(int tag, const void* body, uint64_t size);
  bool empty() const { return queue_.empty(); }
  // Drops every message of which nothing was written yet (a message part-way out stays, so the
  // stream stays well formed). For a connection that gives up: what it pushes next follows at
  // once. A message tagged `follower_tag` belongs to the one before it (a slice's payload to its
  // header, which announced it): it goes only with that one, so once its leader is started it
  // stays, and so do the followers after it.
  void dropUnstarted(int follower_tag = -1);
  // Drops every message (the socket is not written again). Bodies the kernel may still read
  // (awaitingCompletions) are the caller's to keep or to cut off (an abortive close).
  void clear();
  size_t size() const { return queue_.size(); }
  // Writes what the socket takes without blocking, many messages per sendmsg. *released: how
  // many messages at the front the queue let go of (their bodies may be reused); *blocked: the
  // socket is full and messages are left.
  Status flush(int fd, const std::string& peer, size_t* released, bool* blocked);

  // Zero-copy for batches of at least min_bytes from now on (SO_ZEROCOPY on fd; kOff: nothing).
  // An error: the kernel does not offer it, and the queue goes on copying.
  Status enableZerocopy(int fd, ZerocopyMode mode, uint64_t min_bytes = kZerocopyMinBytes);
  // Zero-copy was enabled: completions may come (epoll reports them as EPOLLERR).
  bool zerocopyEnabled() const { return zc_mode_ != ZerocopyMode::kOff; }
  // Messages written whose pages the kernel may still read.
  bool awaitingCompletions() const { return written_ > 0; }
  // How many: whole messages written and not yet released.
  size_t writtenUnreleased() const { return written_; }
  // Every message pushed is wholly written (released or not).
  bool allWritten() const { return written_ == queue_.size(); }
  // Some zero-copy sendmsg has no completion yet (a message part-way out included).
  bool completionsOutstanding() const { return zc_done_ != zc_next_; }
  // Reads the completions on fd's error queue; *released as flush(); *any: there was at least
  // one (EPOLLERR with none means a socket error).
  Status reapCompletions(int fd, size_t* released, bool* any);
  const ZerocopyCounts& zerocopyCounts() const { return zc_counts_; }

 private:
  struct Message {
    uint8_t header[kFrameHeaderBytes];
    int tag = 0;
    const uint8_t* body = nullptr;
    uint64_t size = 0;
    uint64_t sent = 0;     // bytes of header and body written
    bool zc = false;       // some of it went with MSG_ZEROCOPY ...
    uint32_t zc_last = 0;  // ... the last of them with this number
  };
  // Pops the written messages at the front whose completions came; how many.
  size_t releaseWritten();
  bool completed(uint32_t seq) const;
  // The kernel's completion of the zero-copy sends numbered first..last.
  void complete(uint32_t first, uint32_t last, bool copied);

  // Messages stay where they are until released: a header sent with MSG_ZEROCOPY is read from
  // here by the kernel. queue_[0, written_) are written and wait for their completions.
  std::deque<Message, PoolAllocator<Message>> queue_;
  size_t written_ = 0;
  ZerocopyMode zc_mode_ = ZerocopyMode::kOff;
  bool zc_sending_ = false;  // large batches go with MSG_ZEROCOPY now
  uint64_t zc_min_ = 0;
  uint32_t zc_next_ = 0;  // the number of the next zero-copy sendmsg (the kernel counts alike)
  uint32_t zc_done_ = 0;  // every number below it has completed
  std::vector<std::pair<uint32_t, uint32_t>> zc_early_;  // completed ranges past a gap
  ZerocopyCounts zc_counts_;
};

// Writes one message and waits until the socket took all of it, up to timeout_ms.
Status sendFrame(int fd, int tag, const void* body, size_t size, int64_t timeout_ms,
                 const std::string& peer);
// Reads exactly one message with `tag` into body (at most `capacity` bytes), up to timeout_ms;
// *size: its length.
Status recvFrame(int fd, int tag, void* body, size_t capacity, size_t* size, int64_t timeout_ms,
                 const std::string& peer);

}  // namespace tally::transport
