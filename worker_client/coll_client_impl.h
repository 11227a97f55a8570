// Inside CollClient (coll_client.h): the client object (coll_client.cc: handles, connect,
// iallreduce, close) and its per-reducer links, of two kinds behind one interface (Link):
// ThreadedLink (coll_link.cc: a sender and a receiver thread over a transport::Connection, for
// every transport; TALLY_COLL_PROGRESS=legacy) and RawLink (coll_raw_link.h: a TCP socket driven
// by the posting thread and either one epoll progress thread per client, TALLY_COLL_PROGRESS=
// thread, or the threads that test requests, TALLY_COLL_PROGRESS=poll).
// Not a public interface.
//
// Data flow: iallreduce numbers the call (seq), cuts it into slices and queues slice j on link
// (seq + j) % R, under post_mu_ so every link sees calls in seq order. A link's sender posts each
// slice's header and payload straight from the user's buffer, with at most `window` slices
// outstanding (sent, result not yet arrived). Its receiver reads a result header, then the
// payload straight into the user's recv buffer at the slice's offset. A call is done when its
// last slice's result has landed.
//
// Errors stick: the first one (an Error message, a lost connection, a timeout) closes every
// connection (so the transport writes nothing more into user buffers) and is then returned by
// every unfinished and later request.
//
// Caller memory: only a posted call's slices touch its buffers, on the sender (CRC, isend from
// the send buffer; also the iallreduce caller through tryPostNow, under send_mu_), the receiver
// (irecv into and CRC of the recv buffer) and the transport's threads. A link thread may still be
// in such a step for a moment after fail() closed its connection; abort() joins the link threads
// (and takes send_mu_ once more) after closing, so when it returns nothing touches them.
//
// ThreadedLink: a slice is posted by the iallreduce caller itself when its link has nothing
// queued, a free credit and no send under way (tryPostNow); otherwise the link's sender thread
// posts it. Either way only the holder of send_mu_ posts, so a link sends its slices in queue
// order.
//
// Lock order: CollClientImpl::post_mu_ -> ThreadedLink::send_mu_ -> ThreadedLink::mu_ (RawLink::mu_
// for a RawLink). Shared::mu is a leaf.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/crc32c.h"
#include "common/small_pool.h"
#include "worker_client/coll_client.h"
#include "worker_client/coll_connect.h"
#include "protocol/slicing.h"
#include "protocol/wire.h"
#include "transport/transport.h"

namespace tally::worker_client {
namespace wire = protocol::wire;
using protocol::Span;

class Link;

// Progress driven by the caller's own thread (TALLY_COLL_PROGRESS=poll): a request's test(), and
// a post that finds no room, run one non-blocking round of it.
class Poller {
 public:
  virtual ~Poller() = default;
  // Does what is ready now and returns; a no-op while another thread polls or once stopped.
  virtual void poll() = 0;
};

// State shared by the client, its links and its requests (which may outlive the client).
struct Shared {
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status error;  // set once, before `failed` turns true
  std::atomic<int> calls_in_flight{0};
  // Set by connect() before the first post, in poll mode only; kept alive by requests too.
  std::shared_ptr<Poller> poller;

  Status errorStatus() {
    std::lock_guard<std::mutex> lock(mu);
    return error;
  }
};

// What a call computes and where its buffers are.
struct CallSpec {
  const uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  uint64_t count = 0;  // elements of the call (all-gather, reduce-scatter: of the window)
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  wire::CollKind kind = wire::CollKind::kAllReduce;
  uint64_t rank_count = 0;     // all-gather, reduce-scatter: CollWindow::rank_count
  uint64_t window_offset = 0;  // all-gather, reduce-scatter: CollWindow::offset
  // The window-relative element that send[0] and recv[0] hold: 0, except for the side that
  // holds only this rank's part (all-gather's send, reduce-scatter's recv).
  uint64_t send_origin = 0;
  uint64_t recv_origin = 0;
};

// One posted call; records are reused (CollClientImpl::freeCallLocked).
struct Call final : CollCall, CallSpec {
  Status test(bool* done) override;

