// SPDX-License-Identifier: Apache-2.0
// RawLink (coll_raw_link.h): one reducer over a socket the client drives itself.
#include "worker_client/coll_raw_link.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>

#include "common/log.h"
#include "worker_client/coll_connect.h"

namespace tally::worker_client {
namespace wire = protocol::wire;

namespace {

// Read events one link handles per wake-up at most.
constexpr int kMaxReadEvents = 1024;
// How long a link that closes with zero-copy sends outstanding waits for their completions
// after the reset (only packets a device already took are left then).
constexpr int64_t kReleaseWaitMs = 20;

}  // namespace

RawLink::RawLink(LinkOwner* client, uint32_t slot, std::string address, Fd fd,
                 Progress* progress, int window, int64_t timeout_ms, const crc32c::Crc32c* crc)
    : client_(client),
      slot_(slot),
      address_(std::move(address)),
      fd_(std::move(fd)),
      progress_(progress),
      window_(window),
      timeout_ms_(timeout_ms),
      crc_(crc),
      frames_(static_cast<size_t>(window) + wire::kPromptSlices),
      reader_(address_) {
  free_frames_.reserve(frames_.size());
  for (size_t i = frames_.size(); i > 0; --i) free_frames_.push_back(static_cast<uint32_t>(i - 1));
}

RawLink::~RawLink() { stopAndJoin(); }

Status RawLink::start() {
  const CollOptions& o = client_->options();
  if (o.zerocopy != transport::ZerocopyMode::kOff) {
    std::lock_guard<std::mutex> lock(mu_);
    Status st = out_.enableZerocopy(fd_.get(), o.zerocopy, o.zerocopy_min_bytes);
    static std::atomic<bool> warned{false};  // the kernel says the same for every link
    if (!st.isOk() && !warned.exchange(true)) {
      TALLY_WARN("CollNet: TALLY_ZEROCOPY=%s is not available here (%s); slices are copied",
                 transport::zerocopyModeName(o.zerocopy), st.toString().c_str());
    }
  }
  last_progress_ns_.store(nowNs());
  last_heard_ns_.store(nowNs());
  return Status::ok();
}

bool RawLink::ended() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

void RawLink::reportFailure(const Status& st) {
  if (client_->closing()) return;
  bool fatal;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;  // closed on purpose: what fails now is the close's doing
    fatal = fatal_;
  }
  reportLinkFailure(client_, slot_, address_, st, fatal);
}

void RawLink::pushSliceLocked(SliceTask task, bool from_queue) {
  OutgoingSlice out = outgoingSlice(task, crc_);
  // The Ack this rank owes goes along (no message of its own): recorded first, so that it
  // never speaks for this very slice.
  LedgerEntry& e = ledger_.record(std::move(task), from_queue);
  if (std::optional<wire::AckPoint> ack = dueAck(&ledger_, *client_->shared(), false)) {
    out.header.ack = *ack;
    landed_ = false;
  }
  if (free_frames_.empty()) {
    // Every slot's header still waits for a zero-copy completion.
    free_frames_.push_back(static_cast<uint32_t>(frames_.size()));
    frames_.emplace_back();
  }
  const uint32_t slot = free_frames_.back();
  free_frames_.pop_back();
  frames_[slot] = wire::encodeSlice(out.header);
  out_.push(wire::kTagHeader, frames_[slot].data(), frames_[slot].size);
  used_frames_.emplace_back(++messages_pushed_, slot);
  // An empty piece (all-gather) is its header alone.
  if (out.bytes > 0) {
    out_.push(wire::kTagPayload, out.payload, out.bytes);
    ++messages_pushed_;
  }
  e.last_message = messages_pushed_;
  if (outstanding_++ == 0) {
    last_progress_ns_.store(nowNs());
    busy_.begin(nowNs());
  }
}

void RawLink::pushControlLocked(const wire::Frame& frame) {
  control_.emplace_back(0, frame);
  const wire::Frame& f = control_.back().second;  // a deque keeps its elements in place
  out_.push(wire::kTagHeader, f.data(), f.size);
  control_.back().first = ++messages_pushed_;
}

Status RawLink::flushLocked() {
  if (closed_) return Status::ok();
  size_t released = 0;
  bool blocked = false;
  Status st = out_.empty() ? Status::ok() : out_.flush(fd_.get(), address_, &released, &blocked);
  releasedLocked(released);
  TALLY_RETURN_IF_ERROR(st);
  // EPOLLOUT only while the socket is full: the progress thread writes the rest.
  if (blocked != out_armed_) {
    out_armed_ = blocked;
    progress_->watch(this, fd_.get(), blocked);
  }
  return Status::ok();
}

