// SPDX-License-Identifier: Apache-2.0
// One worker connection in an event loop (loop.h): its protocol on the loop thread, its sends
// from any thread.
#include <sys/socket.h>

#include "common/log.h"
#include "reducer/loop.h"

namespace tally::reducer::server {
namespace wire = protocol::wire;
namespace opening = protocol::opening;

namespace {

using Clock = std::chrono::steady_clock;

// How long a Reject waits for the worker to close, and a last message to go out.
constexpr auto kLinger = std::chrono::seconds(2);
constexpr auto kFlushTime = std::chrono::seconds(2);
// Messages one connection's reader handles per turn of its loop; then the loop's other ready
// connections get theirs before it goes on (it is resumed at once, after them). A slice is two
// messages, so a connection busy with slices yields about every 32 of them, which costs one
// eventfd write and one more epoll_wait, nothing next to the slices; a connection that streams
// Pings or Acks as fast as it can delays the others by one such turn (tens of microseconds)
// rather than for as long as it streams.
constexpr int kMessagesPerTurn = 64;
// How long a connection closed with zero-copy sends outstanding keeps their buffers: the close
// resets it, so TCP sends no more from them, but packets already handed to the device are read
// from those pages when it gets to them (microseconds to milliseconds).
constexpr auto kZerocopyHold = std::chrono::seconds(1);

}  // namespace

LoopPeer::LoopPeer(ServerContext* ctx, Loop* loop, Fd fd, std::string name)
    : ctx_(ctx), loop_(loop), name_(std::move(name)), reader_(name_), fd_(std::move(fd)) {}

LoopPeer::~LoopPeer() = default;

Status LoopPeer::open() {
  ctx_->observer->connectionOpened();
  opening_ = ctx_->openings.enter();
  TALLY_RETURN_IF_ERROR(transport::setStreamNonBlocking(fd_.get(), true));
  if (ctx_->options.zerocopy != transport::ZerocopyMode::kOff) {
    std::lock_guard<std::mutex> lock(mu_);
    const Status zc = out_.enableZerocopy(fd_.get(), ctx_->options.zerocopy,
                                           ctx_->options.zerocopy_min_bytes);
    if (!zc.isOk()) {
      TALLY_WARN_LIMITED(ctx_->warnings.zerocopy, "reducer: peer %s: results are copied: %s",
                         name_.c_str(), zc.message().c_str());
    }
  }
  TALLY_RETURN_IF_ERROR(opening::ReducerSide::start(&ctx_->options.job_token, &side_));
  phase_ = side_.authRequired() ? Phase::kAnswer : Phase::kMain;
  {
    std::lock_guard<std::mutex> lock(mu_);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = this;
    if (::epoll_ctl(loop_->epollFd(), EPOLL_CTL_ADD, fd_.get(), &ev) != 0) {
      return Status::fromErrno("epoll_ctl", errno);
    }
    interest_ = EPOLLIN;
  }
  OutMsg challenge;
  challenge.header = side_.challenge();
  send(std::move(challenge));
  return Status::ok();
}

void LoopPeer::send(OutMsg msg) {
  std::lock_guard<std::mutex> lock(mu_);
  // After a write error nothing more goes out: dropped now rather than held until the close.
  if (closed_ || !write_error_.isOk()) {
    if (msg.releases_credit) creditLocked();
    return;
  }
  // Frames go out in order: the last Pong is unsent while the frames written do not reach it.
  const bool pong_unsent =
      pong_queued_ && pong_frame_ >= frames_released_ + out_.writtenUnreleased();
  switch (admitToQueue(*ctx_, msg, unsent_control_, pong_unsent)) {
    case Queueing::kAnswered:
      return;
    case Queueing::kOverflow:
      // The loop sees the socket shut down and ends the connection with this reason.
      write_error_ = controlOverflow(ctx_, name_, unsent_control_);
      overflowed_.store(true, std::memory_order_release);
      ::shutdown(fd_.get(), SHUT_RDWR);
      return;
    case Queueing::kQueue:
      break;
  }
  if (!msg.releases_credit) unsent_control_++;
  if (msg.pong) {
    pong_queued_ = true;
    pong_frame_ = frames_pushed_;
  }
  Queued& q = queued_.emplace_back();
  q.msg = std::move(msg);
  out_.push(wire::kTagHeader, q.msg.header.data(), q.msg.header.size);
  q.frames = 1;
  if (q.msg.payload) {
    out_.push(wire::kTagPayload, q.msg.payload->data() + q.msg.payload_offset, q.msg.payload_bytes);
    q.frames = 2;
  }
  frames_pushed_ += static_cast<uint64_t>(q.frames);
  // Nothing ahead waits for room: write now, from this thread.
  if (!out_blocked_) flushLocked();
}

void LoopPeer::releaseCredit() {
  std::lock_guard<std::mutex> lock(mu_);
  creditLocked();
}

void LoopPeer::creditLocked() {
  buffered_--;
  if (paused_ && !done_reading_ && !closed_ && buffered_ < bufferedLimit(ctx_->options.window)) {
    // The reader stopped at its window; its loop goes on (bytes may wait in its staging buffer,
    // which no epoll event would announce).
    paused_ = false;
    updateInterestLocked();
    loop_->resume(shared_from_this());
  }
}

void LoopPeer::flushLocked() {
  if (closed_ || !write_error_.isOk()) return;
  size_t written = 0;
  bool blocked = false;
  Status st = out_.flush(fd_.get(), name_, &written, &blocked);
  settleLocked(written);
  if (!st.isOk()) {
    // The loop sees the socket shut down and ends the connection with this error.
    write_error_ = st;
    ::shutdown(fd_.get(), SHUT_RDWR);
    blocked = false;
  }
  if (written > 0 || !out_blocked_) last_write_ = Clock::now();
  if (blocked != out_blocked_) {
    out_blocked_ = blocked;
    updateInterestLocked();
  }
}

void LoopPeer::settleLocked(size_t messages) {
  frames_released_ += messages;
  while (messages > 0) {
    Queued& q = queued_.front();
    q.frames--;
    messages--;
    if (q.frames == 0) {
      const bool credit = q.msg.releases_credit;
      queued_.pop_front();
      if (credit) {
        creditLocked();
      } else {
        unsent_control_--;
      }
    }
  }
}

void LoopPeer::updateInterestLocked() {
  if (closed_) return;
  const uint32_t want = (paused_ || done_reading_ ? 0u : static_cast<uint32_t>(EPOLLIN)) |
                        (out_blocked_ ? static_cast<uint32_t>(EPOLLOUT) : 0u);
  if (want == interest_) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.ptr = this;
  if (::epoll_ctl(loop_->epollFd(), EPOLL_CTL_MOD, fd_.get(), &ev) == 0) interest_ = want;
}

bool LoopPeer::reapCompletions() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!out_.zerocopyEnabled() || !fd_.valid()) return false;
  size_t released = 0;
  bool any = false;
  if (!out_.reapCompletions(fd_.get(), &released, &any).isOk()) return false;
  if (released > 0) last_write_ = Clock::now();
  settleLocked(released);
  return any;
}

