// SPDX-License-Identifier: Apache-2.0
// One worker connection on the reducer served by threads (transports other than TCP, and TCP
// connections of several sockets): its reader thread (headers, payloads, into the engine, which
// reduces on this thread when the input completes a slice; failover messages, failover.cc) and
// its writer thread (Ready, Reject, results, Commits, Pongs, Relays and Error, in queue order).
#include <chrono>
#include <cstdio>
#include <exception>
#include <system_error>

#include "common/log.h"
#include "reducer/server_internal.h"
#include "reducer/session.h"

namespace tally::reducer::server {
namespace wire = protocol::wire;

namespace {

// How often blocked threads look at the stop flags.
constexpr int64_t kPollMs = 100;
// Sends kept in flight by one writer before it waits for the oldest.
constexpr size_t kMaxInflightSends = 32;
// How long a writer keeps flushing after its reader ended (a Reject, a last Error).
constexpr auto kFlushTime = std::chrono::seconds(2);

}  // namespace

Peer::Peer(std::unique_ptr<transport::Connection> conn, ServerContext* ctx)
    : conn_(std::move(conn)), ctx_(ctx), name_(conn_->peerName()),
      opening_(ctx->openings.enter()) {}

Peer::~Peer() {
  abort();
  join();
}

Status Peer::start() {
  // The server holds this Peer until it has joined both threads. The reader reports the close.
  ctx_->observer->connectionOpened();
  try {
    writer_ = std::thread([this] { writerLoop(); });
    reader_ = std::thread([this] { readerLoop(); });
  } catch (const std::system_error& e) {
    // Out of threads (EAGAIN) or memory: this connection only. A writer that started ends
    // once aborted; no reader ran to report the close.
    abort();
    join();
    finished_.store(true, std::memory_order_release);
    ctx_->observer->connectionClosed();
    return Status::system("cannot start the threads of peer " + name_ + ": " + e.what());
  }
  return Status::ok();
}

void Peer::abort() {
  aborted_.store(true, std::memory_order_release);
  conn_->close();
  out_cv_.notify_all();
  credit_cv_.notify_all();
}

void Peer::join() {
  if (reader_.joinable()) reader_.join();
  if (writer_.joinable()) writer_.join();
}

void Peer::send(OutMsg msg) {
  Status overflow;
  {
    std::lock_guard<std::mutex> lock(out_mu_);
    if (!writer_done_ && overflow_.isOk()) {
      // Nothing ahead of it: post from this thread (usually the one that completed a slice),
      // without waking the writer first. Otherwise queue it behind the others, for the writer.
      if (out_.empty() && !writer_posting_ && !writer_finish_ && tryPostNowLocked(&msg)) return;
      switch (admitToQueue(*ctx_, msg, unsent_control_, pong_queued_)) {
        case Queueing::kAnswered:
          return;
        case Queueing::kOverflow:
          overflow_ = controlOverflow(ctx_, name_, unsent_control_);
          overflow = overflow_;
          break;
        case Queueing::kQueue:
          if (!msg.releases_credit) unsent_control_++;
          pong_queued_ = pong_queued_ || msg.pong;
          out_.push_back(std::move(msg));
          out_cv_.notify_one();
          return;
      }
    }
  }
  // The reader then ends, with overflow_ as the reason, and the writer drops what is left.
  if (!overflow.isOk()) conn_->close();
  if (msg.releases_credit) releaseCredit();
}

void Peer::releaseCredit() {
  {
    std::lock_guard<std::mutex> lock(credit_mu_);
    buffered_--;
  }
  credit_cv_.notify_one();
}

// Window flow control. A reader stops taking slices from its connection while `window` of them
// are buffered here (TCP then pushes back on the worker). This cannot deadlock: every rank sends
// its slices to this reducer in the same order (calls in sequence, slices within a call in
// order). Take the oldest slice s that this connection has buffered and that is not finished.
// Every slice before s in that order is finished (this rank sent them all, and none of them is
// still buffered), so no other rank has anything buffered from before s and each of them is still
// being read; s itself is among the first `window` unfinished slices of every rank, so the
// workers' own windows let them send it. Hence s completes, its result frees a slot, and reading
// resumes. Results are always read by the workers (a receiver thread per reducer), so results do
// not block either. One slice more than the window may be buffered (wire::kPromptSlices): a
// recovery slice every rank sends at once on a membership change, outside that order, so that
// it passes the slices waiting for a rank that is behind (docs/failover.md, "Small calls"); the
// workers send those one at a time in the same order, so each completes.
void Peer::waitForCredit() {
  const int window = bufferedLimit(ctx_->options.window);
  std::unique_lock<std::mutex> lock(credit_mu_);
  while (buffered_ >= window && !aborted_.load(std::memory_order_acquire) &&
         !ctx_->stopping.load(std::memory_order_acquire)) {
    credit_cv_.wait_for(lock, std::chrono::milliseconds(kPollMs));
  }
}

Status Peer::recvOne(void* data, size_t size, int tag, size_t* got) {
  std::unique_ptr<transport::Request> req;
  transport::MemoryRegion* mr = nullptr;
  for (;;) {
    Status st = conn_->irecv(1, &data, &size, &tag, &mr, &req);
    if (!st.isOk()) {
      recv_failed_ = true;
      return st;
    }
    if (req) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // no room: should not happen
  }
  for (;;) {
    size_t sizes[1] = {0};
    Status st = req->wait(kPollMs, sizes);
    if (st.isOk()) {
      *got = sizes[0];
      return Status::ok();
    }
    if (st.code() != StatusCode::kTimeout) {
      recv_failed_ = true;
      return st;
    }
    if (aborted_.load(std::memory_order_acquire) || ctx_->stopping.load()) {
      conn_->close();  // the request must not outlive an open connection
      return Status::remote("server stopping");
    }
    // A connection holds threads: one that never proves the token or never joins (a scanner, a
    // slow-loris peer, a lost worker), or whose communicator does not form or failed, lets go.
    // A member may idle between calls.
    const auto now = std::chrono::steady_clock::now();
    bool failed = false;
    Status why = comm_ ? memberDeadline(ctx_, *comm_, now, &failed)
                       : openingDeadline(ctx_, name_, opened_, answering_, opening_.get(), now);
    if (failed && failure_seen_ == std::chrono::steady_clock::time_point{}) failure_seen_ = now;
    // The Error with the reason is queued to this member: let the writer send it first (bounded:
    // a member that does not read cannot keep the connection).
    if (why.isOk() && failed && !writerIdle() && now - failure_seen_ < kFlushTime) continue;
    if (!why.isOk() || failed) {
      conn_->close();
      // Counted already: the timeouts there, a communicator's failure where it happened.
      counted_ = true;
      return failed ? Status::remote("communicator failed") : why;
    }
  }
}

bool Peer::writerIdle() {
  std::lock_guard<std::mutex> lock(out_mu_);
  return out_.empty() && !writer_posting_ && inflight_count_.load(std::memory_order_acquire) == 0;
}

void Peer::readerLoop() {
  std::array<uint8_t, wire::kMaxHeaderBytes> header;
  bool graceful = false;
  bool internal = false;
  bool worker_aborted = false;  // the worker sent an Error with its reason
  bool dismissed = false;       // the worker dismissed this reducer
  Status st;
  try {
    bool refused = false;
    st = greet(&refused);
    graceful = st.isOk() && refused;  // a refusal was counted and logged already
    while (st.isOk() && !refused) {
      size_t got = 0;
      st = recvOne(header.data(), header.size(), wire::kTagHeader, &got);
      if (!st) break;
      wire::MsgType type;
      st = wire::peekType(header.data(), got, &type);
      if (!st) break;
      if (type == wire::MsgType::kSlice) {
        st = handleSlice(header.data(), got);
        if (!st) break;
      } else if (type == wire::MsgType::kHello) {
        bool end = false;
        st = handleHello(header.data(), got, &end);
        if (!st || end) {
          graceful = st.isOk();
          break;
        }
      } else if (type == wire::MsgType::kBye) {
        graceful = true;
        break;
      } else if (comm_ && type == wire::MsgType::kError) {
        // The worker gave up on the communicator (it lost another reducer, timed out, ...) and
        // says why: the other ranks hear that cause instead of a bare "rank N was lost".
        wire::Reason reason;
        st = wire::decodeError(header.data(), got, &reason);
        if (st) {
          st = Status::remote(reason.text);
          worker_aborted = true;
          recv_failed_ = true;  // counted as a lost peer
        }
        break;
      } else if (comm_ && isMemberMessage(type)) {
        Ending ending;
        if (!onMemberMessage(*this, *comm_, rank_, type, header.data(), got, &ending)) {
          st = ending.status;
          dismissed = ending.dismissed;
          break;
        }
      } else if (!comm_ && (type == wire::MsgType::kReject || type == wire::MsgType::kAnswer)) {
        refusedInOpening(type, header.data(), got);  // only a reducer without a token gets here
        graceful = true;
        break;
      } else {
        st = Status::remote(std::string("unexpected ") + wire::msgTypeName(type) +
                            " message from a worker");
        break;
      }
    }
  } catch (const std::exception& e) {
    st = Status::internal(std::string("reducer reader: ") + e.what());
    internal = true;
  }

  {
    // It did not read what it was sent (send() closed it): that is why it ended, counted there.
    std::lock_guard<std::mutex> lock(out_mu_);
    if (!overflow_.isOk()) {
      st = overflow_;
      graceful = worker_aborted = dismissed = recv_failed_ = false;
      counted_ = true;
    }
  }
  Ending ending;
  ending.status = st;
  ending.graceful = graceful;
  ending.internal = internal;
  ending.recv_failed = recv_failed_;
  ending.worker_aborted = worker_aborted;
  ending.dismissed = dismissed;
  ending.counted = counted_;
  if (!comm_) endOfEvicted(ctx_, name_, opened_, opening_.get(), &ending);
  reportEnd(ctx_, comm_, rank_, name_, ending, ctx_->stopping.load() || aborted_.load());
  comm_.reset();
  opening_.reset();
  {
    std::lock_guard<std::mutex> lock(out_mu_);
    writer_finish_ = true;
  }
  out_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  ctx_->observer->connectionClosed();
  finished_.store(true, std::memory_order_release);
}

Status Peer::handleHello(const uint8_t* data, size_t size, bool* end) {
  if (comm_) return Status::remote("second Hello on one connection");
  OutMsg reject;
  TALLY_RETURN_IF_ERROR(acceptHello(ctx_, shared_from_this(), data, size, &comm_, &rank_,
                                    &reject.header));
  if (!comm_) {
    send(std::move(reject));
    lingerAfterRefusal();
    *end = true;  // the writer has sent the Reject, or sends it before it closes
    return Status::ok();
  }
  opening_.reset();  // a member now: held to --max-connections instead
  return Status::ok();
}

Status Peer::handleSlice(const uint8_t* data, size_t size) {
  if (!comm_) return Status::remote("slice before Hello");
  wire::SliceHeader h;
  size_t bytes = 0;
  TALLY_RETURN_IF_ERROR(acceptSliceHeader(*comm_, rank_, data, size, &h, &bytes));
  // The window is checked after the header, not before the next message: when it is full, a
  // worker sends only control messages (Bye, or the Error of a rank that gave up), and those are
  // read at once (loop_peer.cc, takeHeldSlice).
  waitForCredit();
  const int shard = ctx_->engine->shardOf(comm_->id, h.slice);
  Buffer buf;  // stays null for an empty piece (all-gather): no payload follows its header
  size_t got = 0;
  if (bytes > 0) {
    buf = ctx_->engine->pool(shard).get(bytes);
    TALLY_RETURN_IF_ERROR(recvOne(buf->data(), bytes, wire::kTagPayload, &got));
  }
  if (got != bytes) {
    Status st = Status::remote("rank " + std::to_string(rank_) + " sent " + std::to_string(got) +
                               " payload bytes for " + wire::describeSlice(h) + ", expected " +
                               std::to_string(bytes));
    comm_->fail(st.message());
    return st;
  }
  if (bytes > 0 && !payloadIntact(ctx_, *comm_, rank_, name_, h, buf->data(), bytes, &counted_)) {
    return Status::ok();
  }
  {
    std::lock_guard<std::mutex> lock(credit_mu_);
    buffered_++;
  }
  SliceInput in;
  in.arrived = std::chrono::steady_clock::now();
  in.comm = comm_;
  in.peer = shared_from_this();
  in.rank = rank_;
  in.header = h;
  in.data = std::move(buf);
  ctx_->engine->submit(shard, std::move(in));  // reduced here when it completes its slice
  return Status::ok();
}

void Peer::markDeadLocked(Status st) {
  if (!dead_.isOk()) return;
  dead_ = std::move(st);
  // Nothing more can go out. The connection is closed at once, so pending requests may be
  // destroyed (the transport's rule) and the reader ends too.
  conn_->close();
}

void Peer::settleFrontLocked() {
  if (inflight_.front()->msg.releases_credit) releaseCredit();
  inflight_.pop_front();
  inflight_count_.store(inflight_.size(), std::memory_order_release);
}

void Peer::waitOldestLocked() {
  Inflight& f = *inflight_.front();
  for (transport::Request* r : {f.header_req.get(), f.payload_req.get()}) {
    if (r == nullptr) continue;
    for (;;) {
      Status st = r->wait(kPollMs, nullptr);
      if (st.isOk()) break;
      if (st.code() != StatusCode::kTimeout) {
        markDeadLocked(st);
        break;
      }
      if (aborted_.load() || ctx_->stopping.load()) {
        markDeadLocked(Status::remote("server stopping"));
        break;
      }
      if (flush_deadline_ != std::chrono::steady_clock::time_point{} &&
          std::chrono::steady_clock::now() > flush_deadline_) {
        markDeadLocked(Status::timeout("peer did not take its last messages"));
        break;
      }
    }
    if (!dead_.isOk()) break;
  }
  settleFrontLocked();
}

void Peer::reapLocked() {
  while (!inflight_.empty()) {
    bool done = true;
    for (transport::Request* r :
         {inflight_.front()->header_req.get(), inflight_.front()->payload_req.get()}) {
      if (r == nullptr || !done) continue;
      Status st = r->test(&done, nullptr);
      if (!st.isOk()) {
        markDeadLocked(st);
        done = true;
      }
    }
    if (!done) break;
    settleFrontLocked();
  }
  // After a failure nothing more will go out; free what waits.
  if (!dead_.isOk()) {
    while (!inflight_.empty()) settleFrontLocked();
  }
}

void Peer::postLocked(OutMsg msg) {
  auto owned = std::make_unique<Inflight>();  // the transport reads the header bytes in place
  Inflight& f = *owned;
  f.msg = std::move(msg);
  auto sendOne = [&](const void* data, size_t bytes, int tag,
                     std::unique_ptr<transport::Request>* req) {
    for (;;) {
      Status st = conn_->isend(data, bytes, tag, nullptr, req);
      if (st.isOk() && *req == nullptr && !inflight_.empty()) {
        waitOldestLocked();  // no room in the transport: make some
        if (dead_.isOk()) continue;
      }
      if (!st.isOk()) markDeadLocked(st);
      return;
    }
  };
  if (dead_.isOk()) {
    sendOne(f.msg.header.data(), f.msg.header.size, wire::kTagHeader, &f.header_req);
  }
  if (dead_.isOk() && f.msg.payload) {
    sendOne(f.msg.payload->data() + f.msg.payload_offset, f.msg.payload_bytes, wire::kTagPayload,
            &f.payload_req);
  }
  if (dead_.isOk() && (f.header_req == nullptr || (f.msg.payload && !f.payload_req))) {
    markDeadLocked(Status::internal("transport has no room for a send with none in flight"));
  }
  if (!dead_.isOk()) {
    if (f.msg.releases_credit) releaseCredit();
    return;
  }
  inflight_.push_back(std::move(owned));
  inflight_count_.store(inflight_.size(), std::memory_order_release);
  while (inflight_.size() > kMaxInflightSends && dead_.isOk()) waitOldestLocked();
}

bool Peer::tryPostNowLocked(OutMsg* msg) {
  std::unique_lock<std::mutex> post_lock(post_mu_, std::try_to_lock);
  if (!post_lock.owns_lock() || !dead_.isOk()) return false;
  reapLocked();
  if (!dead_.isOk() || inflight_.size() >= kMaxInflightSends) return false;
  const bool was_idle = inflight_.empty();
  postLocked(std::move(*msg));
  reapLocked();  // a small send often went out during isend: settle it here
  // The writer reaps what is still in flight (and releases its credits); it sleeps long while
  // it has nothing, so tell it there is something now.
  if (was_idle && !inflight_.empty()) out_cv_.notify_one();
  return true;
}

void Peer::writerLoop() {
  std::deque<OutMsg, PoolAllocator<OutMsg>> batch;
  bool finishing = false;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(out_mu_);
      if (out_.empty() && !writer_finish_ && !aborted_.load()) {
        const bool idle = inflight_count_.load(std::memory_order_acquire) == 0;
        out_cv_.wait_for(lock, std::chrono::milliseconds(idle ? kPollMs : 1));
      }
      batch.swap(out_);
      unsent_control_ = 0;
      pong_queued_ = false;
      writer_posting_ = !batch.empty();
      finishing = writer_finish_ || aborted_.load();
      if (finishing && batch.empty()) writer_done_ = true;
    }
    std::unique_lock<std::mutex> post_lock(post_mu_);
    if (finishing && flush_deadline_ == std::chrono::steady_clock::time_point{}) {
      flush_deadline_ = std::chrono::steady_clock::now() + kFlushTime;
    }
    for (OutMsg& m : batch) postLocked(std::move(m));
    batch.clear();
    if (writer_posting_) {
      std::lock_guard<std::mutex> lock(out_mu_);
      writer_posting_ = false;
    }
    reapLocked();  // completed sends give their credits back promptly
    if (finishing) {
      bool done_queueing;
      {
        std::lock_guard<std::mutex> lock(out_mu_);
        done_queueing = writer_done_;
      }
      if (done_queueing) {
        while (!inflight_.empty() && dead_.isOk()) waitOldestLocked();
        break;
      }
    }
  }
  // Requests must not outlive an open connection: close first, then drop them.
  std::lock_guard<std::mutex> post_lock(post_mu_);
  conn_->close();
  while (!inflight_.empty()) settleFrontLocked();
}

}  // namespace tally::reducer::server