  std::shared_ptr<Shared> shared;
  uint64_t seq = 0;
  std::atomic<uint32_t> remaining{0};  // slices whose result has not arrived
};

// One slice of a call on its link: the piece this rank sends and the piece of the result it
// gets back (the same for all-reduce; either may be empty for all-gather and reduce-scatter,
// then only a header travels).
struct SliceTask {
  std::shared_ptr<Call> call;
  uint32_t slice = 0;
  Span send;  // window-relative elements
  Span recv;
};

// What goes out for a slice: its header (with the payload's CRC32C when `crc` is given) and
// its payload, straight from the caller's send buffer (null and 0 for an empty piece).
struct OutgoingSlice {
  wire::SliceHeader header;
  const void* payload = nullptr;
  size_t bytes = 0;
};
inline OutgoingSlice outgoingSlice(const SliceTask& task, const crc32c::Crc32c* crc) {
  const Call& call = *task.call;
  const size_t elt = dataTypeSize(call.type);
  OutgoingSlice out;
  wire::SliceHeader& h = out.header;
  h.seq = call.seq;
  h.slice = task.slice;
  h.kind = call.kind;
  h.offset = task.send.offset;
  h.count = task.send.count;
  h.total_count = call.count;
  h.type = call.type;
  h.op = call.op;
  h.rank_count = call.rank_count;
  h.window_offset = call.window_offset;
  // Zero copy: the payload goes from the user's buffer. Its result can only come back (and be
  // written over this range, when send == recv) after the reducer has received all of it.
  out.bytes = task.send.count * elt;
  if (out.bytes > 0) {
    out.payload = call.send + (task.send.offset - call.send_origin) * elt;
    if (crc != nullptr) h.crc = crc->compute(out.payload, out.bytes);
  }
  return out;
}

// The steady clock in nanoseconds, for the links' progress timestamps.
inline int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CollClientImpl;

// One reducer as the client drives it.
class Link {
 public:
  virtual ~Link() = default;

  // Starts the link's own threads, if it has any; kSystem when they cannot be created (the
  // client then closes).
  virtual Status start() = 0;
  // Sends the slice now or queues it behind earlier ones until a credit is free (called with the
  // client's post_mu_ held, so slices arrive in seq order). A failed send fails the client.
  virtual void post(SliceTask task) = 0;
  // Asks for Bye after what is queued.
  virtual void requestBye() = 0;
  // Waits up to timeout_ms for the Bye to have gone out (or the link to have ended).
  virtual bool waitSenderDone(int64_t timeout_ms) = 0;
  // Best effort: tells the reducer why this worker gives up on the communicator (an Error
  // message), so the reducer can pass the cause on to the other ranks. postAbort posts it;
  // finishAbort waits until the deadline (with yield_to_abort, only until an abort() is under
  // way, see CollClientImpl::hurrying) for it to be out, else closes the connection. Called by
  // CollClientImpl::fail only, once.
  virtual void postAbort(const std::string& reason) = 0;
  virtual void finishAbort(Clock::time_point deadline, bool yield_to_abort) = 0;
  // Closes the connection: pending transfers fail, the link's I/O ends soon. Any thread.
  virtual void closeConnection() = 0;
  // Closes the connection, then waits until no thread of the link touches caller memory (joins
  // its threads). The owner's thread only.
  virtual void stopAndJoin() = 0;

  virtual const std::string& address() const = 0;
};

// One reducer over a transport::Connection: a sender thread and a receiver thread.
class ThreadedLink final : public Link {
 public:
  // `crc` (TALLY_CHECKSUM; null when off) checksums each slice sent and checks each result.
  ThreadedLink(CollClientImpl* client, std::string address,
               std::unique_ptr<transport::Connection> conn, int window, int64_t timeout_ms,
               const crc32c::Crc32c* crc);
  ~ThreadedLink() override;

  Status start() override;
  void post(SliceTask task) override;
  // Asks the sender to send Bye after what is queued, then end.
  void requestBye() override;
  bool waitSenderDone(int64_t timeout_ms) override;
  void postAbort(const std::string& reason) override;
  void finishAbort(Clock::time_point deadline, bool yield_to_abort) override;
  void closeConnection() override;
  // Stops and joins both threads (closes the connection first).
  void stopAndJoin() override;

  const std::string& address() const override { return address_; }

 private:
  // Queues a slice (called with the client's post_mu_ held).
  void enqueue(SliceTask task);
  // Posts the slice from this thread when nothing is queued or being sent and a credit is free
  // (called with the client's post_mu_ held); false: enqueue it instead. A failed send fails
  // the client, as on the sender thread.
  bool tryPostNow(const SliceTask& task);
  void senderLoop();
  void receiverLoop();
  // Waits for `req` in short steps; gives up when stopping or when no result has arrived for
  // timeout_ms while slices are outstanding.
  Status waitBounded(transport::Request* req, size_t* size);
  Status sendSlice(const SliceTask& task);
  // Registers `task` as outstanding (mu_ held).
  void registerLocked(const SliceTask& task);
  // Reports a send error of this link to the client (unless it is closing anyway).
  void reportFailure(const Status& st);
  // Drops completed sends from the front of sends_; with `block`, waits for the oldest first.
  Status reapSends(bool block);
  Status receiveResult(const uint8_t* header, size_t size);

