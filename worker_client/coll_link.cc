// SPDX-License-Identifier: Apache-2.0
// One reducer link of a CollClient: the sender thread (slice headers and payloads, straight from
// the user's buffer, credit-limited) and the receiver thread (results, straight into the user's
// buffer).
#include <algorithm>
#include <chrono>
#include <system_error>

#include "common/log.h"
#include "worker_client/coll_link.h"
#include "worker_client/coll_connect.h"

namespace tally::worker_client {
namespace wire = protocol::wire;

namespace {

constexpr int64_t kPollMs = 100;
// Sends the sender keeps in flight before it waits for the oldest (two per slice).
constexpr size_t kMaxInflightSends = 64;

}  // namespace

ThreadedLink::ThreadedLink(LinkOwner* client, uint32_t slot, std::string address,
                           std::unique_ptr<transport::Connection> conn, int window,
                           int64_t timeout_ms, const crc32c::Crc32c* crc)
    : client_(client),
      slot_(slot),
      address_(std::move(address)),
      conn_(std::move(conn)),
      window_(window),
      timeout_ms_(timeout_ms),
      crc_(crc) {}

ThreadedLink::~ThreadedLink() { stopAndJoin(); }

Status ThreadedLink::start() {
  last_progress_ns_.store(nowNs());
  last_heard_ns_.store(nowNs());
  try {
    sender_ = std::thread([this] { senderLoop(); });
    receiver_ = std::thread([this] { receiverLoop(); });
  } catch (const std::system_error& e) {
    // The client closes on this error; stopAndJoin then ends a sender that started.
    return Status::system("cannot start the threads for reducer " + address_ + ": " + e.what());
  }
  return Status::ok();
}

void ThreadedLink::post(SliceTask task) {
  // A prompt slice goes through the sender, which takes it before the other queued ones.
  if (!task.prompt && tryPostNow(task)) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (task.prompt) {
      ledger_.enqueuePrompt(std::move(task));
    } else {
      ledger_.enqueue(std::move(task));
    }
  }
  cv_.notify_all();
}

bool ThreadedLink::sendableLocked() const {
  return (!ledger_.promptQueueEmpty() && outstanding_ < window_ + wire::kPromptSlices) ||
         (!ledger_.queueEmpty() && outstanding_ < window_);
}

bool ThreadedLink::tryPostNow(SliceTask& task) {
  std::unique_lock<std::mutex> send_lock(send_mu_, std::try_to_lock);
  if (!send_lock.owns_lock()) return false;  // the sender is posting: queue behind it
  // Never wait for the transport on the caller's thread (it holds the client's post_mu_, which
  // the keeper needs for any change): with a message parked or many sends still in flight, let
  // the sender thread do it.
  Status st = reapSends(false);
  bool clear = false;
  if (st.isOk()) st = finishParked(false, &clear);
  if (!st.isOk() || !clear || sends_.size() + 2 > kMaxInflightSends) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_.load() || bye_ || !ledger_.queueEmpty() || outstanding_ >= window_) return false;
  }
  st = sendControlLocked(false);
  if (!st.isOk()) {
    reportFailure(st, false);
    return false;  // the slice waits in the books, for the link that takes them
  }
  if (parked_sends_) return false;  // a control frame is left to the sender
  SliceTask sent;
  wire::AckPoint ack;
  const LedgerEntry* entry = nullptr;
  {
    // Recorded before the send is posted: the result may come back before isend returns.
    std::lock_guard<std::mutex> lock(mu_);
    LedgerEntry& e = ledger_.record(std::move(task), false);
    entry = &e;
    sent = e.task;
    ack = dueAckLocked();
    if (outstanding_++ == 0) {
      last_progress_ns_.store(nowNs());
      busy_.begin(nowNs());
    }
  }
  st = sendSlice(sent, ack, entry, false);
  if (!st.isOk()) reportFailure(st, false);
  return true;
}