void LoopPeer::onEvents(uint32_t events) {
  if (phase_ == Phase::kDone) return;
  // The error queue holds completions: epoll says EPOLLERR until they are read. EPOLLERR with
  // none is a socket error, and is handled as before.
  if ((events & EPOLLERR) && reapCompletions()) events &= ~static_cast<uint32_t>(EPOLLERR);
  if (events & EPOLLOUT) {
    std::lock_guard<std::mutex> lock(mu_);
    flushLocked();
  }
  if (phase_ == Phase::kFlush) {
    bool done = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done = queued_.empty() || !write_error_.isOk();
    }
    if (done || (events & (EPOLLHUP | EPOLLERR))) closeNow();
    return;
  }
  // A reset connection is reported even while the reader is paused at its window: read on to
  // the error rather than wait for a slot (and spin on the event meanwhile).
  if (events & (EPOLLHUP | EPOLLERR)) hangup_ = true;
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) readMessages();
}

void LoopPeer::readMessages() {
  for (int handled = 0;;) {
    if (phase_ == Phase::kDone || phase_ == Phase::kFlush) return;
    if (overflowed_.load(std::memory_order_acquire)) return endOverflowed();
    if (handled == kMessagesPerTurn) {
      // The other connections' turn. What is left may wait in the reader's staging buffer,
      // which no epoll event would announce: the loop comes back here after them.
      loop_->resume(shared_from_this());
      return;
    }
    if (phase_ == Phase::kHeld) {
      if (hangup_) {
        // Reset or shut down while its slice waited: nothing more will come (epoll would report
        // it again and again meanwhile).
        Ending ending;
        ending.status = Status::remote("peer " + name_ + " closed the connection while " +
                                       wire::describeSlice(slice_) + " waited for a window slot");
        ending.recv_failed = true;
        return end(std::move(ending));
      }
      if (!takeHeldSlice()) return;
      continue;
    }
    transport::FrameReader::Event event;
    Status st = reader_.read(fd_.get(), &event);
    if (!st.isOk()) {
      if (phase_ == Phase::kLinger) return closeNow();  // the worker closed: the Reject is in
      Ending ending;
      ending.status = st;
      ending.recv_failed = true;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!write_error_.isOk()) ending.status = write_error_;
      }
      if (overflowed_.load(std::memory_order_acquire)) return endOverflowed();
      return end(std::move(ending));
    }
    if (event == transport::FrameReader::Event::kNone) return;
    ++handled;
    last_read_ = Clock::now();
    if (event == transport::FrameReader::Event::kHeader) {
      if (!placeBody()) return;
      continue;
    }
    onBody();
  }
}