void RawLink::releasedLocked(size_t n) {
  if (n == 0) return;
  messages_released_ += n;
  if (ledger_.held() > 0) last_progress_ns_.store(nowNs());
  while (!control_.empty() && control_.front().first <= messages_released_) control_.pop_front();
  while (!used_frames_.empty() && used_frames_.front().first <= messages_released_) {
    free_frames_.push_back(used_frames_.front().second);
    used_frames_.pop_front();
  }
  ledger_.release(messages_released_);
}

Status RawLink::reapLocked(bool* any) {
  size_t released = 0;
  bool some = false;
  const Status st = out_.reapCompletions(fd_.get(), &released, &some);
  releasedLocked(released);
  if (any != nullptr) *any = some;
  return st;
}

void RawLink::letGoOfPagesLocked() {
  if (out_.completionsOutstanding()) {
    // Connecting to AF_UNSPEC resets a TCP connection as closing with SO_LINGER 0 would: it
    // sends RST and drops every byte queued or unacknowledged, so TCP sends nothing more from
    // these pages. The descriptor stays (stopAndJoin closes it), and so does its error queue,
    // where the completions of packets a device had already taken still come.
    sockaddr unspec{};
    unspec.sa_family = AF_UNSPEC;
    (void)::connect(fd_.get(), &unspec, sizeof(unspec));
    const auto deadline = Clock::now() + std::chrono::milliseconds(kReleaseWaitMs);
    while (out_.completionsOutstanding() && Clock::now() < deadline) {
      if (!reapLocked().isOk()) break;
      if (!out_.completionsOutstanding()) break;
      pollfd p{fd_.get(), 0, 0};  // POLLERR comes unasked
      (void)::poll(&p, 1, 1);
    }
    if (out_.completionsOutstanding()) {
      TALLY_WARN("CollNet: reducer %s: zero-copy sends still unconfirmed %lld ms after the "
                 "connection was reset; their buffers are let go",
                 address_.c_str(), static_cast<long long>(kReleaseWaitMs));
    }
  }
  out_.clear();
  control_.clear();
  used_frames_.clear();
  ledger_.releaseAll();
}

void RawLink::post(SliceTask task) {
  Status st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Behind queued slices, or past the window, a slice waits for a credit; on a closed link it
    // waits in the books until the client takes them (a lost reducer) or reports its error. A
    // prompt slice waits only behind other prompt ones and may take the credit past the window.
    if (task.prompt) {
      if (closed_ || !ledger_.promptQueueEmpty() || outstanding_ >= window_ + wire::kPromptSlices) {
        ledger_.enqueuePrompt(std::move(task));
        return;
      }
    } else if (closed_ || !ledger_.queueEmpty() || outstanding_ >= window_) {
      ledger_.enqueue(std::move(task));
      return;
    }
    pushSliceLocked(std::move(task), false);
    if (!out_armed_) st = flushLocked();
  }
  if (!st.isOk()) reportFailure(st);
}

void RawLink::sendControl(const wire::Frame& frame) {
  Status st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || last_.made()) return;
    pushControlLocked(frame);
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
    pushQueuedLocked();
    bye_frame_ = wire::encodeBye();
    out_.push(wire::kTagHeader, bye_frame_.data(), bye_frame_.size);
    ++messages_pushed_;
    st = flushLocked();
  }
  if (!st.isOk()) reportFailure(st);
}

Status RawLink::drainLocked(bool* drained, short* wait_for) {
  *drained = false;
  TALLY_RETURN_IF_ERROR(flushLocked());
  // The caller waits here rather than in the progress loop (which may not run: poll mode).
  if (out_.zerocopyEnabled()) TALLY_RETURN_IF_ERROR(reapLocked());
  *drained = out_.empty() && !out_.completionsOutstanding();
  // POLLERR (completions) comes unasked; POLLOUT only while something is left to write.
  *wait_for = out_.allWritten() ? 0 : POLLOUT;
  return Status::ok();
}

bool RawLink::waitSenderDone(int64_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    short wait_for = POLLOUT;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return true;
      bool drained = false;
      // An error: ended, and the close that follows reports nothing.
      if (!drainLocked(&drained, &wait_for).isOk() || drained) return true;
    }
    const int64_t left = msLeft(deadline);
    if (left <= 0) return false;
    pollfd p{fd_.get(), wait_for, 0};
    (void)::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 10)));
  }
}

