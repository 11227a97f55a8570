// SPDX-License-Identifier: Apache-2.0
// The worker side of the reduction-server protocol: one CollNet communicator's members talking
// to the reducers. plugin/ wraps this for NCCL's ncclCollNet tables; the demo and tests use it
// through the plugin.
//
// Life cycle
//   makeHandle() on every rank (rank 0's random 128-bit communicator id, from OpenSSL's CSPRNG,
//   wins); connect() with all ranks' handles, blocking until every rank and every reducer has
//   joined (each reducer connection opened with the job token's challenge-response, when there
//   is one) or the connect timeout passes; then iallreduce()/test() from any thread; close().
//
// iallreduce cuts the buffer into slices of `slice_bytes` (whole elements) and spreads them over
// the reducers, rotating the first reducer with every call. Each reducer sums slice k from all
// ranks in rank order and returns the same bytes to every rank. iallgather and ireducescatter cut
// their window the same way; the reducer assembles each all-gather slice from its owners' pieces
// and returns it to every rank, and returns to each rank only its own part of a reduce-scatter
// slice's sum (protocol/wire.h SliceHeader).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/types.h"
#include "transport/raw_stream.h"
#include "worker_client/coll_options.h"

namespace tally::worker_client {

// An all-gather or reduce-scatter window, in elements: the window [offset, offset + count) of a
// vector of nranks x rank_count elements in which rank r owns [r x rank_count,
// (r + 1) x rank_count). NCCL's bytesPerRank, windowOffset and windowBytes over the element size.
struct CollWindow {
  uint64_t rank_count = 0;
  uint64_t offset = 0;
  uint64_t count = 0;
};

// Bytes of the connect handle; fits NCCL's 128-byte handle.
inline constexpr size_t kCollHandleBytes = 64;

// What a posted call's request refers to: implemented by the client's call records (and by test
// fakes). Records are reused, never allocated per call.
class CollCall {
 public:
  virtual ~CollCall() = default;
  // Non-blocking: *done once every result has landed; an error once the communicator failed.
  virtual Status test(bool* done) = 0;
};

// A posted all-reduce, held by value: copying it copies a reference to a reused call record, so
// posting and testing allocate nothing. Default-constructed (or reset) it is "not posted".
class CollRequest {
 public:
  CollRequest() = default;
  CollRequest(std::shared_ptr<CollCall> call, size_t bytes)
      : call_(std::move(call)), bytes_(bytes), posted_(true) {}
  // A request that is done at once (count 0).
  static CollRequest completed() {
    CollRequest r;
    r.posted_ = true;
    return r;
  }

  bool posted() const { return posted_; }
  // Non-blocking. Once done, *bytes (when non-null) holds count x element size.
  Status test(bool* done, size_t* bytes);
  // Drops the reference to the call record; the request is "not posted" again.
  void reset() { *this = CollRequest(); }

 private:
  std::shared_ptr<CollCall> call_;  // null for count 0
  size_t bytes_ = 0;
  bool posted_ = false;
};

class CollClient {
 public:
  virtual ~CollClient() = default;

  // Writes this rank's handle (kCollHandleBytes) into out: a fresh random communicator id and
  // a digest of the reducer list, so ranks configured with different reducers fail at connect.
  static Status makeHandle(const CollOptions& options, void* out);

  // Forms the group. handles[i] is rank i's handle. Blocks until every reducer reports that all
  // nranks have joined, or fails (kTimeout, kRemote, kInvalidUsage for mismatched handles).
  static Status connect(const CollOptions& options, const void* const* handles, int nranks,
                        int rank, std::unique_ptr<CollClient>* out);

  // Posts an all-reduce of count elements from send into recv (they may be equal). Never blocks
  // and, once warm, never allocates. Success with !req->posted(): no room now (too many calls in
  // flight); retry.
  virtual Status iallreduce(const void* send, void* recv, size_t count, DataType type,
                            ReduceOp op, CollRequest* req) = 0;

  // Posts an all-gather of a window of bytes (rank_count, offset and count in bytes): send holds
  // this rank's part of the window (nothing is read when the window misses it), recv receives
  // the whole window. Same rules as iallreduce.
  virtual Status iallgather(const void* send, void* recv, const CollWindow& window,
                            CollRequest* req) = 0;
  // Posts a reduce-scatter: send holds the whole window, recv receives the reduction over all
  // ranks of this rank's part of it (nothing is written when the window misses it).
  virtual Status ireducescatter(const void* send, void* recv, const CollWindow& window,
                                DataType type, ReduceOp op, CollRequest* req) = 0;

  // Leaves the communicator and stops the helper threads; returns within about 100 ms whatever
  // is in flight. With no call in flight it says Bye (waiting at most 50 ms for it to go out), so
  // the reducers see a clean leave; with calls in flight it is abort(). Idempotent.
  virtual void close() = 0;

  // Gives up on the communicator at once: `why` becomes its sticky error (unless it failed
  // before), which every unfinished and later request returns; the reducers hear it (best
  // effort, a few ms) and pass it on to the other ranks. Returns only once no thread of this
  // client reads or writes caller memory any more: connections closed, helper threads joined.
  // Then the caller may free every buffer of every call. Idempotent; close() after it only
  // frees. Called by the owner's thread, never by a helper thread.
  virtual void abort(const Status& why) = 0;

  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // What this rank's zero-copy sends did so far, over its live links (TALLY_ZEROCOPY).
  virtual transport::ZerocopyCounts zerocopyCounts() const { return {}; }
};

}  // namespace tally::worker_client
