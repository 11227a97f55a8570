// SPDX-License-Identifier: Apache-2.0
// Forming a communicator with its reducers (CollClient::connect): every reducer is joined at
// once, each on a thread of its own (joinReducer: connect, opening, Hello, Ready), so one that
// is down or frozen holds up none of the others. Not a public interface.
//
// A reducer that cannot be joined does not fail the communicator while enough others can
// (docs/failover.md, "A reducer lost while a communicator forms"): connect then reports it lost
// and the ranks agree to drop it like any lost reducer.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/fd.h"
#include "common/status.h"
#include "transport/transport.h"
#include "worker_client/coll_connect.h"

namespace tally::worker_client {

// What joining one reducer came to.
struct FormedLink {
  Status status;  // ok: it said Ready, and conn or fd holds the connection; else why not
  std::unique_ptr<transport::Connection> conn;
  Fd fd;
  int window = 0;
};

// Joins the reducer of each request at once and returns when every join has ended, in
// (*out)[i] for requests[i]. A Reject (kInvalidUsage: a configuration every reducer would
// refuse alike) gives up the joins still under way at once. With grace_ms > 0, the joins still
// under way grace_ms after the first reducer said Ready are given up: that Ready shows every
// rank had reached that reducer, so one that has not answered by then is down, frozen or cut
// off from some rank. Each request's deadline bounds its own join. Requests' cancel fields are
// set here. Not ok only when a thread could not be started (nothing is left open then).
Status formWithReducers(std::vector<JoinRequest> requests, int64_t grace_ms,
                        std::vector<FormedLink>* out);

}  // namespace tally::worker_client
