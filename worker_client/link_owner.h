// SPDX-License-Identifier: Apache-2.0
// What a link (link.h) may ask of the client that owns it: the small interface through which
// ThreadedLink and RawLink report a lost reducer or a failed communicator, pass relayed failover
// messages to the keeper, and read the client's settings and shared state. It keeps the links
// from depending on the whole client (coll_client_impl.h). Not a public interface.
#pragma once

#include <cstdint>
#include <memory>

#include "common/status.h"
#include "protocol/wire.h"
#include "worker_client/call.h"
#include "worker_client/coll_options.h"

namespace tally::worker_client {

class LinkOwner {
 public:
  virtual const CollOptions& options() const = 0;
  virtual int rank() const = 0;
  // The state the client, its links and its requests share.
  virtual const std::shared_ptr<Shared>& shared() const = 0;
  // close() or a failure is under way: a link's own error is no longer worth reporting.
  virtual bool closing() const = 0;
  // abort() is under way: a link waiting for its Error to go out stops waiting.
  virtual bool hurrying() const = 0;
  // Whether a reducer last heard at heard_ns has been silent so long that the keeper is about to
  // drop it; a link's own timeout for results (TALLY_TIMEOUT_MS: a stuck rank, fatal) then gives
  // way, since a silent reducer is lost, not a stuck rank.
  virtual bool silentTooLong(int64_t heard_ns, int64_t now_ns) const = 0;
  // The communicator failed (an Error of communicator scope, a checksum mismatch, a call with
  // no result for TALLY_TIMEOUT_MS): `st` becomes its sticky error. Any thread, no lock of the
  // link held.
  virtual void fail(const Status& st) = 0;
  // The link lost its reducer: the keeper drops it. Any thread, no lock of the link held.
  virtual void linkLost(uint32_t slot, const Status& why) = 0;
  // A relayed failover message came through the link, for the keeper. Any thread; it only
  // queues the message (under a leaf lock), so a link calls it with its own mu_ held
  // (link_session.h, onLinkMessage).
  virtual void relayed(uint32_t slot, const protocol::wire::Relay& relay) = 0;

 protected:
  ~LinkOwner() = default;
};

}  // namespace tally::worker_client
