// SPDX-License-Identifier: Apache-2.0
// One reducer slot as the CollClient drives it: the interface both kinds of link implement,
// ThreadedLink (coll_link.h: a sender and a receiver thread over a transport::Connection) and
// RawLink (coll_raw_link.h: a TCP socket driven by the posting thread and a progress thread or
// the callers' polls). Not a public interface.
//
// A link keeps its slices in a SliceLedger (ledger.h) from queueing to commit, acknowledges
// what lands (Ack), takes the reducer's Commits (which complete calls), answers nothing itself
// but hands relayed failover messages and its own loss to the client. Errors come in two kinds
// (docs/failover.md, "Detection"): the reducer is lost (the connection failed, the reducer broke
// the protocol or said its Error is of reducer scope), reported with LinkOwner::linkLost;
// or the communicator failed (an Error of communicator scope, a checksum mismatch, a call with
// no result for TALLY_TIMEOUT_MS), reported with LinkOwner::fail.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "protocol/wire.h"
#include "transport/raw_stream.h"
#include "worker_client/call.h"
#include "worker_client/ledger.h"

namespace tally::worker_client {

using Clock = std::chrono::steady_clock;

class Link {
 public:
  virtual ~Link() = default;

  // Starts the link's own threads, if it has any; kSystem when they cannot be created (the
  // client then closes).
  virtual Status start() = 0;
  // Sends the slice now or queues it behind earlier ones until a credit is free (called with the
  // client's post_mu_ held, so slices arrive in the order the client posts them). On a link
  // that has ended the slice waits in its books until the client takes them.
  virtual void post(SliceTask task) = 0;
  // Sends a control frame (Relay, Ping) as soon as the stream allows, ahead of slices that wait
  // for credits. Dropped when the link has ended. Any thread.
  virtual void sendControl(const wire::Frame& frame) = 0;
  // Sends the Ack its results owe, if any: after the client published more posted calls or an
  // applied epoch, since a result may have landed before (then its Ack fell short). Called
  // with the client's post_mu_ held.
  virtual void ackIfBehind() = 0;
  // Asks for Bye after what is queued.
  virtual void requestBye() = 0;
  // Waits up to timeout_ms for the Bye to have gone out (or the link to have ended).
  virtual bool waitSenderDone(int64_t timeout_ms) = 0;
  // Best effort: tells the reducer why this worker gives up on the communicator (an Error
  // message), so the reducer can pass the cause on to the other ranks. postAbort posts it;
  // finishAbort waits until the deadline (with yield_to_abort, only until an abort() is under
  // way, see LinkOwner::hurrying) for it to be out, else closes the connection. Called by
  // the client's fail() only, once.
  virtual void postAbort(const std::string& reason) = 0;
  virtual void finishAbort(Clock::time_point deadline, bool yield_to_abort) = 0;
  // Closes the connection: pending transfers fail, the link's I/O ends soon. Any thread.
  virtual void closeConnection() = 0;
  // Closes the connection, then waits until no thread of the link touches caller memory (joins
  // its threads). The owner's thread only.
  virtual void stopAndJoin() = 0;

  // Failover: ends the link for good (with `dismiss`, a best-effort Dismiss(reason) first) and
  // returns once no thread of the link touches caller memory; threads and sockets shared with
  // other links go on. Its books stay for takeOrphans. The keeper thread only.
  virtual void retire(const std::string& reason, bool dismiss) = 0;
  // After retire, once its books were taken: lets go of whatever the link shares with other
  // links (a progress thread's list of links), so that the last owner's drop frees its
  // descriptor and buffers. detached(): nothing it shared can reach it any more, so it may be
  // dropped. The keeper thread only.
  virtual void detach() {}
  virtual bool detached() const { return true; }
  // After retire: every slice in its books (ledger.h takeAll), and the last Commit it took.
  virtual std::vector<LedgerEntry> takeOrphans(wire::AckPoint* committed) = 0;
  // Its books' slices of in-place calls (ledger.h), for a drop that can wait for them. Any thread.
  virtual InPlaceOut inPlaceOut() const = 0;
  // The link has ended (retired, failed or closed).
  virtual bool ended() const = 0;
  // When the reducer was last heard (steady clock, ns): a message of any kind, or bytes of one
  // still coming in (a large result's body), where the transport can tell.
  virtual int64_t lastHeardNs() const = 0;
  // How long, in all, the link has had slices out whose results had not landed, up to now_ns
  // (steady clock): what SlowReducers (slow_reducers.h) compares between reducers. Any thread.
  virtual int64_t busyNs(int64_t now_ns) const = 0;

  virtual const std::string& address() const = 0;
  virtual uint32_t slot() const = 0;
  // What its zero-copy sends did; only RawLinks make any (TALLY_ZEROCOPY).
  virtual transport::ZerocopyCounts zerocopyCounts() const { return {}; }
};

}  // namespace tally::worker_client