void ThreadedLink::sendControl(const wire::Frame& frame) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_.load()) return;
    control_.push_back(frame);
  }
  std::unique_lock<std::mutex> send_lock(send_mu_, std::try_to_lock);
  if (!send_lock.owns_lock()) {
    cv_.notify_all();  // the sender holds it, and sends control frames before the next slice
    return;
  }
  // Any thread, the keeper's too: what the transport has no room for now is the sender's.
  bool clear = false;
  Status st = finishParked(false, &clear);
  if (st.isOk() && clear) st = sendControlLocked(false);
  send_lock.unlock();
  if (!clear) cv_.notify_all();
  if (!st.isOk()) reportFailure(st, false);
}

std::unique_ptr<ThreadedLink::Sent> ThreadedLink::takeSpare() {
  if (spare_sends_.empty()) return std::make_unique<Sent>();
  std::unique_ptr<Sent> sent = std::move(spare_sends_.back());
  spare_sends_.pop_back();
  return sent;
}

bool ThreadedLink::sendsInFlight() const {
  for (const auto& s : sends_) {
    if (s->header_req || s->payload_req) return true;
  }
  return false;
}

Status ThreadedLink::postSent(Sent& s, bool may_wait, bool* done) {
  *done = false;
  // The header, then the payload: between the two the transport may have no room, and then
  // nothing else may go out before the payload.
  for (int part = 0; part < 2; ++part) {
    const bool header = part == 0;
    if (header ? s.header_posted : (s.bytes == 0 || s.payload_posted)) continue;
    std::unique_ptr<transport::Request>& req = header ? s.header_req : s.payload_req;
    for (;;) {
      TALLY_RETURN_IF_ERROR(
          header ? conn_->isend(s.header.data(), s.header.size, wire::kTagHeader, nullptr, &req)
                 : conn_->isend(s.payload, s.bytes, wire::kTagPayload, nullptr, &req));
      if (req) break;
      // No room: only the sender thread waits for the oldest send to make some.
      if (!may_wait) return Status::ok();
      if (!sendsInFlight()) return Status::internal("transport has no room for a send");
      TALLY_RETURN_IF_ERROR(reapSends(true));
    }
    (header ? s.header_posted : s.payload_posted) = true;
  }
  *done = true;
  return Status::ok();
}

Status ThreadedLink::pushSent(std::unique_ptr<Sent> sent, const LedgerEntry* entry, bool may_wait) {
  Sent& s = *sent;
  sends_.push_back(std::move(sent));  // before posting: reapSends waits on its header too
  bool done = false;
  TALLY_RETURN_IF_ERROR(postSent(s, may_wait, &done));
  if (!done) parkLocked(entry);
  return Status::ok();
}

void ThreadedLink::parkLocked(const LedgerEntry* entry) {
  parked_sends_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    parked_ = true;
    parked_entry_ = entry;
  }
  cv_.notify_all();
}

Status ThreadedLink::finishParked(bool may_wait, bool* clear) {
  *clear = !parked_sends_;
  if (*clear) return Status::ok();
  bool done = false;
  TALLY_RETURN_IF_ERROR(postSent(*sends_.back(), may_wait, &done));
  if (!done) return Status::ok();
  parked_sends_ = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    parked_ = false;
    parked_entry_ = nullptr;
  }
  *clear = true;
  return Status::ok();
}

Status ThreadedLink::sendControlLocked(bool may_wait) {
  while (!parked_sends_) {
    wire::Frame frame;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (control_.empty() || stop_.load()) return Status::ok();
      frame = control_.front();
      control_.pop_front();
    }
    std::unique_ptr<Sent> sent = takeSpare();
    sent->header = frame;
    sent->payload = nullptr;
    sent->bytes = 0;
    TALLY_RETURN_IF_ERROR(pushSent(std::move(sent), nullptr, may_wait));
  }
  return Status::ok();
}

void ThreadedLink::reportFailure(const Status& st, bool fatal) {
  if (stop_.load()) return;
  reportLinkFailure(client_, slot_, address_, st, fatal);
}

void ThreadedLink::requestBye() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    bye_ = true;
  }
  cv_.notify_all();
}

bool ThreadedLink::waitSenderDone(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return sender_done_; });
}

void ThreadedLink::postAbort(const std::string& reason) {
  // Posted without send_mu_ (the failing thread may hold it): it can land between a slice and
  // its payload, and the reducer then reports a protocol error instead of the reason. The
  // communicator fails either way.
  std::lock_guard<std::mutex> lock(abort_mu_);
  (void)postLastLocked(LastMessage::Kind::kAbort, reason);
}