void LoopPeer::endOverflowed() {
  if (phase_ == Phase::kLinger) return closeNow();
  Ending ending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ending.status = write_error_;
  }
  ending.counted = true;  // by controlOverflow
  end(std::move(ending));
}

bool LoopPeer::placeBody() {
  const transport::FrameHeader& h = reader_.header();
  if (phase_ == Phase::kPayload) {
    const size_t bytes = slice_.payloadBytes();
    if (h.tag != wire::kTagPayload || h.size != bytes) {
      Ending ending;
      ending.status =
          Status::remote("rank " + std::to_string(rank_) + " sent " + std::to_string(h.size) +
                         " payload bytes for " + wire::describeSlice(slice_) + ", expected " +
                         std::to_string(bytes));
      comm_->fail(ending.status.message());
      end(std::move(ending));
      return false;
    }
    reader_.setBody(payload_->data());
    return true;
  }
  if (h.tag != wire::kTagHeader || h.size > header_.size()) {
    if (phase_ == Phase::kLinger) {
      closeNow();
      return false;
    }
    Ending ending;
    ending.status = Status::remote("peer " + name_ + " sent a message of " +
                                   std::to_string(h.size) + " bytes with tag " +
                                   std::to_string(h.tag) + " where a message header was due");
    end(std::move(ending));
    return false;
  }
  reader_.setBody(header_.data());
  return true;
}

void LoopPeer::onBody() {
  if (phase_ == Phase::kPayload) return onPayload();
  const size_t size = static_cast<size_t>(reader_.header().size);
  if (phase_ == Phase::kLinger) return;  // dropped
  if (phase_ == Phase::kAnswer) return onAnswer(header_.data(), size);
  onHeaderMessage(header_.data(), size);
}

void LoopPeer::onAnswer(const uint8_t* data, size_t size) {
  wire::MsgType type;
  if (wire::peekType(data, size, &type).isOk() && type == wire::MsgType::kReject) {
    wire::Frame none;
    refusedInOpening(ctx_, name_, type, data, size, &none);
    counted_ = true;
    Ending ending;
    ending.graceful = true;
    return end(std::move(ending));
  }
  OutMsg reply;
  Status st = side_.checkAnswer(data, size, &reply.header);
  if (!st.isOk()) {
    TALLY_WARN_LIMITED(ctx_->warnings.rejected, "reducer: refusing peer %s: %s", name_.c_str(),
                       st.message().c_str());
    ctx_->observer->error(ServerError::kAuth);
    counted_ = true;
    return lingerFor(wire::encodeReject(wire::Reason{st.message()}));
  }
  TALLY_INFO(log::kNet, "reducer: peer %s proved the job token", name_.c_str());
  send(std::move(reply));
  phase_ = Phase::kMain;
}

