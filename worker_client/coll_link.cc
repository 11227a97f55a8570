// One reducer link of a CollClient: the sender thread (slice headers and payloads, straight from
// the user's buffer, credit-limited) and the receiver thread (results, straight into the user's
// buffer).
#include <algorithm>
#include <chrono>
#include <cstdio>
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
  Status st = reapSends(false);
  // Never wait for the transport on the caller's thread: with many sends still in flight, let
  // the sender thread do it.
  if (!st.isOk() || sends_.size() + 2 > kMaxInflightSends) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_.load() || bye_ || !ledger_.queueEmpty() || outstanding_ >= window_) return false;
  }
  st = sendControlLocked();
  SliceTask sent;
  wire::AckPoint ack;
  if (st.isOk()) {
    // Recorded before the send is posted: the result may come back before isend returns.
    std::lock_guard<std::mutex> lock(mu_);
    sent = ledger_.record(std::move(task), false).task;
    ack = dueAckLocked();
    if (outstanding_++ == 0) last_progress_ns_.store(nowNs());
  }
  if (st.isOk()) st = sendSlice(sent, ack);
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
  Status st = sendControlLocked();
  send_lock.unlock();
  if (!st.isOk()) reportFailure(st, false);
}

Status ThreadedLink::sendHeaderOnly(const wire::Frame& frame) {
  std::unique_ptr<Sent> sent;
  if (spare_sends_.empty()) {
    sent = std::make_unique<Sent>();
  } else {
    sent = std::move(spare_sends_.back());
    spare_sends_.pop_back();
  }
  sent->header = frame;
  for (;;) {
    TALLY_RETURN_IF_ERROR(conn_->isend(sent->header.data(), sent->header.size, wire::kTagHeader,
                                       nullptr, &sent->header_req));
    if (sent->header_req) break;
    if (sends_.empty()) return Status::internal("transport has no room for a send");
    TALLY_RETURN_IF_ERROR(reapSends(true));
  }
  sends_.push_back(std::move(sent));
  return Status::ok();
}

Status ThreadedLink::sendControlLocked() {
  for (;;) {
    wire::Frame frame;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (control_.empty() || stop_.load()) return Status::ok();
      frame = control_.front();
      control_.pop_front();
    }
    TALLY_RETURN_IF_ERROR(sendHeaderOnly(frame));
  }
}

void ThreadedLink::reportFailure(const Status& st, bool fatal) {
  if (client_->closing() || stop_.load()) return;
  const Status why(st.code() == StatusCode::kTimeout ? StatusCode::kTimeout : StatusCode::kRemote,
                   "reducer " + address_ + ": " + st.message());
  if (fatal) {
    client_->fail(why);
  } else {
    client_->linkLost(slot_, why);
  }
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
  (void)postLastLocked(wire::encodeError(wire::Reason{reason}));
}

bool ThreadedLink::postLastLocked(const wire::Frame& frame) {
  if (stop_.load() || abort_posted_) return false;
  abort_posted_ = true;
  abort_frame_ = frame;  // never changed again while its send is out
  (void)conn_->isend(abort_frame_.data(), abort_frame_.size, wire::kTagHeader, nullptr,
                     &abort_req_);
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
  spare_sends_.clear();
  recv_req_.reset();
  std::lock_guard<std::mutex> abort_lock(abort_mu_);
  abort_req_.reset();  // after the close: the transport lets a pending request go then
}