bool ThreadedLink::postLastLocked(LastMessage::Kind kind, const std::string& reason) {
  if (stop_.load()) return false;
  const wire::Frame* frame = last_.make(kind, reason);  // never changed again while it is out
  if (frame == nullptr) return false;
  (void)conn_->isend(frame->data(), frame->size, wire::kTagHeader, nullptr, &abort_req_);
  return abort_req_ != nullptr;
}

void ThreadedLink::finishAbort(Clock::time_point deadline, bool yield_to_abort) {
  // In steps of a millisecond, so that an abort() on the owner's thread can cut the wait short
  // (and stopAndJoin, which drops the request, waits at most one step for the lock).
  for (;;) {
    const int64_t left = msLeft(deadline);
    {
      std::lock_guard<std::mutex> lock(abort_mu_);
      if (!abort_req_) return;
      Status st = abort_req_->wait(std::min<int64_t>(left, 1), nullptr);
      if (st.isOk()) return;
      if (st.code() != StatusCode::kTimeout) break;
    }
    if (left <= 1 || (yield_to_abort && client_->hurrying())) break;
  }
  conn_->close();
}

void ThreadedLink::closeConnection() {
  conn_->close();
  stop_.store(true, std::memory_order_release);
  { std::lock_guard<std::mutex> lock(mu_); }
  cv_.notify_all();
}

void ThreadedLink::stopAndJoin() {
  closeConnection();
  if (sender_.joinable()) sender_.join();
  if (receiver_.joinable()) receiver_.join();
  std::lock_guard<std::mutex> send_lock(send_mu_);
  sends_.clear();  // after close: the transport allows dropping pending requests now
  parked_sends_ = false;
  spare_sends_.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    parked_ = false;
    parked_entry_ = nullptr;
  }
  recv_req_.reset();
  std::lock_guard<std::mutex> abort_lock(abort_mu_);
  abort_req_.reset();  // after the close: the transport lets a pending request go then
}

void ThreadedLink::retire(const std::string& reason, bool dismiss) {
  if (dismiss) {
    // Like postAbort, without send_mu_ and with a moment's wait: best effort.
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (postLastLocked(LastMessage::Kind::kDismiss, reason)) {
      (void)abort_req_->wait(1, nullptr);
    }
  }
  // Joining both threads leaves nobody in the caller's buffers (the transport stops with the
  // close); the books stay for takeOrphans.
  stopAndJoin();
}

std::vector<LedgerEntry> ThreadedLink::takeOrphans(wire::AckPoint* committed) {
  std::lock_guard<std::mutex> lock(mu_);
  *committed = ledger_.committed();
  outstanding_ = 0;
  busy_.end(nowNs());
  return ledger_.takeAll();
}

InPlaceOut ThreadedLink::inPlaceOut() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ledger_.inPlaceOut();
}

Status ThreadedLink::waitBounded(transport::Request* req, size_t* size, bool* fatal) {
  size_t sizes[transport::kMaxRecvs] = {};
  for (;;) {
    Status st = req->wait(kPollMs, sizes);
    if (st.isOk()) {
      if (size) *size = sizes[0];
      return st;
    }
    if (st.code() != StatusCode::kTimeout) return st;
    if (stop_.load(std::memory_order_acquire)) return Status::remote("connection closed");
    int outstanding;
    {
      std::lock_guard<std::mutex> lock(mu_);
      outstanding = outstanding_;
    }
    const int64_t now = nowNs();
    const int64_t idle_ms = (now - last_progress_ns_.load()) / 1000000;
    if (outstanding > 0 && idle_ms > timeout_ms_ && !client_->silentTooLong(lastHeardNs(), now)) {
      // The reducer still answers (a silent one is the keeper's to drop): a rank is stuck,
      // which fails the communicator.
      if (fatal != nullptr) *fatal = true;
      return Status::timeout("no result from reducer " + address_ + " for " +
                             std::to_string(idle_ms) + " ms with " + std::to_string(outstanding) +
                             " slices outstanding");
    }
  }
}