  CollClientImpl* client_;
  const std::string address_;
  std::unique_ptr<transport::Connection> conn_;
  const int window_;
  const int64_t timeout_ms_;
  const crc32c::Crc32c* const crc_;
  std::thread sender_;
  std::thread receiver_;

  std::mutex send_mu_;  // held while posting sends and reaping sends_
  std::mutex mu_;
  std::condition_variable cv_;
  // Containers of the data path take their blocks from small_pool: no heap use per call.
  using SliceKey = std::pair<uint64_t, uint32_t>;          // (call seq, slice)
  std::deque<SliceTask, PoolAllocator<SliceTask>> queue_;  // not yet sent
  std::map<SliceKey, SliceTask, std::less<SliceKey>,
           PoolAllocator<std::pair<const SliceKey, SliceTask>>>
      waiting_;  // sent, result not arrived
  int outstanding_ = 0;
  bool bye_ = false;
  bool sender_done_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> last_progress_ns_{0};

  // A send in flight: the header bytes must live until the transport is done with them.
  struct Sent {
    wire::Frame header;
    std::unique_ptr<transport::Request> header_req;
    std::unique_ptr<transport::Request> payload_req;
  };
  // Guarded by send_mu_; dropped only after the connection is closed (transport rule).
  std::deque<std::unique_ptr<Sent>, PoolAllocator<std::unique_ptr<Sent>>> sends_;
  std::vector<std::unique_ptr<Sent>> spare_sends_;  // finished, kept for reuse
  // The receiver thread's header receive; a pending one is kept until the connection is closed.
  std::array<uint8_t, wire::kMaxHeaderBytes> recv_header_;
  std::unique_ptr<transport::Request> recv_req_;
  // postAbort's message; like sends_, kept until the connection is closed.
  wire::Frame abort_frame_;
  std::unique_ptr<transport::Request> abort_req_;
};

class Progress;

class CollClientImpl final : public CollClient {
 public:
  CollClientImpl(const CollOptions& options, int rank, int nranks);
  ~CollClientImpl() override;

  Status iallreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                    CollRequest* req) override;
  Status iallgather(const void* send, void* recv, const CollWindow& window,
                    CollRequest* req) override;
  Status ireducescatter(const void* send, void* recv, const CollWindow& window, DataType type,
                        ReduceOp op, CollRequest* req) override;
  void close() override;
  void abort(const Status& why) override;
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }

  // Links (and the progress thread RawLinks share, when there are any) are added by connect()
  // before start().
  void addLink(std::unique_ptr<Link> link) { links_.push_back(std::move(link)); }
  void setProgress(std::shared_ptr<Progress> progress);
  // Starts the links and the progress thread; fails as Link::start does.
  Status start();
  // Makes `st` the client's sticky error (the first one wins), after closing every connection.
  // Before closing, each reducer is sent an Error with the cause, waiting at most wait_ms (or
  // until abort() hurries) for them to go out.
  void fail(const Status& st, int64_t wait_ms = kFailWaitMs);
  bool closing() const { return closing_.load(std::memory_order_acquire); }
  // abort() is under way: a fail() on a link thread stops waiting for its Error messages.
  bool hurrying() const { return hurry_.load(std::memory_order_acquire); }

  // fail()'s wait for the Error messages: found by a link thread (no NCCL thread waits on it),
  // and on the abort path (closeColl, deregMr), where NCCL's proxy thread waits.
  static constexpr int64_t kFailWaitMs = 200;
  static constexpr int64_t kAbortWaitMs = 5;
  // close() with no call in flight: how long the Bye may take to go out.
  static constexpr int64_t kByeWaitMs = 50;
  const std::shared_ptr<Shared>& shared() const { return shared_; }

 private:
  const CollOptions options_;
  const int rank_;
  const int nranks_;
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  // Declared before links_: RawLinks stop it in their destructors. Shared with shared_->poller
  // in poll mode.
  std::shared_ptr<Progress> progress_;
  std::vector<std::unique_ptr<Link>> links_;
  std::mutex post_mu_;
  uint64_t next_seq_ = 0;
  // Calls kept for reuse (guarded by post_mu_): one only this list holds is free again.
  std::vector<std::shared_ptr<Call>> calls_;
  std::shared_ptr<Call> freeCallLocked();
  // What every post shares: checks, numbering, cutting into slices, queueing. `result_bytes` is
  // what the request reports when done.
  Status post(const CallSpec& spec, size_t result_bytes, CollRequest* req);
  // Fails with `why`, then joins every link's threads (close_mu_ held).
  void abortLocked(const Status& why);
  std::mutex fail_mu_;
  std::atomic<bool> closing_{false};
  std::atomic<bool> hurry_{false};
  std::mutex close_mu_;
  bool closed_ = false;  // close() or abort() ran (guarded by close_mu_)
};

}  // namespace tally::worker_client
