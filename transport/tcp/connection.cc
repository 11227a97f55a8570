// SPDX-License-Identifier: Apache-2.0
#include "transport/tcp/connection.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/small_pool.h"
#include "transport/core_adapters.h"
#include "transport/tcp/socket.h"
#include "transport/tcp/wire.h"

namespace tally::transport::tcp {
namespace {

// One posted isend or irecv. Every field after construction is guarded by Core::mu_.
struct Op {
  bool is_send = false;
  int n = 1;
  uint64_t send_size = 0;
  uint8_t* data[kMaxRecvs] = {};
  size_t capacity[kMaxRecvs] = {};
  int tags[kMaxRecvs] = {};
  bool taken[kMaxRecvs] = {};
  size_t received[kMaxRecvs] = {};
  int matched = 0;           // messages matched to this receive so far
  uint64_t outstanding = 0;  // stripes queued or in flight
  bool done = false;
};

struct SendPiece {
  std::shared_ptr<Op> op;
  bool has_header = false;
  uint8_t header[kHeaderBytes] = {};
  size_t header_sent = 0;  // header bytes already written (by an inline send)
  const uint8_t* data = nullptr;
  uint64_t length = 0;
};

struct RecvPiece {
  std::shared_ptr<Op> op;
  uint8_t* data = nullptr;
  uint64_t length = 0;
};

// Queues of the data path take their blocks from small_pool (no heap use per message).
template <typename T>
using PooledDeque = std::deque<T, PoolAllocator<T>>;

std::shared_ptr<Op> newOp() { return std::allocate_shared<Op>(PoolAllocator<Op>()); }

struct Stream {
  Fd fd;
  PooledDeque<SendPiece> sends;
  PooledDeque<RecvPiece> recvs;  // stripes handed over by stream 0 (streams > 0)
  std::condition_variable send_cv;
  std::condition_variable recv_cv;  // stream 0: a receive was posted; others: a stripe queued
  std::thread send_thread;
  std::thread recv_thread;
  bool writing = false;  // a thread is writing to fd outside the lock (guarded by Core::mu_)
};

// Messages up to this size that arrive before their receive is posted are read into a buffer
// (one at a time per connection) and copied when the receive comes: the receiving side then
// need not wake the helper thread and wait for it again.
constexpr uint64_t kEagerBytes = 64 * 1024;
// How long a clean EOF waits for sends whose bytes may all be out already (Core::fail).
constexpr int64_t kEofSendGraceMs = 100;
// The sockets' SO_RCVTIMEO/SO_SNDTIMEO (TcpOptions::timeouts.io_ms): a blocking call that moved no
// byte for that long fails with EAGAIN.
bool timedOut(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

// Writes the header (may be empty) and then the data, all of it, on a blocking socket.
Status writeFull(int fd, const uint8_t* header, size_t header_len, const uint8_t* data,
                 uint64_t length, const std::string& peer) {
  iovec iov[2];
  int count = 0;
  if (header_len > 0) iov[count++] = {const_cast<uint8_t*>(header), header_len};
  if (length > 0) iov[count++] = {const_cast<uint8_t*>(data), length};
  int first = 0;
  while (first < count) {
    msghdr msg{};
    msg.msg_iov = iov + first;
    msg.msg_iovlen = count - first;
    ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (timedOut(errno)) {
        return Status::timeout("peer " + peer + " took no data within the I/O timeout " +
                               "(TALLY_TIMEOUT_MS): it is stuck or not reading");
      }
      return Status::fromErrno("send to peer " + peer, errno);
    }
    auto left = static_cast<size_t>(sent);
    while (first < count && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (first < count) {
      iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return Status::ok();
}

// Reads exactly `length` bytes on a blocking socket; EOF is a lost peer. *clean_eof (when
// given) tells whether the peer closed before the first byte. With `idle_ok`, the I/O timeout
// does not count before the first byte (a connection may be idle between messages); after it,
// or without `idle_ok`, a stall of that long fails: the peer sent part of a message and stopped.
Status readFull(int fd, uint8_t* data, uint64_t length, const std::string& peer,
                std::atomic<uint64_t>* counted, bool* clean_eof = nullptr, bool idle_ok = false) {
  const uint64_t wanted = length;
  while (length > 0) {
    ssize_t got = recv(fd, data, length, 0);
    if (got == 0) {
      if (clean_eof != nullptr) *clean_eof = length == wanted;
      return Status::remote("peer " + peer + " closed the connection");
    }
    if (got < 0) {
      if (errno == EINTR) continue;
      if (timedOut(errno)) {
        if (idle_ok && length == wanted) continue;
        return Status::timeout("peer " + peer + " sent " + std::to_string(wanted - length) +
                               " of " + std::to_string(wanted) +
                               " bytes, then nothing within the I/O timeout (TALLY_TIMEOUT_MS)");
      }
      return Status::fromErrno("receive from peer " + peer, errno);
    }
    counted->fetch_add(static_cast<uint64_t>(got), std::memory_order_relaxed);
    data += got;
    length -= static_cast<uint64_t>(got);
  }
  return Status::ok();
}

class Core : public CoreBase<Op, &Op::send_size>, public std::enable_shared_from_this<Core> {
 public:
  Core(std::vector<Fd> fds, std::string peer, int max_requests, uint64_t min_stripe,
       bool inline_sends)
      : CoreBase(std::move(peer)),
        max_requests_(max_requests),
        min_stripe_(min_stripe),
        inline_sends_(inline_sends),
        streams_(fds.size()) {
    for (size_t i = 0; i < fds.size(); ++i) streams_[i].fd = std::move(fds[i]);
  }
  ~Core() { close(); }

  // The helper threads start with the first isend or irecv, so that a connection nobody posted
  // on yet can still hand its socket over (takeSocket). A thread that cannot be created fails
  // the connection.
  Status ensureStarted() {
    if (started_.load(std::memory_order_acquire)) return Status::ok();
    std::lock_guard<std::mutex> close_lock(close_mu_);
    if (joined_) return Status::remote("connection to peer " + peer_ + " was closed");
    if (started_.load(std::memory_order_relaxed)) return Status::ok();
    try {
      for (size_t i = 0; i < streams_.size(); ++i) {
        streams_[i].send_thread = std::thread([this, i] { sendLoop(i); });
        streams_[i].recv_thread = std::thread([this, i] { i == 0 ? headerLoop() : stripeLoop(i); });
      }
    } catch (const std::system_error& e) {
      Status st = Status::system(std::string("cannot start TCP helper threads: ") + e.what());
      {
        std::lock_guard<std::mutex> lock(mu_);
        failLocked(st);
      }
      started_.store(true, std::memory_order_release);  // close() joins the ones that started
      return st;
    }
    started_.store(true, std::memory_order_release);
    return Status::ok();
  }

  // Bytes read from every stream so far, partial messages included.
  uint64_t bytesIn() const { return bytes_in_.load(std::memory_order_relaxed); }
  // The only socket of a connection nobody has posted on, or an invalid Fd.
  Fd takeSocket() {
    std::lock_guard<std::mutex> close_lock(close_mu_);
    if (joined_ || started_.load(std::memory_order_relaxed) || streams_.size() != 1) return Fd();
    Fd fd = std::move(streams_[0].fd);
    {
      std::lock_guard<std::mutex> lock(mu_);
      failed_ = true;
      error_ = Status::invalidUsage("the socket to peer " + peer_ + " was handed over");
    }
    joined_ = true;
    return fd;
  }

  Status isend(const void* data, size_t size, int tag, std::unique_ptr<Request>* req);
  Status irecv(int n, void* const* data, const size_t* sizes, const int* tags,
               std::unique_ptr<Request>* req);
  void close();

 private:
  void sendLoop(size_t index);
  void headerLoop();
  void stripeLoop(size_t index);
  // Makes `status` the connection's sticky error (first one wins) and wakes everything. Logs a
  // WARN, or only INFO when `quiet_if_idle` and no send is in flight (a peer that closes
  // between messages is how connections normally end; waiting receives still get the error).
  void fail(Status status, bool quiet_if_idle = false);
  void failLocked(Status status);
  void finishStripeLocked(Op& op);
  void completeLocked(Op& op);
  // Lands the early message in `op`; false (the reason in *why) when it has no room for it.
  bool takeEarlyLocked(Op& op, std::string* why);
  // Writes a one-stripe send from the caller's thread when stream 0 is idle and the socket takes
  // it at once; true when the whole message went out.
  bool sendInline(const uint8_t* header, const uint8_t* data, uint64_t length, size_t* written);
  // Why a message cannot land in the posted receive; capacity < 0: no buffer has its tag.
  std::string mismatch(const Header& header, int64_t capacity) const;

  const int max_requests_;
  const uint64_t min_stripe_;
  // A small send may be written by the posting thread (TcpOptions::inline_sends).
  const bool inline_sends_;

  std::mutex close_mu_;  // serializes close(), the start and takeSocket(); taken before mu_
  bool joined_ = false;  // guarded by close_mu_
  std::atomic<bool> started_{false};  // the helper threads were started (under close_mu_)
  // Bytes read from every stream so far (bytesIn).
  std::atomic<uint64_t> bytes_in_{0};

  std::vector<Stream> streams_;
  // Stripes handed to streams 1.. and not yet read, guarded by mu_. A clean EOF on stream 0
  // waits for them: the peer may close right after its last send completed.
  uint64_t stripes_pending_ = 0;
  PooledDeque<std::shared_ptr<Op>> posted_;  // receives not yet matched to all their messages
  // A small message read before any receive was posted (see kEagerBytes); guarded by mu_. The
  // buffer (kEagerBytes, allocated on first use) is filled by the header thread only while
  // early_present_ is false.
  bool early_present_ = false;
  Header early_header_{};
  std::unique_ptr<uint8_t[]> early_data_;
  int sends_in_flight_ = 0;
  int recvs_in_flight_ = 0;
};

using TcpRequest = CoreRequest<Core, Op>;

class TcpMemoryRegion final : public MemoryRegion {};

class TcpConnection final : public Connection {
 public:
  explicit TcpConnection(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  ~TcpConnection() override { core_->close(); }

  Status isend(const void* data, size_t size, int tag, MemoryRegion*,
               std::unique_ptr<Request>* req) override {
    return core_->isend(data, size, tag, req);
  }
  Status irecv(int n, void* const* data, const size_t* sizes, const int* tags, MemoryRegion* const*,
               std::unique_ptr<Request>* req) override {
    return core_->irecv(n, data, sizes, tags, req);
  }
  Status registerMemory(void*, size_t, MemoryType type,
                        std::unique_ptr<MemoryRegion>* mr) override {
    if (type != MemoryType::kHost) {
      return Status::invalidUsage("the TCP transport only sends host memory");
    }
    *mr = std::make_unique<TcpMemoryRegion>();
    return Status::ok();
  }
  void close() override { core_->close(); }
  std::string peerName() const override { return core_->peer(); }
  int takeSocket() override { return core_->takeSocket().release(); }
  uint64_t bytesReceived() const override { return core_->bytesIn(); }

 private:
  std::shared_ptr<Core> core_;
};

Status Core::isend(const void* data, size_t size, int tag, std::unique_ptr<Request>* req) {
  if (data == nullptr && size > 0) return Status::internal("isend: null buffer");
  TALLY_RETURN_IF_ERROR(ensureStarted());
  auto op = newOp();
  op->is_send = true;
  op->send_size = size;
  int n = stripeCount(size, static_cast<int>(streams_.size()), min_stripe_);
  op->outstanding = static_cast<uint64_t>(n);
  auto request = std::make_unique<TcpRequest>(shared_from_this(), op);
  const auto* bytes = static_cast<const uint8_t*>(data);

  std::unique_lock<std::mutex> lock(mu_);
  if (failed_) return error_;
  if (sends_in_flight_ >= max_requests_) {
    *req = nullptr;
    return Status::ok();
  }
  Stream& first = streams_[0];
  if (inline_sends_ && n == 1 && first.sends.empty() && !first.writing) {
    // Nothing queued ahead on stream 0: try the socket from this thread, without waking the
    // stream's send thread. What the socket does not take at once goes to that thread, first.
    first.writing = true;
    lock.unlock();
    uint8_t header[kHeaderBytes];
    encodeHeader(Header{kHeaderMagic, tag, size}, header);
    size_t written = 0;
    const bool all = sendInline(header, bytes, size, &written);
    lock.lock();
    first.writing = false;
    if (failed_) done_cv_.notify_all();  // close() may be waiting to release the socket
    if (!all && !failed_) {
      SendPiece piece;
      piece.op = op;
      piece.has_header = written < kHeaderBytes;
      std::memcpy(piece.header, header, kHeaderBytes);
      piece.header_sent = std::min<size_t>(written, kHeaderBytes);
      const uint64_t data_sent = written > kHeaderBytes ? written - kHeaderBytes : 0;
      piece.data = bytes + data_sent;
      piece.length = size - data_sent;
      first.sends.push_front(std::move(piece));
      ++sends_in_flight_;
    }
    first.send_cv.notify_one();
    if (failed_ && !all) return error_;
    if (all) op->done = true;
    *req = std::move(request);
    return Status::ok();
  }
  for (int i = 0; i < n; ++i) {
    SendPiece piece;
    piece.op = op;
    uint64_t offset = 0;
    stripeRange(size, n, i, &offset, &piece.length);
    piece.data = bytes + offset;
    if (i == 0) {
      piece.has_header = true;
      encodeHeader(Header{kHeaderMagic, tag, size}, piece.header);
    }
    streams_[i].sends.push_back(std::move(piece));
    streams_[i].send_cv.notify_one();
  }
  ++sends_in_flight_;
  *req = std::move(request);
  return Status::ok();
}

Status Core::irecv(int n, void* const* data, const size_t* sizes, const int* tags,
                   std::unique_ptr<Request>* req) {
  TALLY_RETURN_IF_ERROR(checkRecvArgs(n, data, sizes));
  TALLY_RETURN_IF_ERROR(ensureStarted());
  auto op = newOp();
  fillRecvBuffers(op.get(), n, data, sizes, tags);
  auto request = std::make_unique<TcpRequest>(shared_from_this(), op);

  std::unique_lock<std::mutex> lock(mu_);
  // A message read early is delivered even after the peer closed behind it.
  if (failed_ && !early_present_) return error_;
  if (recvs_in_flight_ >= max_requests_) {
    *req = nullptr;
    return Status::ok();
  }
  if (early_present_) {
    std::string why;
    if (!takeEarlyLocked(*op, &why)) {
      lock.unlock();
      fail(protocolViolation(StatusCode::kInternal,
                             why));  // the request reports it, as when the message comes later
      *req = std::move(request);
      return Status::ok();
    }
    if (op->matched == op->n) {
      op->done = true;
      *req = std::move(request);
      return Status::ok();
    }
    if (failed_) return error_;
  }
  posted_.push_back(std::move(op));
  ++recvs_in_flight_;
  streams_[0].recv_cv.notify_one();
  *req = std::move(request);
  return Status::ok();
}

bool Core::sendInline(const uint8_t* header, const uint8_t* data, uint64_t length,
                      size_t* written) {
  iovec iov[2] = {{const_cast<uint8_t*>(header), kHeaderBytes},
                  {const_cast<uint8_t*>(data), length}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = length > 0 ? 2 : 1;
  for (;;) {
    ssize_t sent = sendmsg(streams_[0].fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent >= 0) {
      *written = static_cast<size_t>(sent);
      return *written == kHeaderBytes + length;
    }
    if (errno == EINTR) continue;
    // EAGAIN: the socket is full, the send thread waits for room. Anything else fails there
    // too, on its blocking write, with the same errno.
    *written = 0;
    return false;
  }
}

bool Core::takeEarlyLocked(Op& op, std::string* why) {
  int slot = -1;
  for (int i = 0; i < op.n && slot < 0; ++i) {
    if (!op.taken[i] && op.tags[i] == early_header_.tag) slot = i;
  }
  if (slot < 0 || early_header_.size > op.capacity[slot]) {
    *why =
        mismatch(early_header_, slot < 0 ? int64_t{-1} : static_cast<int64_t>(op.capacity[slot]));
    return false;
  }
  op.taken[slot] = true;
  op.received[slot] = early_header_.size;
  if (early_header_.size > 0) std::memcpy(op.data[slot], early_data_.get(), early_header_.size);
  ++op.matched;
  early_present_ = false;
  return true;
}

void Core::completeLocked(Op& op) {
  op.done = true;
  if (op.is_send) {
    --sends_in_flight_;
  } else {
    --recvs_in_flight_;
  }
  done_cv_.notify_all();
}

void Core::finishStripeLocked(Op& op) {
  if (--op.outstanding == 0 && (op.is_send || op.matched == op.n)) completeLocked(op);
}

void Core::failLocked(Status status) {
  if (failed_) return;
  // Shutting the sockets down wakes every thread blocked in I/O, so close() and the peer see
  // the failure at once. Buffers stay the caller's to keep until close() (transport.h).
  for (Stream& s : streams_) {
    if (s.fd.valid()) ::shutdown(s.fd.get(), SHUT_RDWR);
  }
  failed_ = true;
  error_ = std::move(status);
  for (Stream& s : streams_) {
    s.send_cv.notify_all();
    s.recv_cv.notify_all();
  }
  done_cv_.notify_all();
}

void Core::fail(Status status, bool quiet_if_idle) {
  bool first = false;
  bool idle = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (quiet_if_idle && !failed_ && sends_in_flight_ > 0) {
      // A send thread may have written a message's last bytes and not yet counted it done: the
      // peer can read them and close (a reducer after Bye) before it does. Give it a moment;
      // a send that is really stuck fails on its own, and its WARN comes first.
      done_cv_.wait_for(lock, std::chrono::milliseconds(kEofSendGraceMs),
                        [&] { return failed_ || sends_in_flight_ == 0; });
    }
    first = !failed_;
    // A clean EOF while only receives wait is how a peer ends a conversation (a reducer after
    // Bye, a ring neighbour at close): the waiting receives fail with the Status, and whoever
    // waits on them decides whether that is an error worth a WARN. Unsent data is always one.
    idle = sends_in_flight_ == 0;
    if (first) failLocked(status);
  }
  if (!first) return;
  if (quiet_if_idle && idle) {
    TALLY_INFO(log::kNet, "tcp: connection to peer %s ended: %s", peer_.c_str(),
               status.toString().c_str());
  } else {
    TALLY_WARN("tcp: connection to peer %s failed: %s", peer_.c_str(), status.toString().c_str());
  }
}

void Core::close() {
  std::lock_guard<std::mutex> close_lock(close_mu_);
  if (joined_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failLocked(Status::remote("connection to peer " + peer_ + " was closed"));
  }
  for (Stream& s : streams_) {
    if (s.send_thread.joinable()) s.send_thread.join();
    if (s.recv_thread.joinable()) s.recv_thread.join();
  }
  std::unique_lock<std::mutex> lock(mu_);
  // An inline send may still be in sendmsg (it returns at once on the shut-down socket): the
  // descriptor must not be closed, and its number reused, under it.
  done_cv_.wait(lock, [&] { return !streams_[0].writing; });
  for (Stream& s : streams_) {
    s.sends.clear();
    s.recvs.clear();
    s.fd.reset();
  }
  posted_.clear();
  early_present_ = false;
  joined_ = true;
}

void Core::sendLoop(size_t index) {
  Stream& stream = streams_[index];
  for (;;) {
    SendPiece piece;
    {
      std::unique_lock<std::mutex> lock(mu_);
      stream.send_cv.wait(lock,
                          [&] { return failed_ || (!stream.sends.empty() && !stream.writing); });
      if (failed_) return;
      piece = std::move(stream.sends.front());
      stream.sends.pop_front();
      stream.writing = true;
    }
    Status status = writeFull(stream.fd.get(), piece.header + piece.header_sent,
                              piece.has_header ? kHeaderBytes - piece.header_sent : 0, piece.data,
                              piece.length, peer_);
    std::unique_lock<std::mutex> lock(mu_);
    stream.writing = false;
    if (!status) {
      lock.unlock();
      return fail(std::move(status));
    }
    finishStripeLocked(*piece.op);
  }
}

std::string Core::mismatch(const Header& header, int64_t capacity) const {
  std::string text = "peer " + peer_ + " sent " + std::to_string(header.size) + " bytes with tag " +
                     std::to_string(header.tag);
  if (capacity < 0) return text + " but the posted receive has no free buffer with that tag";
  return text + " into a receive buffer of " + std::to_string(capacity) + " bytes";
}

void Core::headerLoop() {
  Stream& stream = streams_[0];
  const int streams = static_cast<int>(streams_.size());
  for (;;) {
    uint8_t bytes[kHeaderBytes];
    bool clean_eof = false;
    Status status = readFull(stream.fd.get(), bytes, kHeaderBytes, peer_, &bytes_in_, &clean_eof,
                             /*idle_ok=*/true);
    if (!status && clean_eof) {
      // Let the other streams finish the stripes of messages already under way; each of them
      // fails by itself if its stream was cut short, so this wait ends.
      std::unique_lock<std::mutex> lock(mu_);
      done_cv_.wait(lock, [&] { return failed_ || stripes_pending_ == 0; });
    }
    if (!status) return fail(std::move(status), clean_eof);
    Header header = decodeHeader(bytes);
    if (header.magic != kHeaderMagic) {
      char text[96];
      std::snprintf(text, sizeof(text), "sent a bad message header (magic 0x%08x)", header.magic);
      return fail(protocolViolation(StatusCode::kRemote, "peer " + peer_ + " " + text));
    }
    if (header.size <= kEagerBytes && stripeCount(header.size, streams, min_stripe_) == 1) {
      bool eager = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        eager = !failed_ && posted_.empty() && !early_present_;
      }
      if (eager) {
        // Only this thread sets early_present_, so the buffer is ours until it does.
        if (!early_data_) early_data_ = std::make_unique_for_overwrite<uint8_t[]>(kEagerBytes);
        status = readFull(stream.fd.get(), early_data_.get(), header.size, peer_, &bytes_in_);
        if (!status) return fail(std::move(status));
        std::unique_lock<std::mutex> lock(mu_);
        if (failed_) return;
        early_header_ = header;
        early_present_ = true;
        if (posted_.empty()) continue;
        // A receive was posted while the payload was being read: it takes the message now.
        std::shared_ptr<Op> waiting = posted_.front();
        std::string why;
        if (!takeEarlyLocked(*waiting, &why)) {
          lock.unlock();
          return fail(protocolViolation(StatusCode::kInternal, why));
        }
        if (waiting->matched == waiting->n) {
          posted_.pop_front();
          if (waiting->outstanding == 0) completeLocked(*waiting);
        }
        continue;
      }
    }
    std::shared_ptr<Op> op;
    uint8_t* first_stripe = nullptr;
    uint64_t first_length = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      stream.recv_cv.wait(lock, [&] { return failed_ || !posted_.empty(); });
      if (failed_) return;
      op = posted_.front();
      int slot = -1;
      for (int i = 0; i < op->n && slot < 0; ++i) {
        if (!op->taken[i] && op->tags[i] == header.tag) slot = i;
      }
      if (slot < 0 || header.size > op->capacity[slot]) {
        lock.unlock();
        return fail(protocolViolation(
            StatusCode::kInternal,
            mismatch(header, slot < 0 ? int64_t{-1} : static_cast<int64_t>(op->capacity[slot]))));
      }
      op->taken[slot] = true;
      op->received[slot] = header.size;
      if (++op->matched == op->n) posted_.pop_front();
      if (header.size == 0) {
        if (op->matched == op->n && op->outstanding == 0) completeLocked(*op);
        continue;
      }
      int n = stripeCount(header.size, streams, min_stripe_);
      op->outstanding += static_cast<uint64_t>(n);
      for (int i = 0; i < n; ++i) {
        uint64_t offset = 0;
        uint64_t length = 0;
        stripeRange(header.size, n, i, &offset, &length);
        if (i == 0) {
          first_stripe = op->data[slot];
          first_length = length;
          continue;
        }
        streams_[i].recvs.push_back(RecvPiece{op, op->data[slot] + offset, length});
        ++stripes_pending_;
        streams_[i].recv_cv.notify_one();
      }
    }
    status = readFull(stream.fd.get(), first_stripe, first_length, peer_, &bytes_in_);
    if (!status) return fail(std::move(status));
    std::lock_guard<std::mutex> lock(mu_);
    finishStripeLocked(*op);
  }
}

void Core::stripeLoop(size_t index) {
  Stream& stream = streams_[index];
  for (;;) {
    RecvPiece piece;
    {
      std::unique_lock<std::mutex> lock(mu_);
      stream.recv_cv.wait(lock, [&] { return failed_ || !stream.recvs.empty(); });
      if (failed_) return;
      piece = std::move(stream.recvs.front());
      stream.recvs.pop_front();
    }
    Status status = readFull(stream.fd.get(), piece.data, piece.length, peer_, &bytes_in_);
    if (!status) return fail(std::move(status));
    std::lock_guard<std::mutex> lock(mu_);
    --stripes_pending_;
    finishStripeLocked(*piece.op);
    done_cv_.notify_all();
  }
}

}  // namespace

Status makeConnection(std::vector<Fd> fds, const std::string& peer, int max_requests,
                      uint64_t min_stripe, int64_t io_timeout_ms, bool inline_sends,
                      std::unique_ptr<Connection>* out) {
  if (fds.empty() || fds.size() > static_cast<size_t>(kMaxStreams)) {
    return Status::internal("a TCP connection needs 1 to " + std::to_string(kMaxStreams) +
                            " sockets, got " + std::to_string(fds.size()));
  }
  for (Fd& fd : fds) {
    TALLY_RETURN_IF_ERROR(setNonBlocking(fd.get(), false));
    TALLY_RETURN_IF_ERROR(setNoDelay(fd.get()));
    if (io_timeout_ms > 0) TALLY_RETURN_IF_ERROR(setIoTimeout(fd.get(), io_timeout_ms));
  }
  int streams = static_cast<int>(fds.size());
  auto core = std::make_shared<Core>(std::move(fds), peer, max_requests > 0 ? max_requests : 1,
                                     min_stripe, inline_sends);
  TALLY_INFO(log::kNet, "tcp: connected to peer %s over %d socket(s)", peer.c_str(), streams);
  *out = std::make_unique<TcpConnection>(std::move(core));
  return Status::ok();
}

}  // namespace tally::transport::tcp
