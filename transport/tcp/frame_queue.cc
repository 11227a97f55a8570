// SPDX-License-Identifier: Apache-2.0
// FrameQueue (transport/raw_stream.h): the raw stream's writes, many messages per sendmsg, and
// MSG_ZEROCOPY for large ones with the kernel's completions read from the socket's error queue.
#include <time.h>  // before linux/errqueue.h, which uses timespec

#include <linux/errqueue.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cerrno>
#include <cstring>

#include "transport/raw_stream.h"
#include "transport/tcp/wire.h"

namespace tally::transport {

using tcp::encodeHeader;
using tcp::Header;
using tcp::kHeaderBytes;
using tcp::kHeaderMagic;

namespace {

// Messages one sendmsg covers at most (two pieces each).
constexpr size_t kMaxBatch = 32;

bool wouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

}  // namespace

Status parseZerocopyMode(const std::string& text, ZerocopyMode* out) {
  if (text == "off") {
    *out = ZerocopyMode::kOff;
  } else if (text == "on") {
    *out = ZerocopyMode::kOn;
  } else if (text == "always") {
    *out = ZerocopyMode::kAlways;
  } else {
    return Status::invalidUsage("zero-copy mode '" + text + "': expected off, on or always");
  }
  return Status::ok();
}

const char* zerocopyModeName(ZerocopyMode mode) {
  switch (mode) {
    case ZerocopyMode::kOff:
      return "off";
    case ZerocopyMode::kOn:
      return "on";
    case ZerocopyMode::kAlways:
      return "always";
  }
  return "?";
}

void FrameQueue::push(int tag, const void* body, uint64_t size) {
  Message m;
  encodeHeader(Header{kHeaderMagic, tag, size}, m.header);
  m.tag = tag;
  m.body = static_cast<const uint8_t*>(body);
  m.size = size;
  queue_.push_back(m);
}

void FrameQueue::dropUnstarted(int follower_tag) {
  // The first message nothing of which was written: all after it are untouched too.
  size_t keep = queue_.size();
  while (keep > written_ && queue_[keep - 1].sent == 0) --keep;
  // Followers of a message that went (part-way) out stay with it.
  while (keep > 0 && keep < queue_.size() && queue_[keep].tag == follower_tag) ++keep;
  queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(keep), queue_.end());
}

void FrameQueue::clear() {
  queue_.clear();
  written_ = 0;
}

Status FrameQueue::enableZerocopy(int fd, ZerocopyMode mode, uint64_t min_bytes) {
  if (mode == ZerocopyMode::kOff) return Status::ok();
  const int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) != 0) {
    return Status::fromErrno("setsockopt(SO_ZEROCOPY)", errno);
  }
  zc_mode_ = mode;
  zc_sending_ = true;
  zc_min_ = min_bytes;
  return Status::ok();
}

bool FrameQueue::completed(uint32_t seq) const {
  return static_cast<int32_t>(seq - zc_done_) < 0;  // wraps with the kernel's 32-bit count
}

size_t FrameQueue::releaseWritten() {
  size_t released = 0;
  while (written_ > 0 && (!queue_.front().zc || completed(queue_.front().zc_last))) {
    queue_.pop_front();
    --written_;
    ++released;
  }
  return released;
}

Status FrameQueue::flush(int fd, const std::string& peer, size_t* released, bool* blocked) {
  *released = releaseWritten();
  *blocked = false;
  while (written_ < queue_.size()) {
    iovec iov[2 * kMaxBatch];
    int count = 0;
    uint64_t bytes = 0;
    for (size_t i = written_; i < queue_.size() && i < written_ + kMaxBatch; ++i) {
      Message& m = queue_[i];
      if (m.sent < kHeaderBytes) {
        iov[count++] = {m.header + m.sent, kHeaderBytes - m.sent};
        if (m.size > 0) iov[count++] = {const_cast<uint8_t*>(m.body), m.size};
      } else {
        const uint64_t done = m.sent - kHeaderBytes;
        iov[count++] = {const_cast<uint8_t*>(m.body) + done, m.size - done};
      }
      bytes += kHeaderBytes + m.size - m.sent;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    bool zc = zc_sending_ && bytes >= zc_min_;
    ssize_t sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT | (zc ? MSG_ZEROCOPY : 0));
    if (sent < 0 && zc && errno == ENOBUFS) {
      // The kernel's budget for pinned pages (RLIMIT_MEMLOCK, net.core.optmem_max) is spent
      // until completions come back: this batch is copied.
      ++zc_counts_.refused;
      zc = false;
      sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (wouldBlock(errno)) {
        *blocked = true;
        return Status::ok();
      }
      return Status::fromErrno("send to peer " + peer, errno);
    }
    // Every sendmsg with MSG_ZEROCOPY that sent something takes the socket's next number; the
    // completions name ranges of them.
    const uint32_t seq = zc_next_;
    if (zc) {
      ++zc_next_;
      ++zc_counts_.sends;
    }
    auto left = static_cast<uint64_t>(sent);
    while (left > 0) {
      Message& m = queue_[written_];
      const uint64_t step = std::min(kHeaderBytes + m.size - m.sent, left);
      m.sent += step;
      left -= step;
      if (zc) {
        m.zc = true;
        m.zc_last = seq;
      }
      if (m.sent == kHeaderBytes + m.size) ++written_;
    }
    *released += releaseWritten();
  }
  return Status::ok();
}

void FrameQueue::complete(uint32_t first, uint32_t last, bool copied) {
  if (copied) {
    zc_counts_.copied += static_cast<uint64_t>(last - first) + 1;
    // The kernel copied after all (loopback, a device without scatter-gather): pinning the
    // pages bought nothing, so `on` writes by copying from now on.
    if (zc_mode_ == ZerocopyMode::kOn) zc_sending_ = false;
  }
  if (first != zc_done_) {  // ahead of one still outstanding: kept until that one comes
    zc_early_.emplace_back(first, last);
    return;
  }
  zc_done_ = last + 1;
  for (bool advanced = true; advanced;) {
    advanced = false;
    for (size_t i = 0; i < zc_early_.size(); ++i) {
      if (zc_early_[i].first != zc_done_) continue;
      zc_done_ = zc_early_[i].second + 1;
      zc_early_.erase(zc_early_.begin() + static_cast<std::ptrdiff_t>(i));
      advanced = true;
      break;
    }
  }
}

Status FrameQueue::reapCompletions(int fd, size_t* released, bool* any) {
  *released = 0;
  *any = false;
  for (;;) {
    alignas(cmsghdr) uint8_t control[CMSG_SPACE(sizeof(sock_extended_err) + sizeof(sockaddr_in6))];
    msghdr msg{};
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    if (::recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
      if (errno == EINTR) continue;
      if (wouldBlock(errno)) break;
      return Status::fromErrno("read the socket's zero-copy completions", errno);
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      const bool v4 = c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR;
      const bool v6 = c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR;
      if (!v4 && !v6) continue;
      sock_extended_err e;
      std::memcpy(&e, CMSG_DATA(c), sizeof(e));
      if (e.ee_origin != SO_EE_ORIGIN_ZEROCOPY || e.ee_errno != 0) continue;
      *any = true;
      complete(e.ee_info, e.ee_data, (e.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) != 0);
    }
  }
  *released = releaseWritten();
  return Status::ok();
}

}  // namespace tally::transport
