// SPDX-License-Identifier: Apache-2.0
#include "worker_client/coll_options.h"

#include <string>

#include "protocol/wire.h"

namespace tally::worker_client {
namespace wire = protocol::wire;
using protocol::kMaxSlicesPerReducer;

// The variables' limits (common/params.h), by which the plugin refuses a value at start-up, are
// the ones checked here at connect and carried by the wire.
static_assert(kMaxCollWindow == wire::kMaxWindow);
static_assert(kMaxReducerAddresses == wire::kMaxReducers);
static_assert(kMaxSliceBytesParam == static_cast<int64_t>(wire::kMaxSliceBytes));
static_assert(kMaxSlicesPerReducerParam == kMaxSlicesPerReducer);

Status validateOptions(const CollOptions& o) {
  if (o.reducers.empty()) return Status::invalidUsage("TALLY_REDUCERS is empty");
  if (o.reducers.size() > wire::kMaxReducers) {
    return Status::invalidUsage("TALLY_REDUCERS lists " + std::to_string(o.reducers.size()) +
                                " reducers, at most " + std::to_string(wire::kMaxReducers));
  }
  if (o.slice_bytes < 1 || o.slice_bytes > wire::kMaxSliceBytes) {
    return Status::invalidUsage("TALLY_SLICE_BYTES must be 1 to " +
                                std::to_string(wire::kMaxSliceBytes) + ", not " +
                                std::to_string(o.slice_bytes));
  }
  if (o.slices_per_reducer < 1 || o.slices_per_reducer > kMaxSlicesPerReducer) {
    return Status::invalidUsage("TALLY_SLICES_PER_REDUCER must be 1 to " +
                                std::to_string(kMaxSlicesPerReducer) + ", not " +
                                std::to_string(o.slices_per_reducer));
  }
  if (o.min_slice_bytes < 1 || o.min_slice_bytes > wire::kMaxSliceBytes) {
    return Status::invalidUsage("TALLY_MIN_SLICE_BYTES must be 1 to " +
                                std::to_string(wire::kMaxSliceBytes) + ", not " +
                                std::to_string(o.min_slice_bytes));
  }
  if (o.window < 1 || o.window > static_cast<int>(wire::kMaxWindow)) {
    return Status::invalidUsage("TALLY_COLL_WINDOW must be 1 to " +
                                std::to_string(wire::kMaxWindow) + ", not " +
                                std::to_string(o.window));
  }
  if (o.max_requests < 1) {
    return Status::invalidUsage("TALLY_COLL_MAX_REQUESTS must be at least 1, not " +
                                std::to_string(o.max_requests));
  }
  return Status::ok();
}

}  // namespace tally::worker_client
