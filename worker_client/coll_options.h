// SPDX-License-Identifier: Apache-2.0
// What a CollNet client is configured with (CollOptions): the reducers, the slice plan, the
// timeouts, authentication, checksums, how its links are driven, and failover. The plugin fills
// it from the environment (plugin/state.cc); each default comes from the registry of
// TALLY_* variables (common/params.h). validateOptions says what connect() refuses.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/params.h"
#include "common/status.h"
#include "common/timeouts.h"
#include "protocol/slicing.h"
#include "transport/network.h"
#include "transport/raw_stream.h"

namespace tally::worker_client {
using protocol::kSlicesPerReducer;
using protocol::kMinSliceBytes;

// How a client drives its reducer links (TALLY_COLL_PROGRESS).
enum class CollProgress {
  kThread,  // TCP: raw sockets, the posting thread and one epoll progress thread per client
  kPoll,    // TCP: raw sockets driven by the posting thread and the threads that test requests
  kLegacy,  // a sender and a receiver thread per reducer, over the transport's threads
};

struct CollOptions {
  std::vector<std::string> reducers;   // "host:port", the same list on every rank
  uint64_t slice_bytes = protocol::kDefaultSliceBytes;  // TALLY_SLICE_BYTES
  // The rest of the slice plan (protocol/slicing.h; the plugin picks it from the link speed unless
  // TALLY_SLICES_PER_REDUCER / TALLY_MIN_SLICE_BYTES say).
  uint32_t slices_per_reducer = kSlicesPerReducer;
  uint64_t min_slice_bytes = kMinSliceBytes;
  int window = paramDefaultNumber("TALLY_COLL_WINDOW");  // slices in flight per reducer
  int max_requests = paramDefaultNumber("TALLY_COLL_MAX_REQUESTS");
  // connect_ms: connecting to every reducer and every rank joining; io_ms: a reducer that
  // returns no result for this long while slices are outstanding fails the client.
  Timeouts timeouts;
  // The job secret (TALLY_JOB_TOKEN) or a file holding it (TALLY_JOB_TOKEN_FILE), at most one
  // of the two; read at connect. Set: every reducer must prove the token (and this rank proves
  // it to them) before any slice is sent. Both empty: no authentication (docs/security.md).
  std::string job_token;
  std::string job_token_file;
  // TALLY_CHECKSUM: a CRC32C on every slice and result payload (ISA-L, libisal2). Every rank
  // must agree (it is part of the handle's digest) and the reducers check it too.
  bool checksum = false;
  // kThread and kPoll apply to TCP only; other transports always use kLegacy's threaded links.
  CollProgress progress = CollProgress::kThread;
  // TALLY_ZEROCOPY, TALLY_ZEROCOPY_MIN_BYTES: slices written with MSG_ZEROCOPY (kThread and kPoll
  // only); a call is then done once the kernel let go of its input too (docs/datapath.md).
  transport::ZerocopyMode zerocopy = transport::ZerocopyMode::kOff;
  uint64_t zerocopy_min_bytes = transport::kZerocopyMinBytes;
  // Reducer failover (docs/failover.md). TALLY_REDUCER_TIMEOUT_MS: a reducer that sends nothing
  // (not even a Pong) for this long while slices or a Ping are outstanding is dropped.
  // TALLY_MIN_REDUCERS: fewer live reducers fail the communicator. TALLY_SPARE_REDUCERS: reducers
  // that may fill a lost slot, besides the slot's own address. TALLY_REJOIN_INTERVAL_MS: how
  // often rank 0 looks for a reducer for an empty slot (0: never).
  int64_t reducer_timeout_ms = paramDefaultNumber("TALLY_REDUCER_TIMEOUT_MS");
  int min_reducers = paramDefaultNumber("TALLY_MIN_REDUCERS");
  // TALLY_SLOW_REDUCER_FACTOR: a reducer this many times slower than its peers is dropped
  // (slow_reducers.h); 0: never.
  int slow_reducer_factor = paramDefaultNumber("TALLY_SLOW_REDUCER_FACTOR");
  std::vector<std::string> spare_reducers;
  int64_t rejoin_interval_ms = paramDefaultNumber("TALLY_REJOIN_INTERVAL_MS");
  // The transport the reducers are reached over (the plugin's, from TALLY_TRANSPORT). Null: the
  // network layer's default (transport::openDefaultNetwork).
  std::shared_ptr<transport::Network> network;
};

// kInvalidUsage naming the variable when a value is out of its range; OK otherwise.
Status validateOptions(const CollOptions& o);

}  // namespace tally::worker_client
