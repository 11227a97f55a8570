// SPDX-License-Identifier: Apache-2.0
// The Request every backend hands out and the Connection of the RDMA backends: thin forwards to
// the backend's Core, which owns every piece of state. A Request holds the Core by shared_ptr, so
// one that outlives its Connection (allowed after close, transport.h) stays safe.
//
// Core needs: sync() (a RequestSync<Op> for CoreRequest); for CoreConnection also isend, irecv,
// registerMemory, registerDmaBuf and iflush with Connection's signatures, close() and peer().
// CoreBase gives sync() and peer().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "common/small_pool.h"
#include "transport/transport.h"

namespace tally::transport {

// The check of a grouped call's buffer count (irecv, iflush): 1 to kMaxRecvs, else kInternal
// "<call>: <n> buffers, expected 1 to 8".
inline Status checkBufferCount(const char* call, int n) {
  if (n >= 1 && n <= kMaxRecvs) return Status::ok();
  return Status::internal(std::string(call) + ": " + std::to_string(n) +
                          " buffers, expected 1 to " + std::to_string(kMaxRecvs));
}

// Copies an irecv's buffers, capacities and tags into its Op (fields n, data[], capacity[],
// tags[]), after checkRecvArgs.
template <class Op>
void fillRecvBuffers(Op* op, int n, void* const* data, const size_t* sizes, const int* tags) {
  op->n = n;
  for (int i = 0; i < n; ++i) {
    op->data[i] = static_cast<uint8_t*>(data[i]);
    op->capacity[i] = sizes[i];
    op->tags[i] = tags[i];
  }
}

// What every backend's irecv checks first: the count, and no null buffer of non-zero size.
inline Status checkRecvArgs(int n, void* const* data, const size_t* sizes) {
  TALLY_RETURN_IF_ERROR(checkBufferCount("irecv", n));
  for (int i = 0; i < n; ++i) {
    if (data[i] == nullptr && sizes[i] > 0) return Status::internal("irecv: null buffer");
  }
  return Status::ok();
}

// What a Core's requests finish under, as references to the Core's members: the lock that
// guards each Op's `done` and the sticky error, the condition variable signalled when an Op
// finishes or the connection fails, and the peer's name for the timeout's message. Op has
// is_send, n, done and received[]; a send's size is op.*send_size.
template <class Op>
struct RequestSync {
  std::mutex& mu;
  std::condition_variable& done_cv;
  const bool& failed;
  const Status& error;
  const std::string& peer;
  uint64_t Op::*send_size;
};

// The sizes a finished Op reports: a send's size, or what landed in each of a receive's buffers.
// Called under sync.mu.
template <class Op>
void copySizesLocked(const RequestSync<Op>& sync, const Op& op, size_t* sizes) {
  if (sizes == nullptr) return;
  if (op.is_send) {
    sizes[0] = op.*sync.send_size;
  } else {
    for (int i = 0; i < op.n; ++i) sizes[i] = op.received[i];
  }
}

// Request::test: a done Op reports done even after the connection failed.
template <class Op>
Status testOp(const RequestSync<Op>& sync, const Op& op, bool* done, size_t* sizes) {
  std::lock_guard<std::mutex> lock(sync.mu);
  if (op.done) {
    copySizesLocked(sync, op, sizes);
    *done = true;
    return Status::ok();
  }
  if (sync.failed) return connectionFailure(sync.error);
  *done = false;
  return Status::ok();
}

// Request::wait; timeout_ms < 0 waits for ever.
template <class Op>
Status waitOp(const RequestSync<Op>& sync, const Op& op, int64_t timeout_ms, size_t* sizes) {
  std::unique_lock<std::mutex> lock(sync.mu);
  auto finished = [&] { return op.done || sync.failed; };
  if (timeout_ms < 0) {
    sync.done_cv.wait(lock, finished);
  } else if (!sync.done_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), finished)) {
    return Status::timeout("request to peer " + sync.peer + " still pending after " +
                           std::to_string(timeout_ms) + " ms");
  }
  if (!op.done) return connectionFailure(sync.error);
  copySizesLocked(sync, op, sizes);
  return Status::ok();
}

// The part every RDMA backend's Core shares: the lock its requests finish under, the condition
// variable signalled when an Op finishes or the connection fails, the sticky error, the peer's
// name, and the sync() and peer() that CoreRequest and CoreConnection call. `send_size` names the
// Op field holding a send's size.
template <class Op, uint64_t Op::*send_size>
class CoreBase {
 public:
  // What its requests (CoreRequest) test and wait under.
  RequestSync<Op> sync() { return {mu_, done_cv_, failed_, error_, peer_, send_size}; }
  const std::string& peer() const { return peer_; }

 protected:
  explicit CoreBase(std::string peer) : peer_(std::move(peer)) {}
  ~CoreBase() = default;

  const std::string peer_;
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool failed_ = false;  // mu_; set once, with error_
  Status error_;         // mu_; the first failure wins
};

template <class Core, class Op>
class CoreRequest final : public Request {
 public:
  TALLY_POOLED_NEW(CoreRequest);

  CoreRequest(std::shared_ptr<Core> core, std::shared_ptr<Op> op)
      : core_(std::move(core)), op_(std::move(op)) {}
  Status test(bool* done, size_t* sizes) override {
    return testOp(core_->sync(), *op_, done, sizes);
  }
  Status wait(int64_t timeout_ms, size_t* sizes) override {
    return waitOp(core_->sync(), *op_, timeout_ms, sizes);
  }

 private:
  std::shared_ptr<Core> core_;
  std::shared_ptr<Op> op_;
};

template <class Core>
class CoreConnection final : public Connection {
 public:
  explicit CoreConnection(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  ~CoreConnection() override { core_->close(); }

  Status isend(const void* data, size_t size, int tag, MemoryRegion* mr,
               std::unique_ptr<Request>* req) override {
    return core_->isend(data, size, tag, mr, req);
  }
  Status irecv(int n, void* const* data, const size_t* sizes, const int* tags,
               MemoryRegion* const* mrs, std::unique_ptr<Request>* req) override {
    return core_->irecv(n, data, sizes, tags, mrs, req);
  }
  Status registerMemory(void* data, size_t size, MemoryType type,
                        std::unique_ptr<MemoryRegion>* mr) override {
    return core_->registerMemory(data, size, type, mr);
  }
  Status registerDmaBuf(void* data, size_t size, int fd, uint64_t offset,
                        std::unique_ptr<MemoryRegion>* mr) override {
    return core_->registerDmaBuf(data, size, fd, offset, mr);
  }
  Status iflush(int n, void* const* data, const size_t* sizes, MemoryRegion* const* mrs,
                std::unique_ptr<Request>* req) override {
    return core_->iflush(n, data, sizes, mrs, req);
  }
  void close() override { core_->close(); }
  std::string peerName() const override { return core_->peer(); }

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace tally::transport