void RawLink::postAbort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  postLastLocked(LastMessage::Kind::kAbort, reason);
}

void RawLink::postLastLocked(LastMessage::Kind kind, const std::string& reason) {
  if (closed_) return;
  const wire::Frame* frame = last_.make(kind, reason);
  if (frame == nullptr) return;
  // Slices not yet begun on the wire are dropped (they stay in the books): the last message
  // follows the message in progress at once, where the reducer can read it.
  out_.dropUnstarted(wire::kTagPayload);  // a slice begun goes out whole
  out_.push(wire::kTagHeader, frame->data(), frame->size);
  (void)flushLocked();
}

void RawLink::finishAbort(Clock::time_point deadline, bool yield_to_abort) {
  // In steps of a millisecond, so that an abort() on the owner's thread can cut the wait short.
  for (;;) {
    short wait_for = POLLOUT;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_ || !last_.made()) return;
      bool drained = false;
      if (!drainLocked(&drained, &wait_for).isOk()) break;
      if (drained) return;
    }
    const int64_t left = msLeft(deadline);
    if (left <= 0 || (yield_to_abort && client_->hurrying())) break;
    pollfd p{fd_.get(), wait_for, 0};
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
  // With zero-copy, what was written may still be read from the caller's pages: the connection
  // is reset and those pages let go before the calls that hold them may complete.
  if (out_.zerocopyEnabled()) letGoOfPagesLocked();
  ::shutdown(fd_.get(), SHUT_RDWR);
}

void RawLink::stopAndJoin() {
  closeConnection();
  // A detached link's progress, shared with the other links, goes on without it.
  if (!detached_.load(std::memory_order_acquire)) progress_->stop();
  std::lock_guard<std::mutex> lock(mu_);
  out_.clear();  // its bodies are the caller's buffers, which may go away now
  control_.clear();
  fd_.reset();
}

void RawLink::retire(const std::string& reason, bool dismiss) {
  if (dismiss) {
    // Best effort and without waiting: whatever is part-way out finishes first.
    std::lock_guard<std::mutex> lock(mu_);
    postLastLocked(LastMessage::Kind::kDismiss, reason);
  }
  // Every read into and write from caller memory runs under mu_ while the link is open, so once
  // closed nothing touches it; the descriptor stays open until the client ends (the progress
  // thread may still hold an event for it).
  closeConnection();
  std::lock_guard<std::mutex> lock(mu_);
  out_.clear();
  control_.clear();
  current_ = nullptr;
}

int64_t RawLink::lastHeardNs() const {
  std::lock_guard<std::mutex> lock(mu_);
  int pending = 0;
  if (!closed_ && ::ioctl(fd_.get(), FIONREAD, &pending) == 0 && pending != pending_seen_) {
    pending_seen_ = pending;
    last_heard_ns_.store(nowNs(), std::memory_order_release);
  }
  return last_heard_ns_.load(std::memory_order_acquire);
}

void RawLink::detach() {
  if (detached_.load(std::memory_order_acquire)) return;
  closeConnection();  // its socket leaves the epoll set
  detach_ticket_ = progress_->forget(this);
  detached_.store(true, std::memory_order_release);
}

bool RawLink::detached() const {
  return detached_.load(std::memory_order_acquire) && progress_->pastRound(detach_ticket_);
}

std::vector<LedgerEntry> RawLink::takeOrphans(wire::AckPoint* committed) {
  std::lock_guard<std::mutex> lock(mu_);
  *committed = ledger_.committed();
  outstanding_ = 0;
  busy_.end(nowNs());
  return ledger_.takeAll();
}

InPlaceOut RawLink::inPlaceOut() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ledger_.inPlaceOut();
}

void RawLink::checkTimeout(int64_t now_ns) {
  int outstanding;
  size_t held;  // committed slices whose zero-copy sends the kernel has not released
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    outstanding = outstanding_;
    held = ledger_.held();
  }
  const int64_t idle_ms = (now_ns - last_progress_ns_.load()) / 1000000;
  if ((outstanding > 0 || held > 0) && idle_ms > timeout_ms_ &&
      !client_->silentTooLong(lastHeardNs(), now_ns)) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      fatal_ = true;  // the reducer answers (or TALLY_REDUCER_TIMEOUT_MS would have dropped it)
    }
    reportFailure(Status::timeout(
        outstanding > 0
            ? "no result from reducer " + address_ + " for " + std::to_string(idle_ms) +
                  " ms with " + std::to_string(outstanding) + " slices outstanding"
            : "the kernel has not released the zero-copy sends of " + std::to_string(held) +
                  " committed slices to reducer " + address_ + " for " +
                  std::to_string(idle_ms) + " ms"));
  }
}

