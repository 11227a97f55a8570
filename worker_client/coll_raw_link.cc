// RawLink (coll_raw_link.h): one reducer over a socket the client drives itself.
#include "worker_client/coll_raw_link.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "common/log.h"

namespace tally::worker_client {
namespace wire = protocol::wire;

namespace {

// Read events one link handles per wake-up at most.
constexpr int kMaxReadEvents = 1024;

}  // namespace

RawLink::RawLink(CollClientImpl* client, std::string address, Fd fd,
                 Progress* progress, int window, int64_t timeout_ms, const crc32c::Crc32c* crc)
    : client_(client),
      address_(std::move(address)),
      fd_(std::move(fd)),
      progress_(progress),
      window_(window),
      timeout_ms_(timeout_ms),
      crc_(crc),
      frames_(static_cast<size_t>(window)),
      reader_(address_) {
  free_frames_.reserve(frames_.size());
  for (size_t i = frames_.size(); i > 0; --i) free_frames_.push_back(static_cast<uint32_t>(i - 1));
}

RawLink::~RawLink() { stopAndJoin(); }

Status RawLink::start() {
  last_progress_ns_.store(nowNs());
  return Status::ok();
}

void RawLink::reportFailure(const Status& st) {
  if (client_->closing()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
  }
  client_->fail(
      Status(st.code() == StatusCode::kTimeout ? StatusCode::kTimeout : StatusCode::kRemote,
             "reducer " + address_ + ": " + st.message()));
}

void RawLink::pushSliceLocked(const SliceTask& task) {
  const OutgoingSlice out = outgoingSlice(task, crc_);
  const uint32_t slot = free_frames_.back();
  free_frames_.pop_back();
  frames_[slot] = wire::encodeSlice(out.header);
  out_.push(wire::kTagHeader, frames_[slot].data(), frames_[slot].size);
  ++messages_pushed_;
  // An empty piece (all-gather) is its header alone.
  if (out.bytes > 0) {
    out_.push(wire::kTagPayload, out.payload, out.bytes);
    ++messages_pushed_;
  }
  Waiting w;
  w.task = task;
  w.last_message = messages_pushed_;
  w.frame = slot;
  waiting_.emplace(std::make_pair(task.call->seq, task.slice), std::move(w));
  if (outstanding_++ == 0) last_progress_ns_.store(nowNs());
}

Status RawLink::flushLocked() {
  if (closed_) return Status::ok();
  size_t written = 0;
  bool blocked = false;
  Status st = out_.empty() ? Status::ok() : out_.flush(fd_.get(), address_, &written, &blocked);
  messages_written_ += written;
  TALLY_RETURN_IF_ERROR(st);
  // EPOLLOUT only while the socket is full: the progress thread writes the rest.
  if (blocked != out_armed_) {
    out_armed_ = blocked;
    progress_->watch(this, fd_.get(), blocked);
  }
  return Status::ok();
}

void RawLink::post(SliceTask task) {
  Status st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Behind queued slices, or past the window, a slice waits for a credit; on a closed link it
    // waits forever, and its call reports the client's error.
    if (closed_ || !queue_.empty() || outstanding_ >= window_) {
      queue_.push_back(std::move(task));
      return;
    }
    pushSliceLocked(task);
    if (!out_armed_) st = flushLocked();
  }
  if (!st.isOk()) reportFailure(st);
}

void RawLink::requestBye() {
  Status st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    // After whatever is queued (close() sends Bye only with nothing in flight).
    while (!queue_.empty() && outstanding_ < window_) {
      pushSliceLocked(queue_.front());
      queue_.pop_front();
    }
    bye_frame_ = wire::encodeBye();
    out_.push(wire::kTagHeader, bye_frame_.data(), bye_frame_.size);
    ++messages_pushed_;
    st = flushLocked();
  }
  if (!st.isOk()) reportFailure(st);
}

