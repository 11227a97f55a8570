// One worker connection on the reducer: its reader thread (headers, payloads, dispatch to the
// engine) and its writer thread (Ready, Reject, results and Error, in queue order).
#include <chrono>
#include <exception>

#include "common/log.h"
#include "reducer/server_internal.h"

namespace tally::reducer::server {
namespace {

// How often blocked threads look at the stop flags.
constexpr int64_t kPollMs = 100;
// Sends kept in flight by one writer before it waits for the oldest.
constexpr size_t kMaxInflightSends = 32;
// How long a writer keeps flushing after its reader ended (a Reject, a last Error).
constexpr auto kFlushTime = std::chrono::seconds(2);

}  // namespace

Peer::Peer(std::unique_ptr<transport::Connection> conn, ServerContext* ctx)
    : conn_(std::move(conn)), ctx_(ctx), name_(conn_->peerName()) {}

Peer::~Peer() {
  abort();
  join();
}

void Peer::start() {
  // The server holds this Peer until it has joined both threads. The reader reports the close.
  ctx_->observer->connectionOpened();
  writer_ = std::thread([this] { writerLoop(); });
  reader_ = std::thread([this] { readerLoop(); });
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
  {
    std::lock_guard<std::mutex> lock(out_mu_);
    if (!writer_done_) {
      out_.push_back(std::move(msg));
      out_cv_.notify_one();
      return;
    }
  }
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
// not block either.
void Peer::waitForCredit() {
  const int window = ctx_->options.window;
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
  }
}

void Peer::readerLoop() {
  std::array<uint8_t, wire::kMaxHeaderBytes> header;
  bool graceful = false;
  bool internal = false;
  Status st;
  try {
    for (;;) {
      waitForCredit();
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

  const bool stopping = ctx_->stopping.load() || aborted_.load();
  if (!graceful && !stopping) {
    ctx_->observer->error(internal       ? ServerError::kInternal
                          : recv_failed_ ? ServerError::kPeerLost
                                         : ServerError::kProtocol);
  }
  if (comm_ && !stopping) {
    const std::string why = "rank " + std::to_string(rank_) + " (peer " + name_ + ") " +
                            (st.isOk() ? "left" : "was lost: " + st.toString());
    if (graceful) {
      TALLY_INFO(log::kColl, "reducer: %s left communicator %s", name_.c_str(),
                 comm_->id.toString().c_str());
    } else {
      TALLY_WARN("reducer: peer %s (rank %d of communicator %s) lost: %s", name_.c_str(), rank_,
                 comm_->id.toString().c_str(), st.toString().c_str());
    }
    ctx_->registry->leave(comm_, rank_, graceful, why);
  } else if (!graceful && !stopping) {
    TALLY_WARN("reducer: peer %s closed before joining: %s", name_.c_str(), st.toString().c_str());
  }
  comm_.reset();
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
  wire::Hello hello;
  Status st = wire::decodeHello(data, size, &hello);
  if (st.isOk()) st = ctx_->registry->join(shared_from_this(), hello, &comm_);
  if (!st.isOk()) {
    TALLY_WARN("reducer: rejecting peer %s: %s", name_.c_str(), st.message().c_str());
    ctx_->observer->error(ServerError::kRejectedHello);
    OutMsg m;
    m.header = wire::encodeReject(wire::Reason{st.message()});
    send(std::move(m));
    *end = true;  // the writer sends the Reject, then the connection closes
    return Status::ok();
  }
  rank_ = static_cast<int>(hello.rank);
  TALLY_INFO(log::kColl, "reducer: peer %s joined communicator %s as rank %u of %u",
             name_.c_str(), hello.comm.toString().c_str(), hello.rank, hello.nranks);
  return Status::ok();
}

Status Peer::handleSlice(const uint8_t* data, size_t size) {
  if (!comm_) return Status::remote("slice before Hello");
  wire::SliceHeader h;
  TALLY_RETURN_IF_ERROR(wire::decodeSlice(data, size, &h));
  Status st = comm_->checkSlice(h, rank_);
  if (!st.isOk()) {
    comm_->fail(st.message());
    return st;
  }
  const int shard = ctx_->engine->shardOf(comm_->id, h.slice);
  const size_t bytes = h.payloadBytes();
  Buffer buf = ctx_->engine->pool(shard).get(bytes);
  size_t got = 0;
  TALLY_RETURN_IF_ERROR(recvOne(buf->data(), bytes, wire::kTagPayload, &got));
  if (got != bytes) {
    st = Status::remote("rank " + std::to_string(rank_) + " sent " + std::to_string(got) +
                        " payload bytes for " + wire::describeSlice(h) + ", expected " +
                        std::to_string(bytes));
    comm_->fail(st.message());
    return st;
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
  ctx_->engine->post(shard, std::move(in));
  return Status::ok();
}

void Peer::writerLoop() {
  struct Inflight {
    OutMsg msg;
    std::unique_ptr<transport::Request> header_req;
    std::unique_ptr<transport::Request> payload_req;
  };
  // Heap-allocated: the transport reads the header bytes in place until the send is done.
  std::deque<std::unique_ptr<Inflight>> inflight;
  Status dead;  // first send error; later messages are dropped
  std::chrono::steady_clock::time_point flush_deadline{};
  // After a failed send nothing more can go out. The connection is closed at once, so pending
  // requests may be destroyed (the transport's rule) and the reader ends too.
  auto markDead = [&](Status st) {
    if (!dead.isOk()) return;
    dead = std::move(st);
    conn_->close();
  };

  auto settle = [&](Inflight& f) {
    if (f.msg.releases_credit) releaseCredit();
  };
  // Waits for the oldest send; false when the writer should give up waiting.
  auto waitOldest = [&]() {
    Inflight& f = *inflight.front();
    for (transport::Request* r : {f.header_req.get(), f.payload_req.get()}) {
      if (r == nullptr) continue;
      for (;;) {
        Status st = r->wait(kPollMs, nullptr);
        if (st.isOk()) break;
        if (st.code() != StatusCode::kTimeout) {
          markDead(st);
          break;
        }
        if (aborted_.load() || ctx_->stopping.load()) {
          markDead(Status::remote("server stopping"));
          break;
        }
        if (flush_deadline != std::chrono::steady_clock::time_point{} &&
            std::chrono::steady_clock::now() > flush_deadline) {
          markDead(Status::timeout("peer did not take its last messages"));
          break;
        }
      }
      if (!dead.isOk()) break;
    }
    settle(f);
    inflight.pop_front();
  };
  auto post = [&](OutMsg msg) {
    auto owned = std::make_unique<Inflight>();
    Inflight& f = *owned;
    f.msg = std::move(msg);
    if (dead.isOk()) {
      for (;;) {
        transport::MemoryRegion* mr = nullptr;
        Status st = conn_->isend(f.msg.header.data(), f.msg.header.size, wire::kTagHeader, mr,
                                 &f.header_req);
        if (st.isOk() && f.header_req == nullptr && !inflight.empty()) {
          waitOldest();  // no room in the transport: make some
          if (dead.isOk()) continue;
        }
        if (!st.isOk()) markDead(st);
        break;
      }
    }
    if (dead.isOk() && f.msg.payload) {
      for (;;) {
        Status st = conn_->isend(f.msg.payload->data(), f.msg.payload_bytes, wire::kTagPayload,
                                 nullptr, &f.payload_req);
        if (st.isOk() && f.payload_req == nullptr && !inflight.empty()) {
          waitOldest();
          if (dead.isOk()) continue;
        }
        if (!st.isOk()) markDead(st);
        break;
      }
    }
    if (dead.isOk() && (f.header_req == nullptr || (f.msg.payload && !f.payload_req))) {
      markDead(Status::internal("transport has no room for a send with none in flight"));
    }
    if (!dead.isOk()) {
      settle(f);
      return;
    }
    inflight.push_back(std::move(owned));
    while (inflight.size() > kMaxInflightSends && dead.isOk()) waitOldest();
  };

  std::deque<OutMsg> batch;
  bool finishing = false;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(out_mu_);
      if (out_.empty() && !writer_finish_ && !aborted_.load()) {
        out_cv_.wait_for(lock, std::chrono::milliseconds(inflight.empty() ? kPollMs : 1));
      }
      batch.swap(out_);
      finishing = writer_finish_ || aborted_.load();
      if (finishing && batch.empty()) writer_done_ = true;
    }
    if (finishing && flush_deadline == std::chrono::steady_clock::time_point{}) {
      flush_deadline = std::chrono::steady_clock::now() + kFlushTime;
    }
    for (OutMsg& m : batch) post(std::move(m));
    batch.clear();
    // Reap completed sends so credits come back promptly.
    while (!inflight.empty()) {
      bool done = true;
      for (transport::Request* r : {inflight.front()->header_req.get(),
                                    inflight.front()->payload_req.get()}) {
        if (r == nullptr || !done) continue;
        Status st = r->test(&done, nullptr);
        if (!st.isOk()) {
          markDead(st);
          done = true;
        }
      }
      if (!done) break;
      settle(*inflight.front());
      inflight.pop_front();
    }
    if (!dead.isOk()) {
      // Nothing more will go out; free what waits.
      while (!inflight.empty()) {
        settle(*inflight.front());
        inflight.pop_front();
      }
    }
    if (finishing) {
      bool done_queueing;
      {
        std::lock_guard<std::mutex> lock(out_mu_);
        done_queueing = writer_done_;
      }
      if (done_queueing) {
        while (!inflight.empty() && dead.isOk()) waitOldest();
        break;
      }
    }
  }
  // Requests must not outlive an open connection: close first, then drop them.
  conn_->close();
  while (!inflight.empty()) {
    settle(*inflight.front());
    inflight.pop_front();
  }
}

}  // namespace tally::reducer::server