transport::ZerocopyCounts RawLink::zerocopyCounts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return out_.zerocopyCounts();
}

void RawLink::onEvents(bool readable, bool writable, bool error) {
  Status st;
  if (error) {
    // Zero-copy completions come as EPOLLERR; one with none queued is a socket error, which
    // the read reports.
    std::lock_guard<std::mutex> lock(mu_);
    bool any = false;
    if (!closed_ && out_.zerocopyEnabled()) st = reapLocked(&any);
    if (!any) readable = true;
  }
  if (st.isOk() && writable) {
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

bool RawLink::ackLocked() {
  landed_ = false;
  std::optional<wire::AckPoint> ack = dueAck(&ledger_, *client_->shared(), true);
  if (!ack) return false;
  pushControlLocked(wire::encodeAck(*ack));
  return true;
}

void RawLink::ackIfBehind() {
  Status st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || !ackLocked() || out_armed_) return;
    st = flushLocked();
  }
  if (!st.isOk()) reportFailure(st);
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
        // What landed is acknowledged, and slices that completions let go are written, in one
        // batch. While EPOLLOUT is armed the socket is full, and the progress thread writes
        // when it has room.
        if (landed_) ackLocked();
        return out_armed_ ? Status::ok() : flushLocked();
      case transport::FrameReader::Event::kHeader:
        last_heard_ns_.store(nowNs(), std::memory_order_release);
        TALLY_RETURN_IF_ERROR(onHeaderLocked());
        break;
      case transport::FrameReader::Event::kBody:
        if (phase_ == Phase::kPayload) {
          TALLY_RETURN_IF_ERROR(onPayloadLocked());
        } else {
          TALLY_RETURN_IF_ERROR(onMessageLocked(header_.data(), reader_.header().size));
        }
        break;
    }
  }
}

Status RawLink::onHeaderLocked() {
  const transport::FrameHeader& h = reader_.header();
  if (phase_ == Phase::kPayload) {
    TALLY_RETURN_IF_ERROR(checkPayloadFrame(result_, h.tag, h.size));
    current_->touched = true;  // from here the receive buffer holds some of this result
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

Status RawLink::onMessageLocked(const uint8_t* header, size_t size) {
  wire::MsgType type;
  TALLY_RETURN_IF_ERROR(wire::peekType(header, size, &type));
  if (type == wire::MsgType::kResult) return onResultLocked(header, size);
  return onLinkMessage(&ledger_, client_, slot_, address_, type, header, size, &fatal_);
}

Status RawLink::onResultLocked(const uint8_t* header, size_t size) {
  wire::SliceHeader h;
  LedgerEntry* entry = nullptr;
  TALLY_RETURN_IF_ERROR(acceptResult(&ledger_, address_, header, size, &h, &entry));
  // Its payload must have left the socket: a result before that would let the call complete (and
  // its send buffer go) while the socket still reads from it.
  TALLY_RETURN_IF_ERROR(checkResult(h, *entry, entry->last_message <= writtenLocked()));
  result_ = h;
  current_ = entry;
  dst_ = resultDestination(h, *entry, &scratch_);
  if (dst_ == nullptr) {
    landedLocked();  // an empty piece: its header alone
    return Status::ok();
  }
  phase_ = Phase::kPayload;
  return Status::ok();
}

Status RawLink::onPayloadLocked() {
  phase_ = Phase::kResultHeader;
  // The bytes are in the caller's buffer; with a checksum mismatch the call never completes.
  if (crc_ != nullptr) {
    TALLY_RETURN_IF_ERROR(checkPayload(crc_, client_->rank(), result_, dst_, &fatal_));
  }
  landedLocked();
  return Status::ok();
}

void RawLink::landedLocked() {
  ledger_.land(current_);
  landed_ = true;
  current_ = nullptr;
  const int64_t now = nowNs();
  if (--outstanding_ == 0) busy_.end(now);
  last_progress_ns_.store(now);
  // The freed credit goes to the next queued slice; readAll writes once the socket is drained.
  pushQueuedLocked();
}

void RawLink::pushQueuedLocked() {
  while (!ledger_.promptQueueEmpty() && outstanding_ < window_ + wire::kPromptSlices) {
    pushSliceLocked(ledger_.popPrompt(), true);
  }
  while (!ledger_.queueEmpty() && outstanding_ < window_) {
    pushSliceLocked(ledger_.popQueued(), true);
  }
}

}  // namespace tally::worker_client
