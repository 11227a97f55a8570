// SPDX-License-Identifier: Apache-2.0
// The protocol steps of one worker connection on the reducer, shared by the two ways a
// connection is served: a Peer (peer.cc, threads over any transport) and a LoopPeer
// (loop_peer.cc, a TCP socket in an event loop). They decide, check, log and count; the caller
// does the I/O. Not a public interface.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "protocol/wire.h"
#include "reducer/server_internal.h"

namespace tally::reducer::server {
namespace wire = protocol::wire;

// A Hello: decoded, checked and joined to its communicator. Ok with *comm set: a member as
// *rank. Ok with *comm null: refused (logged and counted), send *reject and linger.
Status acceptHello(ServerContext* ctx, const std::shared_ptr<Member>& self, const uint8_t* data,
                   size_t size, std::shared_ptr<Communicator>* comm, int* rank,
                   wire::Frame* reject);

// A slice header from `rank`, decoded and checked against its communicator; a header that does
// not decode or does not fit fails the communicator (every member, this one too, gets an Error
// with the reason). *bytes: the payload that follows (0: none follows).
Status acceptSliceHeader(Communicator& comm, int rank, const uint8_t* data, size_t size,
                         wire::SliceHeader* h, size_t* bytes);

// With TALLY_CHECKSUM, checks a received payload before it can reach a sum. False: drop the
// input (a mismatch fails the communicator; it was counted, and *counted is set).
bool payloadIntact(ServerContext* ctx, Communicator& comm, int rank, const std::string& name,
                   const wire::SliceHeader& h, const uint8_t* data, size_t bytes, bool* counted);

// During the opening the worker sent a Reject (it refused this reducer) or an Answer this
// reducer did not ask for: logged and counted. For the Answer, *reject is the Reject to send
// (then linger); for a Reject it stays empty.
void refusedInOpening(ServerContext* ctx, const std::string& name, wire::MsgType type,
                      const uint8_t* data, size_t size, wire::Frame* reject);

// Whether a connection that has not joined should end now (checked every ~100 ms): it was
// evicted from the opening budget by newer connections (`slot`, opening_budget.h; counted as
// `limit`); with a job token, it has not answered the Challenge within auth_timeout_ms
// (`answering`); or it has not joined within join_timeout_ms. A connection holds a slot (and,
// served by threads, threads): scanners, slow-loris peers and lost workers must let go. Not ok:
// end it (counted already); ok: keep it.
Status openingDeadline(ServerContext* ctx, const std::string& name,
                       std::chrono::steady_clock::time_point opened, bool answering,
                       const OpeningBudget::Slot* slot, std::chrono::steady_clock::time_point now);

// Whether a member's connection should end now (checked every ~100 ms): its communicator did
// not form within the join timeout of its first Hello (kTimeout, counted; the communicator then
// fails and frees what it reserved once its members are gone), or it failed already and its
// Error is queued (ok with *failed set: the failure was reported where it happened). Ok with
// *failed unset: keep it.
Status memberDeadline(ServerContext* ctx, Communicator& comm,
                      std::chrono::steady_clock::time_point now, bool* failed);

// How a connection ended, and what the reducer makes of it.
// Counted as: internal; peer_lost for a worker's Error; timeout or protocol for a transport
// failure of that kind (transport::failureKind) or a kTimeout status; else peer_lost when a
// receive failed, protocol otherwise; a Dismiss not at all.
// The Error the other members get has reducer scope when the member was lost (a receive failed,
// not for a protocol violation of the transport, and the worker said nothing) or dismissed this
// reducer: the others may go on without this reducer. Otherwise it fails the communicator.
struct Ending {
  Status status;                // ok: Bye or refused (graceful), else why it ended
  bool graceful = false;        // Bye, or an opening refusal already counted
  bool internal = false;        // an exception inside the reducer
  bool recv_failed = false;     // a receive failed: the peer is lost
  bool worker_aborted = false;  // the worker sent an Error with its reason
  bool dismissed = false;       // the worker dismissed this reducer (status: its reason)
  bool counted = false;         // the error was counted already (auth, checksum, timeout)
};

// An opening connection ends (reset, closed, a bad message) after it was evicted but before
// its tick saw that: the eviction is why it went, so it is counted as `limit` and described as
// one. Leaves an ending that was counted already, or a graceful one, alone.
void endOfEvicted(ServerContext* ctx, const std::string& name,
                  std::chrono::steady_clock::time_point opened, const OpeningBudget::Slot* slot,
                  Ending* e);

// Whether `type` is one of a member's failover messages: Ack, Ping, Relay, Dismiss.
bool isMemberMessage(wire::MsgType type);

// A failover message (isMemberMessage) from `rank` of `comm`, on `self`, a connection that joined
// (failover.cc). An Ack raises the rank's books and may send every member a Commit; a Ping is
// answered with its Pong on `self` at once; a Relay is stamped with `rank` and forwarded, rank 0's
// to every other member, the others' to rank 0. True: go on reading. False: end the connection
// with *ending: a message that does not decode, an Ack or a Relay before the communicator formed
// or a Relay past the rank's allowance (these fail the communicator with the reason), or a
// Dismiss (ending->dismissed, with the worker's reason).
bool onMemberMessage(Member& self, Communicator& comm, int rank, wire::MsgType type,
                     const uint8_t* data, size_t size, Ending* ending);

// What becomes of a message a connection is about to queue for writing (its send(), under its
// queue lock). `unsent`: the control messages (all but results) it has queued and not written
// yet; `pong_unsent`: a Pong is among them.
enum class Queueing {
  kQueue,     // queue it
  kAnswered,  // a Pong while another is unsent: drop it, that Pong answers its Ping too
  kOverflow,  // a control message past unsentControlLimit: drop it, end with controlOverflow()
};
Queueing admitToQueue(const ServerContext& ctx, const OutMsg& msg, size_t unsent, bool pong_unsent);

// A connection that was sent more control messages than it may leave unread (kOverflow): counted
// as `limit`; the status says why it ends (counted: the end logs it and fails its communicator).
// Any thread.
Status controlOverflow(ServerContext* ctx, const std::string& name, size_t unsent);

// Counts and logs the end, and tells the communicator (a member lost fails it). `stopping`:
// the server is stopping, nothing is reported.
void reportEnd(ServerContext* ctx, const std::shared_ptr<Communicator>& comm, int rank,
               const std::string& name, const Ending& ending, bool stopping);

}  // namespace tally::reducer::server
