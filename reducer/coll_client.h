// The worker side of the reduction-server protocol: one CollNet communicator's members talking
// to the reducers. plugin/ wraps this for NCCL's ncclCollNet tables; the demo and tests use it
// through the plugin.
//
// Life cycle
//   makeHandle() on every rank (rank 0's random 128-bit communicator id wins);
//   connect() with all ranks' handles, blocking until every rank and every reducer has joined or
//   the connect timeout passes; then iallreduce()/test() from any thread; close().
//
// iallreduce cuts the buffer into slices of `slice_bytes` (whole elements) and spreads them over
// the reducers, rotating the first reducer with every call. Each reducer sums slice k from all
// ranks in rank order and returns the same bytes to every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/types.h"

namespace tally::reducer {

// Bytes of the connect handle; fits NCCL's 128-byte handle.
inline constexpr size_t kCollHandleBytes = 64;

struct CollOptions {
  std::vector<std::string> reducers;   // "host:port", the same list on every rank
  uint64_t slice_bytes = 256 * 1024;   // TALLY_SLICE_BYTES
  int window = 16;                     // TALLY_COLL_WINDOW: slices in flight per reducer
  int max_requests = 64;               // TALLY_COLL_MAX_REQUESTS
  int64_t connect_timeout_ms = 120000;
  int64_t timeout_ms = 300000;
};

class CollRequest {
 public:
  virtual ~CollRequest() = default;
  // Non-blocking. Once done, *bytes (when non-null) holds count x element size.
  virtual Status test(bool* done, size_t* bytes) = 0;
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

  // Posts an all-reduce of count elements from send into recv (they may be equal). Never blocks.
  // Success with *req == nullptr: no room now (too many calls or bytes in flight); retry.
  virtual Status iallreduce(const void* send, void* recv, size_t count, DataType type,
                            ReduceOp op, std::unique_ptr<CollRequest>* req) = 0;

  // Tells the reducers this member leaves, stops helper threads. Idempotent.
  virtual void close() = 0;

  virtual int rank() const = 0;
  virtual int nranks() const = 0;
};

}  // namespace tally::reducer
