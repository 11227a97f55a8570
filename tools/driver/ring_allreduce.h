// SPDX-License-Identifier: Apache-2.0
// A pipelined ring all-reduce over a plugin's point-to-point ncclNet table: the baseline the demo
// sets beside the reduction server.
//
// The buffer is cut into nranks segments. Reduce-scatter: for steps s = 0 .. n-2, rank r sends
// segment (r - s) to rank r+1 and receives segment (r - s - 1) from rank r-1, combining it into
// its own copy with tally::reduce. After it, rank r holds the full result of segment (r + 1).
// All-gather: for t = 0 .. n-2, rank r sends segment (r + 1 - t) and receives segment (r - t)
// straight into place. Each segment is cut into chunks of chunk_bytes; a chunk is sent as soon as
// its previous-step chunk has arrived, with up to max_inflight sends and receives in flight, so
// steps overlap. Sends and receives on one connection are posted in the same (step, chunk) order
// on both ends, which is how the net API matches them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/store.h"
#include "common/types.h"
#include "tools/driver/net_driver.h"

namespace tally::driver {

struct RingOptions {
  size_t chunk_bytes = 512 * 1024;
  int max_inflight = 8;  // per direction; at most NCCL_NET_MAX_REQUESTS
  NetOptions net;
};

class RingComm {
 public:
  // Creates the endpoint and connects rank -> rank+1 and rank-1 -> rank through the store.
  static Status create(NetApi* api, Store* store, const std::string& name, int rank, int nranks,
                       const RingOptions& options, std::unique_ptr<RingComm>* out);

  // In place: data holds this rank's input and receives the result. Every rank calls it with the
  // same count, type and op.
  Status allreduce(void* data, size_t count, DataType type, ReduceOp op);

  Status close() { return endpoint_ ? endpoint_->close() : Status::ok(); }
  NetEndpoint* endpoint() const { return endpoint_.get(); }

 private:
  RingComm(int rank, int nranks, const RingOptions& options)
      : rank_(rank), nranks_(nranks), options_(options) {}

  int rank_;
  int nranks_;
  RingOptions options_;
  std::unique_ptr<NetEndpoint> endpoint_;
  std::vector<char> scratch_;   // max_inflight receive slots of chunk_bytes
  void* scratch_mh_ = nullptr;  // registered with the receive comm
};

}  // namespace tally::driver