void LoopPeer::onHeaderMessage(const uint8_t* data, size_t size) {
  Ending ending;
  wire::MsgType type;
  ending.status = wire::peekType(data, size, &type);
  if (!ending.status.isOk()) return end(std::move(ending));
  switch (type) {
    case wire::MsgType::kSlice: {
      if (!comm_) {
        ending.status = Status::remote("slice before Hello");
        return end(std::move(ending));
      }
      size_t bytes = 0;
      ending.status = acceptSliceHeader(*comm_, rank_, data, size, &slice_, &bytes);
      if (!ending.status.isOk()) return end(std::move(ending));
      phase_ = Phase::kHeld;
      (void)takeHeldSlice();  // or it waits for a window slot
      return;
    }
    case wire::MsgType::kHello: {
      if (comm_) {
        ending.status = Status::remote("second Hello on one connection");
        return end(std::move(ending));
      }
      wire::Frame reject;
      ending.status = acceptHello(ctx_, shared_from_this(), data, size, &comm_, &rank_, &reject);
      if (!ending.status.isOk()) return end(std::move(ending));
      if (!comm_) return lingerFor(reject);
      opening_.reset();  // a member now: held to --max-connections instead
      return;
    }
    case wire::MsgType::kBye:
      ending.graceful = true;
      return end(std::move(ending));
    case wire::MsgType::kError:
      if (comm_) {
        // The worker gave up on the communicator and says why: the other ranks hear that cause.
        wire::Reason reason;
        ending.status = wire::decodeError(data, size, &reason);
        if (ending.status.isOk()) {
          ending.status = Status::remote(reason.text);
          ending.worker_aborted = true;
          ending.recv_failed = true;  // counted as a lost peer
        }
        return end(std::move(ending));
      }
      break;
    case wire::MsgType::kAck:
    case wire::MsgType::kPing:
    case wire::MsgType::kRelay:
    case wire::MsgType::kDismiss:
      if (comm_) {  // before Hello, as unexpected as any other message
        if (!onMemberMessage(*this, *comm_, rank_, type, data, size, &ending)) {
          end(std::move(ending));
        }
        return;
      }
      break;
    case wire::MsgType::kReject:
    case wire::MsgType::kAnswer:
      if (!comm_) {  // only a reducer without a token gets here
        wire::Frame reject;
        refusedInOpening(ctx_, name_, type, data, size, &reject);
        counted_ = true;
        if (reject.size > 0) return lingerFor(reject);
        ending.graceful = true;
        return end(std::move(ending));
      }
      break;
    default:
      break;
  }
  ending.status = Status::remote(std::string("unexpected ") + wire::msgTypeName(type) +
                                 " message from a worker");
  end(std::move(ending));
}

// Window flow control, as Peer::waitForCredit argues: while bufferedLimit(window) slices of this
// connection are buffered, the next slice's payload is not read (TCP then pushes back on the
// worker). The reader stops after the slice's header, not before the next message: a worker
// never sends more than that, so when it is reached what comes next is a control message (a Bye,
// or the Error of a rank that gave up), and it is read at once rather than left in the socket.
bool LoopPeer::takeHeldSlice() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (buffered_ >= bufferedLimit(ctx_->options.window)) {
      paused_ = true;
      updateInterestLocked();
      return false;
    }
  }
  last_read_ = Clock::now();  // the I/O timeout counts from here, not from the header
  payload_shard_ = ctx_->engine->shardOf(comm_->id, slice_.slice);
  payload_.reset();
  const size_t bytes = slice_.payloadBytes();
  if (bytes == 0) {  // an empty all-gather piece: no payload follows
    onPayload();
    return true;
  }
  payload_ = ctx_->engine->pool(payload_shard_).get(bytes);
  phase_ = Phase::kPayload;
  return true;
}

void LoopPeer::onPayload() {
  phase_ = Phase::kMain;
  const size_t bytes = slice_.payloadBytes();
  if (bytes > 0 &&
      !payloadIntact(ctx_, *comm_, rank_, name_, slice_, payload_->data(), bytes, &counted_)) {
    payload_.reset();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    buffered_++;
  }
  SliceInput in;
  in.arrived = Clock::now();
  in.comm = comm_;
  in.peer = shared_from_this();
  in.rank = rank_;
  in.header = slice_;
  in.data = std::move(payload_);
  ctx_->engine->submit(payload_shard_, std::move(in));  // reduced here when it completes
}

void LoopPeer::lingerFor(const wire::Frame& reject) {
  // Closing at once could beat the Reject to the worker; it closes as soon as it has it.
  OutMsg m;
  m.header = reject;
  send(std::move(m));
  phase_ = Phase::kLinger;
  deadline_ = Clock::now() + kLinger;
}

void LoopPeer::end(Ending ending) {
  ending.counted = ending.counted || counted_;
  if (!comm_) endOfEvicted(ctx_, name_, opened_, opening_.get(), &ending);
  reportEnd(ctx_, comm_, rank_, name_, ending, ctx_->stopping.load());
  comm_.reset();
  payload_.reset();
  bool idle = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_reading_ = true;
    updateInterestLocked();
    idle = queued_.empty() || !write_error_.isOk();
  }
  if (idle) return closeNow();
  phase_ = Phase::kFlush;  // a last Error or Reject may still be on its way out
  deadline_ = Clock::now() + kFlushTime;
}