Status ThreadedLink::reapSends(bool block) {
  while (!sends_.empty()) {
    Sent& s = *sends_.front();
    for (std::unique_ptr<transport::Request>* r : {&s.header_req, &s.payload_req}) {
      if (!*r) continue;
      if (block) {
        TALLY_RETURN_IF_ERROR(waitBounded(r->get(), nullptr, nullptr));
      } else {
        bool done = false;
        TALLY_RETURN_IF_ERROR((*r)->test(&done, nullptr));
        if (!done) return Status::ok();
      }
      r->reset();
    }
    if (!s.posted()) return Status::ok();  // parked: the rest is still to be posted
    s.header_posted = false;
    s.payload_posted = false;
    if (spare_sends_.size() < kMaxInflightSends) spare_sends_.push_back(std::move(sends_.front()));
    sends_.pop_front();
    block = false;
  }
  return Status::ok();
}

wire::AckPoint ThreadedLink::dueAckLocked() {
  std::optional<wire::AckPoint> ack = dueAck(&ledger_, *client_->shared(), false);
  return ack ? *ack : wire::AckPoint{};
}

Status ThreadedLink::sendSlice(const SliceTask& task, const wire::AckPoint& ack,
                               const LedgerEntry* entry, bool may_wait) {
  std::unique_ptr<Sent> sent = takeSpare();
  OutgoingSlice out = outgoingSlice(task, crc_);
  out.header.ack = ack;  // the Ack this rank owes goes along: no message of its own
  sent->header = wire::encodeSlice(out.header);
  sent->payload = out.payload;
  sent->bytes = out.bytes;  // an empty piece (all-gather) is its header alone
  TALLY_RETURN_IF_ERROR(pushSent(std::move(sent), entry, may_wait));
  if (may_wait && sends_.size() > kMaxInflightSends) TALLY_RETURN_IF_ERROR(reapSends(true));
  return Status::ok();
}

void ThreadedLink::senderLoop() {
  Status st;
  bool send_bye = false;
  while (!stop_.load(std::memory_order_acquire)) {
    SliceTask task;
    wire::AckPoint ack;
    const LedgerEntry* entry = nullptr;
    bool have = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(kPollMs), [&] {
        return stop_.load() || parked_ || !control_.empty() || sendableLocked() ||
               (bye_ && ledger_.queueEmpty() && ledger_.promptQueueEmpty());
      });
      if (stop_.load()) break;
    }
    // Takes send_mu_ before mu_ (lock order); the queue is checked again under both. What another
    // thread left parked goes first.
    std::unique_lock<std::mutex> send_lock(send_mu_);
    bool clear = false;
    st = finishParked(true, &clear);
    if (st.isOk()) st = sendControlLocked(true);
    if (st.isOk()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (sendableLocked()) {
        const bool prompt =
            !ledger_.promptQueueEmpty() && outstanding_ < window_ + wire::kPromptSlices;
        LedgerEntry& e = ledger_.record(prompt ? ledger_.popPrompt() : ledger_.popQueued(), true);
        entry = &e;
        task = e.task;
        ack = dueAckLocked();
        if (outstanding_++ == 0) {
          last_progress_ns_.store(nowNs());
          busy_.begin(nowNs());
        }
        have = true;
      } else if (bye_ && ledger_.queueEmpty() && ledger_.promptQueueEmpty()) {
        send_bye = true;
      }
    }
    if (st.isOk() && have) st = sendSlice(task, ack, entry, true);
    if (st.isOk()) st = reapSends(false);
    if (!st.isOk() || send_bye) break;
  }
  std::unique_lock<std::mutex> send_lock(send_mu_);
  if (st.isOk() && send_bye) {
    bool clear = false;
    st = finishParked(true, &clear);  // a control frame another thread left since
  }
  if (st.isOk() && send_bye) {
    std::unique_ptr<Sent> bye = takeSpare();  // dropped after the connection is closed
    bye->header = wire::encodeBye();
    bye->payload = nullptr;
    bye->bytes = 0;
    st = pushSent(std::move(bye), nullptr, true);
    while (st.isOk() && !sends_.empty()) st = reapSends(true);
  }
  send_lock.unlock();
  if (!st.isOk()) reportFailure(st, false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    sender_done_ = true;
  }
  cv_.notify_all();
}

