// One reducer link of a CollClient: the sender thread (slice headers and payloads, straight from
// the user's buffer, credit-limited) and the receiver thread (results, straight into the user's
// buffer).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <system_error>

#include "common/log.h"
#include "worker_client/coll_client_impl.h"

namespace tally::worker_client {
namespace wire = protocol::wire;

namespace {

constexpr int64_t kPollMs = 100;
// Sends the sender keeps in flight before it waits for the oldest (two per slice).
constexpr size_t kMaxInflightSends = 64;

}  // namespace

ThreadedLink::ThreadedLink(CollClientImpl* client, std::string address,
                           std::unique_ptr<transport::Connection> conn, int window,
                           int64_t timeout_ms, const crc32c::Crc32c* crc)
    : client_(client),
      address_(std::move(address)),
      conn_(std::move(conn)),
      window_(window),
      timeout_ms_(timeout_ms),
      crc_(crc) {}

ThreadedLink::~ThreadedLink() { stopAndJoin(); }

Status ThreadedLink::start() {
  last_progress_ns_.store(nowNs());
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
  if (!tryPostNow(task)) enqueue(std::move(task));
}

void ThreadedLink::enqueue(SliceTask task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_all();
}

void ThreadedLink::registerLocked(const SliceTask& task) {
  // Registered before the send is posted: the result may come back before isend returns.
  waiting_.emplace(std::make_pair(task.call->seq, task.slice), task);
  if (outstanding_++ == 0) last_progress_ns_.store(nowNs());
}

bool ThreadedLink::tryPostNow(const SliceTask& task) {
  std::unique_lock<std::mutex> send_lock(send_mu_, std::try_to_lock);
  if (!send_lock.owns_lock()) return false;  // the sender is posting: queue behind it
  Status st = reapSends(false);
  // Never wait for the transport on the caller's thread: with many sends still in flight, let
  // the sender thread do it.
  if (!st.isOk() || sends_.size() + 2 > kMaxInflightSends) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_.load() || bye_ || !queue_.empty() || outstanding_ >= window_) return false;
    registerLocked(task);
  }
  st = sendSlice(task);
  if (!st.isOk()) reportFailure(st);
  return true;
}

void ThreadedLink::reportFailure(const Status& st) {
  if (client_->closing() || stop_.load()) return;
  client_->fail(
      Status(st.code() == StatusCode::kTimeout ? StatusCode::kTimeout : StatusCode::kRemote,
             "reducer " + address_ + ": " + st.message()));
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
  if (stop_.load() || abort_req_) return;
  abort_frame_ = wire::encodeError(wire::Reason{reason});
  (void)conn_->isend(abort_frame_.data(), abort_frame_.size, wire::kTagHeader, nullptr,
                     &abort_req_);
}

void ThreadedLink::finishAbort(Clock::time_point deadline, bool yield_to_abort) {
  if (!abort_req_) return;
  // In steps of a millisecond, so that an abort() on the owner's thread can cut the wait short.
  for (;;) {
    const int64_t left = msLeft(deadline);
    Status st = abort_req_->wait(std::min<int64_t>(left, 1), nullptr);
    if (st.isOk()) return;
    if (st.code() != StatusCode::kTimeout || left <= 1 || (yield_to_abort && client_->hurrying()))
      break;
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
  abort_req_.reset();
}

Status ThreadedLink::waitBounded(transport::Request* req, size_t* size) {
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
    const int64_t idle_ms = (nowNs() - last_progress_ns_.load()) / 1000000;
    if (outstanding > 0 && idle_ms > timeout_ms_) {
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
        TALLY_RETURN_IF_ERROR(waitBounded(r, nullptr));
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

Status ThreadedLink::sendSlice(const SliceTask& task) {
  std::unique_ptr<Sent> sent;
  if (spare_sends_.empty()) {
    sent = std::make_unique<Sent>();
  } else {
    sent = std::move(spare_sends_.back());
    spare_sends_.pop_back();
  }
  const OutgoingSlice out = outgoingSlice(task, crc_);
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
    bool have = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(kPollMs), [&] {
        return stop_.load() || (!queue_.empty() && outstanding_ < window_) ||
               (bye_ && queue_.empty());
      });
      if (stop_.load()) break;
    }
    // Takes send_mu_ before mu_ (lock order); the queue is checked again under both.
    std::unique_lock<std::mutex> send_lock(send_mu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!queue_.empty() && outstanding_ < window_) {
        task = std::move(queue_.front());
        queue_.pop_front();
        registerLocked(task);
        have = true;
      } else if (bye_ && queue_.empty()) {
        send_bye = true;
      }
    }
    if (have) st = sendSlice(task);
    if (st.isOk()) st = reapSends(false);
    if (!st.isOk() || send_bye) break;
  }
  std::unique_lock<std::mutex> send_lock(send_mu_);
  if (st.isOk() && send_bye) {
    auto sent = std::make_unique<Sent>();
    sent->header = wire::encodeBye();
    st = conn_->isend(sent->header.data(), sent->header.size, wire::kTagHeader, nullptr,
                      &sent->header_req);
    if (st.isOk() && sent->header_req) {
      sends_.push_back(std::move(sent));  // dropped after the connection is closed
      while (st.isOk() && !sends_.empty()) st = reapSends(true);
    }
  }
  send_lock.unlock();
  if (!st.isOk()) reportFailure(st);
  {
    std::lock_guard<std::mutex> lock(mu_);
    sender_done_ = true;
  }
  cv_.notify_all();
}