void ThreadedLink::retire(const std::string& reason, bool dismiss) {
  if (dismiss) {
    // Like postAbort, without send_mu_ and with a moment's wait: best effort.
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (postLastLocked(wire::encodeDismiss(wire::Reason{reason}))) {
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
  return ledger_.takeAll();
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
    for (transport::Request* r : {s.header_req.get(), s.payload_req.get()}) {
      if (r == nullptr) continue;
      if (block) {
        TALLY_RETURN_IF_ERROR(waitBounded(r, nullptr, nullptr));
      } else {
        bool done = false;
        TALLY_RETURN_IF_ERROR(r->test(&done, nullptr));
        if (!done) return Status::ok();
      }
    }
    s.header_req.reset();
    s.payload_req.reset();
    if (spare_sends_.size() < kMaxInflightSends) spare_sends_.push_back(std::move(sends_.front()));
    sends_.pop_front();
    block = false;
  }
  return Status::ok();
}

wire::AckPoint ThreadedLink::dueAckLocked() {
  const std::shared_ptr<Shared>& shared = client_->shared();
  std::optional<wire::AckPoint> ack =
      ledger_.nextAck(shared->posted_through.load(std::memory_order_acquire),
                      shared->applied_epoch.load(std::memory_order_acquire));
  return ack ? *ack : wire::AckPoint{};
}

Status ThreadedLink::sendSlice(const SliceTask& task, const wire::AckPoint& ack) {
  std::unique_ptr<Sent> sent;
  if (spare_sends_.empty()) {
    sent = std::make_unique<Sent>();
  } else {
    sent = std::move(spare_sends_.back());
    spare_sends_.pop_back();
  }
  OutgoingSlice out = outgoingSlice(task, crc_);
  out.header.ack = ack;  // the Ack this rank owes goes along: no message of its own
  const void* payload = out.payload;
  const size_t bytes = out.bytes;
  sent->header = wire::encodeSlice(out.header);
  for (;;) {
    TALLY_RETURN_IF_ERROR(conn_->isend(sent->header.data(), sent->header.size, wire::kTagHeader,
                                       nullptr, &sent->header_req));
    if (sent->header_req) break;
    if (sends_.empty()) return Status::internal("transport has no room for a send");
    TALLY_RETURN_IF_ERROR(reapSends(true));
  }
  // An empty piece (all-gather) is its header alone.
  while (bytes > 0) {
    TALLY_RETURN_IF_ERROR(
        conn_->isend(payload, bytes, wire::kTagPayload, nullptr, &sent->payload_req));
    if (sent->payload_req) break;
    if (sends_.empty()) return Status::internal("transport has no room for a send");
    TALLY_RETURN_IF_ERROR(reapSends(true));
  }
  sends_.push_back(std::move(sent));
  if (sends_.size() > kMaxInflightSends) TALLY_RETURN_IF_ERROR(reapSends(true));
  return Status::ok();
}

void ThreadedLink::senderLoop() {
  Status st;
  bool send_bye = false;
  while (!stop_.load(std::memory_order_acquire)) {
    SliceTask task;
    wire::AckPoint ack;
    bool have = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(kPollMs), [&] {
        return stop_.load() || !control_.empty() || sendableLocked() ||
               (bye_ && ledger_.queueEmpty() && ledger_.promptQueueEmpty());
      });
      if (stop_.load()) break;
    }
    // Takes send_mu_ before mu_ (lock order); the queue is checked again under both.
    std::unique_lock<std::mutex> send_lock(send_mu_);
    st = sendControlLocked();
    if (st.isOk()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (sendableLocked()) {
        const bool prompt =
            !ledger_.promptQueueEmpty() && outstanding_ < window_ + wire::kPromptSlices;
        task = ledger_.record(prompt ? ledger_.popPrompt() : ledger_.popQueued(), true).task;
        ack = dueAckLocked();
        if (outstanding_++ == 0) last_progress_ns_.store(nowNs());
        have = true;
      } else if (bye_ && ledger_.queueEmpty() && ledger_.promptQueueEmpty()) {
        send_bye = true;
      }
    }
    if (st.isOk() && have) st = sendSlice(task, ack);
    if (st.isOk()) st = reapSends(false);
    if (!st.isOk() || send_bye) break;
  }
  std::unique_lock<std::mutex> send_lock(send_mu_);
  if (st.isOk() && send_bye) {
    st = sendHeaderOnly(wire::encodeBye());  // dropped after the connection is closed
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
  const std::shared_ptr<Shared>& shared = client_->shared();
  std::optional<wire::AckPoint> ack =
      ledger_.nextAck(shared->posted_through.load(std::memory_order_acquire),
                      shared->applied_epoch.load(std::memory_order_acquire), true);
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
  TALLY_RETURN_IF_ERROR(wire::decodeResult(header, size, &h));
  LedgerEntry* entry = nullptr;
  {
    // A Commit carried along: for results before this one.
    std::lock_guard<std::mutex> lock(mu_);
    if (h.ack.calls != 0 || h.ack.recovery_epoch != 0) {
      TALLY_RETURN_IF_ERROR(ledger_.commit(h.ack, address_));
    }
  }
  {
    // The record stays put: only this thread erases records (a Commit), and takeOrphans runs
    // after the thread is joined.
    std::lock_guard<std::mutex> lock(mu_);
    entry = ledger_.find(h.seq, h.slice);
    if (entry == nullptr || entry->landed) {
      return Status::remote("unexpected result for " + wire::describeSlice(h));
    }
  }
  const SliceTask& task = entry->task;
  const Call& call = *task.call;
  if (h.offset != task.recv.offset || h.count != task.recv.count || h.total_count != call.count ||
      h.type != call.type || h.op != call.op || h.kind != call.kind ||
      h.rank_count != call.rank_count || h.window_offset != call.window_offset) {
    return Status::remote("result " + wire::describeSlice(h) + " does not match the slice sent");
  }
  const size_t bytes = h.payloadBytes();
  // An empty piece (reduce-scatter: none of this rank's part) is its header alone, and its
  // offset may lie before recv_origin: no pointer is formed for it.
  void* dst = nullptr;
  if (bytes > 0) {
    if (task.drop_result) {
      // Sent again after its call was done (an early call): read, checked, dropped.
      scratch_.resize(bytes);
      dst = scratch_.data();
    } else {
      dst = call.recv + (task.recv.offset - call.recv_origin) * dataTypeSize(call.type);
    }
    int tag = wire::kTagPayload;
    transport::MemoryRegion* mr = nullptr;
    std::unique_ptr<transport::Request> req;
    {
      std::lock_guard<std::mutex> lock(mu_);
      entry->touched = true;
    }
    TALLY_RETURN_IF_ERROR(conn_->irecv(1, &dst, &bytes, &tag, &mr, &req));
    if (!req) return Status::internal("transport has no room for a receive");
    size_t got = 0;
    Status st = waitBounded(req.get(), &got, fatal);
    if (!st.isOk()) {
      conn_->close();  // the receive must not outlive an open connection
      return st;
    }
    if (got != bytes) {
      return Status::remote("result payload of " + std::to_string(got) + " bytes for " +
                            wire::describeSlice(h) + ", expected " + std::to_string(bytes));
    }
  }
  if (crc_ != nullptr && bytes > 0) {
    // The bytes are in the user's buffer, but the call never completes: the error fails it.
    const uint32_t crc = crc_->compute(dst, bytes);
    if (crc != h.crc) {
      char sums[64];
      std::snprintf(sums, sizeof(sums), "CRC32C %08x, header says %08x", crc, h.crc);
      *fatal = true;
      return Status::remote("checksum mismatch: rank " + std::to_string(client_->rank()) +
                            " got the result of " + wire::describeSlice(h) + " with payload " +
                            sums + "; corrupted in transit");
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ledger_.land(entry);
    outstanding_--;
    last_progress_ns_.store(nowNs());
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
      st = receiveResult(header.data(), got, &fatal);
      if (!st.isOk()) break;
      bool ack;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ack = !control_.empty();
      }
      if (ack) cv_.notify_all();  // the sender sends the Ack
    } else if (type == wire::MsgType::kCommit) {
      wire::AckPoint p;
      st = wire::decodeCommit(header.data(), got, &p);
      if (st.isOk()) {
        std::lock_guard<std::mutex> lock(mu_);
        st = ledger_.commit(p, address_);
      }
      if (!st.isOk()) break;
    } else if (type == wire::MsgType::kPong) {
      wire::Ping pong;
      st = wire::decodePong(header.data(), got, &pong);
      if (!st.isOk()) break;
    } else if (type == wire::MsgType::kRelay) {
      wire::Relay relay;
      st = wire::decodeRelay(header.data(), got, &relay);
      if (!st.isOk()) break;
      client_->relayed(slot_, relay);
    } else if (type == wire::MsgType::kError) {
      wire::Reason reason;
      wire::ErrorScope scope = wire::ErrorScope::kCommunicator;
      st = wire::decodeError(header.data(), got, &reason, &scope);
      if (st.isOk()) {
        st = Status::remote(reason.text);
        fatal = scope == wire::ErrorScope::kCommunicator;
      }
      break;
    } else {
      st = Status::remote(std::string("unexpected ") + wire::msgTypeName(type) + " message");
      break;
    }
  }
  if (!st.isOk()) reportFailure(st, fatal);
}

}  // namespace tally::worker_client