bool ThreadedLink::ackLocked() {
  std::optional<wire::AckPoint> ack = dueAck(&ledger_, *client_->shared(), true);
  if (!ack) return false;
  control_.push_back(wire::encodeAck(*ack));
  return true;
}

void ThreadedLink::ackIfBehind() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_.load() || !ackLocked()) return;
  }
  cv_.notify_all();  // the sender sends it (this may be the posting thread, under post_mu_)
}

Status ThreadedLink::receiveResult(const uint8_t* header, size_t size, bool* fatal) {
  wire::SliceHeader h;
  LedgerEntry* entry = nullptr;
  uint8_t* dst = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TALLY_RETURN_IF_ERROR(acceptResult(&ledger_, address_, header, size, &h, &entry));
    // A parked slice has not left this rank whole: no result can answer it yet.
    TALLY_RETURN_IF_ERROR(checkResult(h, *entry, entry != parked_entry_));
    dst = resultDestination(h, *entry, &scratch_);
    // From here the receive buffer may hold some of this result.
    if (dst != nullptr) entry->touched = true;
  }
  // The record stays put without mu_: only this thread takes Commits, and takeOrphans runs
  // after the thread is joined.
  const size_t bytes = h.payloadBytes();
  if (dst != nullptr) {
    void* data = dst;
    int tag = wire::kTagPayload;
    transport::MemoryRegion* mr = nullptr;
    std::unique_ptr<transport::Request> req;
    TALLY_RETURN_IF_ERROR(conn_->irecv(1, &data, &bytes, &tag, &mr, &req));
    if (!req) return Status::internal("transport has no room for a receive");
    size_t got = 0;
    Status st = waitBounded(req.get(), &got, fatal);
    if (!st.isOk()) {
      conn_->close();  // the receive must not outlive an open connection
      return st;
    }
    TALLY_RETURN_IF_ERROR(checkPayloadFrame(h, wire::kTagPayload, got));
    if (crc_ != nullptr) TALLY_RETURN_IF_ERROR(checkPayload(crc_, client_->rank(), h, dst, fatal));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ledger_.land(entry);
    const int64_t now = nowNs();
    if (--outstanding_ == 0) busy_.end(now);
    last_progress_ns_.store(now);
    ackLocked();
  }
  cv_.notify_all();
  return Status::ok();
}

int64_t ThreadedLink::lastHeardNs() const {
  const uint64_t bytes = conn_->bytesReceived();
  if (bytes != bytes_seen_.load(std::memory_order_relaxed)) {
    bytes_seen_.store(bytes, std::memory_order_relaxed);
    last_heard_ns_.store(nowNs(), std::memory_order_release);
  }
  return last_heard_ns_.load(std::memory_order_acquire);
}

void ThreadedLink::receiverLoop() {
  std::array<uint8_t, wire::kMaxHeaderBytes>& header = recv_header_;
  Status st;
  bool fatal = false;
  while (!stop_.load(std::memory_order_acquire)) {
    void* data = header.data();
    size_t size = header.size();
    int tag = wire::kTagHeader;
    transport::MemoryRegion* mr = nullptr;
    st = conn_->irecv(1, &data, &size, &tag, &mr, &recv_req_);
    if (st.isOk() && !recv_req_) st = Status::internal("transport has no room for a receive");
    if (!st.isOk()) break;
    size_t got = 0;
    st = waitBounded(recv_req_.get(), &got, &fatal);
    // A receive that timed out stays posted (recv_req_, dropped after the close): the connection
    // stays open for the Error that tells this reducer why the client gives up.
    if (!st.isOk()) break;
    recv_req_.reset();
    last_heard_ns_.store(nowNs(), std::memory_order_release);
    wire::MsgType type;
    st = wire::peekType(header.data(), got, &type);
    if (!st.isOk()) break;
    if (type == wire::MsgType::kResult) {
      st = receiveResult(header.data(), got, &fatal);  // wakes the sender for its Ack
      if (!st.isOk()) break;
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      st = onLinkMessage(&ledger_, client_, slot_, address_, type, header.data(), got, &fatal);
      if (!st.isOk()) break;
    }
  }
  if (!st.isOk()) reportFailure(st, fatal);
}

}  // namespace tally::worker_client