Status ThreadedLink::receiveResult(const uint8_t* header, size_t size) {
  wire::SliceHeader h;
  TALLY_RETURN_IF_ERROR(wire::decodeResult(header, size, &h));
  SliceTask task;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = waiting_.find(std::make_pair(h.seq, h.slice));
    if (it == waiting_.end()) {
      return Status::remote("unexpected result for " + wire::describeSlice(h));
    }
    task = it->second;
  }
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
    dst = call.recv + (task.recv.offset - call.recv_origin) * dataTypeSize(call.type);
    int tag = wire::kTagPayload;
    transport::MemoryRegion* mr = nullptr;
    std::unique_ptr<transport::Request> req;
    TALLY_RETURN_IF_ERROR(conn_->irecv(1, &dst, &bytes, &tag, &mr, &req));
    if (!req) return Status::internal("transport has no room for a receive");
    size_t got = 0;
    Status st = waitBounded(req.get(), &got);
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
      return Status::remote("checksum mismatch: rank " + std::to_string(client_->rank()) +
                            " got the result of " + wire::describeSlice(h) + " with payload " +
                            sums + "; corrupted in transit");
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.erase(std::make_pair(h.seq, h.slice));
    outstanding_--;
    last_progress_ns_.store(nowNs());
  }
  cv_.notify_all();
  if (task.call->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    client_->shared()->calls_in_flight.fetch_sub(1, std::memory_order_acq_rel);
  }
  return Status::ok();
}

void ThreadedLink::receiverLoop() {
  std::array<uint8_t, wire::kMaxHeaderBytes>& header = recv_header_;
  Status st;
  while (!stop_.load(std::memory_order_acquire)) {
    void* data = header.data();
    size_t size = header.size();
    int tag = wire::kTagHeader;
    transport::MemoryRegion* mr = nullptr;
    st = conn_->irecv(1, &data, &size, &tag, &mr, &recv_req_);
    if (st.isOk() && !recv_req_) st = Status::internal("transport has no room for a receive");
    if (!st.isOk()) break;
    size_t got = 0;
    st = waitBounded(recv_req_.get(), &got);
    // A receive that timed out stays posted (recv_req_, dropped after the close): the connection
    // stays open for the Error that tells this reducer why the client gives up.
    if (!st.isOk()) break;
    recv_req_.reset();
    wire::MsgType type;
    st = wire::peekType(header.data(), got, &type);
    if (!st.isOk()) break;
    if (type == wire::MsgType::kResult) {
      st = receiveResult(header.data(), got);
      if (!st.isOk()) break;
    } else if (type == wire::MsgType::kError) {
      wire::Reason reason;
      st = wire::decodeError(header.data(), got, &reason);
      if (st.isOk()) st = Status::remote(reason.text);
      break;
    } else {
      st = Status::remote(std::string("unexpected ") + wire::msgTypeName(type) + " message");
      break;
    }
  }
  if (!st.isOk()) reportFailure(st);
}

}  // namespace tally::worker_client