void LoopPeer::closeNow() {
  if (phase_ == Phase::kDone) return;
  phase_ = Phase::kDone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_.valid() && out_.awaitingCompletions()) {
      // A reset, not a FIN after the queued bytes: TCP sends nothing more from these pages.
      const linger reset{1, 0};
      (void)::setsockopt(fd_.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
      holding_ = true;
      hold_until_ = Clock::now() + kZerocopyHold;
    }
    if (fd_.valid()) {
      ::epoll_ctl(loop_->epollFd(), EPOLL_CTL_DEL, fd_.get(), nullptr);
      fd_.reset();
    }
    closed_ = true;
    reportZerocopyLocked();
    out_.clear();
    if (!holding_) releaseQueuedLocked();
  }
  comm_.reset();
  payload_.reset();
  opening_.reset();
  ctx_->observer->connectionClosed();
}

void LoopPeer::releaseQueuedLocked() {
  while (!queued_.empty()) {
    const bool credit = queued_.front().msg.releases_credit;
    queued_.pop_front();
    if (credit) creditLocked();
  }
  unsent_control_ = 0;
}

void LoopPeer::reportZerocopyLocked() {
  const transport::ZerocopyCounts& now = out_.zerocopyCounts();
  if (now.sends == zc_reported_.sends && now.copied == zc_reported_.copied &&
      now.refused == zc_reported_.refused) {
    return;
  }
  ctx_->observer->zerocopySent(now.sends - zc_reported_.sends, now.copied - zc_reported_.copied,
                               now.refused - zc_reported_.refused);
  zc_reported_ = now;
}

void LoopPeer::abort() {
  if (phase_ == Phase::kDone) return;
  if (comm_ && !ctx_->stopping.load()) {
    // An exception ended it (the loop counted it): its communicator cannot go on without it.
    ctx_->registry->leave(comm_, rank_, false,
                          "rank " + std::to_string(rank_) + " (peer " + name_ +
                              ") was lost: an internal error in the reducer");
  }
  closeNow();
}

void LoopPeer::onTick(Clock::time_point now) {
  if (phase_ == Phase::kDone) {
    if (holding_ && now >= hold_until_) {
      std::lock_guard<std::mutex> lock(mu_);
      releaseQueuedLocked();
      holding_ = false;  // finished: the loop forgets it
    }
    return;
  }
  if (ctx_->options.zerocopy != transport::ZerocopyMode::kOff) {
    std::lock_guard<std::mutex> lock(mu_);
    if (out_.zerocopyEnabled()) reportZerocopyLocked();
  }
  if (phase_ == Phase::kLinger || phase_ == Phase::kFlush) {
    bool flushed = false;
    if (phase_ == Phase::kFlush) {  // another thread may have written the last bytes
      std::lock_guard<std::mutex> lock(mu_);
      flushed = queued_.empty();
    }
    if (flushed || now > deadline_) closeNow();
    return;
  }
  Ending ending;
  // A connection holds a slot: one that never proves the token or never joins (a scanner, a
  // slow-loris peer, a lost worker), or whose communicator does not form or failed, lets go. A
  // member may idle between calls.
  bool failed = false;
  ending.status = comm_ ? memberDeadline(ctx_, *comm_, now, &failed)
                        : openingDeadline(ctx_, name_, opened_, phase_ == Phase::kAnswer,
                                          opening_.get(), now);
  if (!ending.status.isOk()) {
    ending.counted = true;
    return end(std::move(ending));
  }
  if (failed) {  // its Error is queued: send it, then close (a peer may not close by itself)
    ending.graceful = true;
    return end(std::move(ending));
  }
  const int64_t io_ms = ctx_->options.timeouts.io_ms;
  if (io_ms <= 0) return;
  const auto limit = std::chrono::milliseconds(io_ms);
  // A held slice is not being read: its payload waits in the socket for a window slot.
  if (phase_ != Phase::kHeld && !reader_.betweenMessages() && now - last_read_ > limit) {
    ending.status = Status::timeout("peer " + name_ +
                                    " sent part of a message, then nothing within the I/O "
                                    "timeout (TALLY_TIMEOUT_MS)");
    return end(std::move(ending));
  }
  bool stalled = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Zero-copy sends not completed for that long: the worker does not acknowledge the data.
    stalled = (out_blocked_ || out_.awaitingCompletions()) && now - last_write_ > limit;
  }
  if (stalled) {
    ending.status = Status::timeout("peer " + name_ +
                                    " took no data within the I/O timeout (TALLY_TIMEOUT_MS): "
                                    "it is stuck or not reading");
    end(std::move(ending));
  }
}

}  // namespace tally::reducer::server