bool RawLink::waitSenderDone(int64_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return true;
      if (!flushLocked().isOk()) return true;  // ended: the close that follows reports nothing
      if (out_.empty()) return true;
    }
    const int64_t left = msLeft(deadline);
    if (left <= 0) return false;
    pollfd p{fd_.get(), POLLOUT, 0};
    (void)::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 10)));
  }
}

void RawLink::postAbort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || abort_posted_) return;
  abort_posted_ = true;
  // Slices not yet begun on the wire are dropped: the Error follows the message in progress at
  // once, where the reducer can read it.
  out_.dropUnstarted();
  abort_frame_ = wire::encodeError(wire::Reason{reason});
  out_.push(wire::kTagHeader, abort_frame_.data(), abort_frame_.size);
  (void)flushLocked();
}

void RawLink::finishAbort(Clock::time_point deadline, bool yield_to_abort) {
  // In steps of a millisecond, so that an abort() on the owner's thread can cut the wait short.
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_ || !abort_posted_) return;
      if (!flushLocked().isOk()) break;
      if (out_.empty()) return;
    }
    const int64_t left = msLeft(deadline);
    if (left <= 0 || (yield_to_abort && client_->hurrying())) break;
    pollfd p{fd_.get(), POLLOUT, 0};
    (void)::poll(&p, 1, 1);
  }
  closeConnection();
}

void RawLink::closeConnection() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  closed_ = true;
  // Out of the epoll set first (a shut-down socket would report readable for ever), then no
  // more bytes in either direction. The descriptor stays open until stopAndJoin, so its number
  // cannot be reused while the progress thread may still look at it.
  progress_->unwatch(fd_.get());
  ::shutdown(fd_.get(), SHUT_RDWR);
}

void RawLink::stopAndJoin() {
  closeConnection();
  progress_->stop();
  std::lock_guard<std::mutex> lock(mu_);
  out_.clear();  // its bodies are the caller's buffers, which may go away now
  fd_.reset();
}

void RawLink::checkTimeout(int64_t now_ns) {
  int outstanding;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    outstanding = outstanding_;
  }
  const int64_t idle_ms = (now_ns - last_progress_ns_.load()) / 1000000;
  if (outstanding > 0 && idle_ms > timeout_ms_) {
    reportFailure(Status::timeout("no result from reducer " + address_ + " for " +
                                  std::to_string(idle_ms) + " ms with " +
                                  std::to_string(outstanding) + " slices outstanding"));
  }
}

void RawLink::onEvents(bool readable, bool writable) {
  Status st;
  if (writable) {
    std::lock_guard<std::mutex> lock(mu_);
    st = flushLocked();
  }
  if (st.isOk() && readable) st = readAll();
  if (!st.isOk()) {
    reportFailure(st);
    // Also when the client was closing anyway (the reducer hung up after Bye): a dead socket
    // must leave the epoll set, or it reports readable for ever.
    closeConnection();
  }
}

Status RawLink::readAll() {
  // Bounded, so that one busy socket cannot starve the others (epoll reports it again).
  for (int events = 0;; ++events) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return Status::ok();
    transport::FrameReader::Event ev = transport::FrameReader::Event::kNone;
    if (events < kMaxReadEvents) TALLY_RETURN_IF_ERROR(reader_.read(fd_.get(), &ev));
    switch (ev) {
      case transport::FrameReader::Event::kNone:
        // Slices that completions let go are written in one batch. While EPOLLOUT is armed the
        // socket is full, and the progress thread writes when it has room.
        return out_armed_ ? Status::ok() : flushLocked();
      case transport::FrameReader::Event::kHeader:
        TALLY_RETURN_IF_ERROR(onHeaderLocked());
        break;
      case transport::FrameReader::Event::kBody:
        if (phase_ == Phase::kPayload) {
          TALLY_RETURN_IF_ERROR(onPayloadLocked());
        } else {
          TALLY_RETURN_IF_ERROR(onResultLocked(header_.data(), reader_.header().size));
        }
        break;
    }
  }
}

