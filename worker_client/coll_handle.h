// SPDX-License-Identifier: Apache-2.0
// The CollNet connect handle (kCollHandleBytes, coll_client.h) each rank makes and NCCL passes
// to every other rank: rank 0's communicator id and relay key win, and every rank's digest of
// what all must agree on (the reducer list, the slice plan, the checksum setting) is checked
// against rank 0's. The reducers never see it.
#pragma once

#include <cstdint>
#include <vector>

#include "common/auth.h"
#include "common/status.h"
#include "protocol/wire.h"
#include "worker_client/coll_options.h"
#include "worker_client/relay_seal.h"

namespace tally::worker_client {

// A handle, decoded.
struct HandleInfo {
  protocol::wire::CommId comm;
  uint64_t digest = 0;
  uint32_t nreducers = 0;
  bool sealed = false;  // the ranks seal their relays under `key` (they have a job token)
  RelaySeal::Key key{};
};

// Writes a fresh handle for `options` into out (kCollHandleBytes): a random communicator id
// and, with a job token, a random relay key.
Status encodeHandle(const CollOptions& options, void* out);
// kInvalidUsage for a handle of another version of Tally; kInternal for a null one.
Status decodeHandle(const void* handle, int rank, HandleInfo* out);
// kInvalidUsage naming the first rank whose handle disagrees with rank 0's, or this rank's
// options that disagree with both.
Status checkHandles(const std::vector<HandleInfo>& infos, const CollOptions& options, int rank);
// The seal this rank puts on its relays and checks on the others' (relay_seal.h): rank 0's key
// when the job has a token. Rank 0 and this rank must agree on having one.
Status relaySealFor(const HandleInfo& rank0, const auth::JobToken& token, int rank,
                    RelaySeal* out);

}  // namespace tally::worker_client
