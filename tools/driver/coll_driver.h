// SPDX-License-Identifier: Apache-2.0
// CollComm: one CollNet communicator driven through a plugin's ncclCollNet table the way NCCL's
// proxy sets it up and calls iallreduce on a head rank:
//
//   init (v11: per communicator) -> devices -> getProperties -> listen -> handle exchange through
//   a Store -> connect(handles, nranks, rank, listenComm, &collComm) -> closeListen right after
//   connect -> regMr of ONE shared region 2 x nchannels times (send half, recv half) ->
//   reduceSupport over 12 types x 4 ops -> iallreduce/test ... -> deregMr all -> closeColl ->
//   finalize.
//
// allreduce() stages the user's data through the region like NCCL does through its shared
// buffer: the data is cut into calls of at most call_bytes, each copied into a slot of the send
// half, posted with pointers inside the region (retried while the plugin returns a NULL request,
// with no test in between, as NCCL's send proxy does), up to max_inflight calls in flight, and
// tested oldest first; each result is copied out of the matching slot of the receive half.
//
// One thread drives a CollComm at a time; different CollComms may be driven from different
// threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/store.h"
#include "common/types.h"
#include "tools/driver/plugin_library.h"

namespace tally::driver {

struct CollCommOptions {
  int dev = 0;
  int nchannels = 2;            // the region is registered 2 x nchannels times
  size_t call_bytes = 1 << 20;  // largest iallreduce (NCCL Chain: 8 channels x 256 KiB)
  // When non-zero, each call's count is rounded up to whole chunks of this many bytes (at most
  // call_bytes), as NCCL does: the tail of the last chunk holds stale bytes, reduced and ignored.
  size_t whole_chunk_bytes = 0;
  int max_inflight = 8;        // NCCL_STEPS
  int64_t timeout_ms = 60000;  // store waits, and any stretch without progress
  uint64_t comm_id = 0;        // v11 init commId; 0 picks one from the name
};

struct CollStats {
  uint64_t calls = 0;          // iallreduce calls that returned a request
  uint64_t null_requests = 0;  // calls answered with a NULL request (retried)
};

class CollComm {
 public:
  // Runs NCCL's setup sequence for rank `rank` of `nranks`. Keys used in the store:
  // "<name>/handle/<rank>". On failure everything created so far is closed again.
  static Status create(CollNetApi* api, Store* store, const std::string& name, int rank, int nranks,
                       const CollCommOptions& options, std::unique_ptr<CollComm>* out);
  ~CollComm();
  CollComm(const CollComm&) = delete;
  CollComm& operator=(const CollComm&) = delete;

  // dst[i] = reduction over all ranks of src[i]; src and dst may be equal. Every rank must make
  // the same sequence of calls. Fails on the first plugin error or after timeout_ms without any
  // call completing; in-flight calls are then abandoned (close() still works).
  Status allreduce(const void* src, void* dst, size_t count, DataType type, ReduceOp op);

  // NCCL's CollNetDirect all-gather and reduce-scatter without registered buffers: windows of
  // call_bytes (whole elements) march over the global vector of nranks parts, staged through the
  // region like allreduce. allgather: dst (nranks x bytes_per_rank bytes) = every rank's src in
  // rank order. reducescatter: dst (count elements) = the reduction over all ranks of elements
  // [rank x count, (rank + 1) x count) of src (nranks x count elements). Windows may span ranks
  // and miss this rank's part. The table must have the slot (CollNetApi::hasAllGather etc.).
  Status allgather(const void* src, void* dst, size_t bytes_per_rank);
  Status reducescatter(const void* src, void* dst, size_t count, DataType type, ReduceOp op);

  // Changes the shape of the calls that follow: calls of at most call_bytes (no more than the
  // options' call_bytes, which sized the region's slots), counts rounded up to whole chunks of
  // whole_chunk_bytes (0: not rounded). NCCL's shape changes with the message size
  // (nccl_calls.h).
  Status setCallShape(size_t call_bytes, size_t whole_chunk_bytes);

  // The support matrix the plugin reported at setup.
  bool supported(DataType type, ReduceOp op) const;
  const NetProperties& properties() const { return props_; }
  const CollStats& stats() const { return stats_; }
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  // deregMr every registration, closeColl, finalize. Idempotent; reports the first error.
  Status close();

 private:
  CollComm(CollNetApi* api, int rank, int nranks, const CollCommOptions& options)
      : api_(api), rank_(rank), nranks_(nranks), options_(options) {}
  Status setup(Store* store, const std::string& name);
  // Posts pieces 0..npieces-1 (at most max_inflight in flight, each in its own send and receive
  // slot of the region) and finishes them oldest first. post(piece, send slot, recv slot,
  // stage, &request): stage is false when the piece's input is already in its slot (a retry
  // after a NULL request). finish(piece, recv slot, size test reported).
  using PostFn = std::function<Status(size_t, char*, char*, bool, void**)>;
  using FinishFn = std::function<Status(size_t, const char*, int)>;
  Status pipeline(const char* what, size_t npieces, const PostFn& post, const FinishFn& finish);
  char* slotOf(bool send, size_t slot);

  CollNetApi* api_;
  int rank_;
  int nranks_;
  CollCommOptions options_;
  NetProperties props_;
  void* ctx_ = nullptr;
  void* coll_comm_ = nullptr;
  std::vector<char> region_;  // send half, then recv half
  size_t half_bytes_ = 0;
  size_t slot_bytes_ = 0;        // the options' call_bytes at setup: the room of each slot
  std::vector<void*> mhandles_;  // 2 x nchannels: even = send connector, odd = recv connector
  bool support_[kNumDataTypes][kNumReduceOps] = {};
  CollStats stats_;
  bool closed_ = false;
};

}  // namespace tally::driver