Status RawLink::onHeaderLocked() {
  const transport::FrameHeader& h = reader_.header();
  if (phase_ == Phase::kPayload) {
    const size_t bytes = result_.payloadBytes();
    if (h.tag != wire::kTagPayload || h.size != bytes) {
      return Status::remote("result payload of " + std::to_string(h.size) + " bytes with tag " +
                            std::to_string(h.tag) + " for " + wire::describeSlice(result_) +
                            ", expected " + std::to_string(bytes));
    }
    reader_.setBody(dst_);
    return Status::ok();
  }
  if (h.tag != wire::kTagHeader || h.size > header_.size()) {
    return Status::remote("a message of " + std::to_string(h.size) + " bytes with tag " +
                          std::to_string(h.tag) + " where a header was expected");
  }
  reader_.setBody(header_.data());
  return Status::ok();
}

Status RawLink::onResultLocked(const uint8_t* header, size_t size) {
  wire::MsgType type;
  TALLY_RETURN_IF_ERROR(wire::peekType(header, size, &type));
  if (type == wire::MsgType::kError) {
    wire::Reason reason;
    TALLY_RETURN_IF_ERROR(wire::decodeError(header, size, &reason));
    return Status::remote(reason.text);
  }
  if (type != wire::MsgType::kResult) {
    return Status::remote(std::string("unexpected ") + wire::msgTypeName(type) + " message");
  }
  wire::SliceHeader h;
  TALLY_RETURN_IF_ERROR(wire::decodeResult(header, size, &h));
  auto it = waiting_.find(std::make_pair(h.seq, h.slice));
  if (it == waiting_.end())
    return Status::remote("unexpected result for " + wire::describeSlice(h));
  // A result before the slice was fully sent breaks the protocol, and would let the call complete
  // (and its send buffer go) while the socket still reads from it.
  if (it->second.last_message > messages_written_) {
    return Status::remote("result for " + wire::describeSlice(h) + " before the slice was sent");
  }
  const SliceTask& task = it->second.task;
  const Call& call = *task.call;
  if (h.offset != task.recv.offset || h.count != task.recv.count || h.total_count != call.count ||
      h.type != call.type || h.op != call.op || h.kind != call.kind ||
      h.rank_count != call.rank_count || h.window_offset != call.window_offset) {
    return Status::remote("result " + wire::describeSlice(h) + " does not match the slice sent");
  }
  result_ = h;
  current_ = task;
  free_frames_.push_back(it->second.frame);  // written, so its header bytes are free
  waiting_.erase(it);
  // An empty piece (reduce-scatter: none of this rank's part) is its header alone, and its
  // offset may lie before recv_origin: no pointer is formed for it.
  if (h.payloadBytes() == 0) {
    completeLocked();
    return Status::ok();
  }
  dst_ = current_.call->recv +
         (current_.recv.offset - current_.call->recv_origin) * dataTypeSize(current_.call->type);
  phase_ = Phase::kPayload;
  return Status::ok();
}

Status RawLink::onPayloadLocked() {
  phase_ = Phase::kResultHeader;
  const size_t bytes = result_.payloadBytes();
  if (crc_ != nullptr) {
    // The bytes are in the user's buffer, but the call never completes: the error fails it.
    const uint32_t crc = crc_->compute(dst_, bytes);
    if (crc != result_.crc) {
      char sums[64];
      std::snprintf(sums, sizeof(sums), "CRC32C %08x, header says %08x", crc, result_.crc);
      return Status::remote("checksum mismatch: rank " + std::to_string(client_->rank()) +
                            " got the result of " + wire::describeSlice(result_) +
                            " with payload " + sums + "; corrupted in transit");
    }
  }
  completeLocked();
  return Status::ok();
}

void RawLink::completeLocked() {
  outstanding_--;
  last_progress_ns_.store(nowNs());
  // The freed credit goes to the next queued slice; readAll writes once the socket is drained.
  while (!queue_.empty() && outstanding_ < window_) {
    pushSliceLocked(queue_.front());
    queue_.pop_front();
  }
  if (current_.call->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    client_->shared()->calls_in_flight.fetch_sub(1, std::memory_order_acq_rel);
  }
  current_.call.reset();
}

}  // namespace tally::worker_client
