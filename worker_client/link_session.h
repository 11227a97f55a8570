// SPDX-License-Identifier: Apache-2.0
// The protocol steps of one reducer link on the worker, written once for both kinds of link
// (link.h): ThreadedLink (coll_link.cc, a sender and a receiver thread over any transport) and
// RawLink (coll_raw_link.cc, a TCP socket the client drives itself). They decode, check and keep
// the books (ledger.h); the caller does the I/O, and reports what fails with reportLinkFailure.
// Not a public interface.
//
// A result goes through three steps: acceptResult (its record, and the Commit it carries),
// checkResult (it answers the slice as sent) and resultDestination (where its payload lands);
// the link then reads the payload there, checkPayload checks it, and the link lands the record
// (SliceLedger::land). Every other message from the reducer goes to onLinkMessage.
//
// Locking, the same in both links: the link's mu_ guards its SliceLedger and the records in it,
// so acceptResult, checkResult, resultDestination, onLinkMessage and dueAck run with the link's
// mu_ held. checkPayloadFrame and checkPayload touch no books and need no lock. reportLinkFailure
// runs with no lock of the link held (LinkOwner::fail takes every link's mu_). A LastMessage is
// guarded by the lock its link posts it under. The only call into the owner under mu_ is
// LinkOwner::relayed, which queues under a leaf lock.
// A record found by acceptResult stays put until a Commit erases it (only once it has landed)
// or the books are taken, so the receiving thread may land it after letting go of mu_ when it
// is the only thread that takes Commits (ThreadedLink's receiver).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "common/status.h"
#include "protocol/wire.h"
#include "worker_client/call.h"
#include "worker_client/ledger.h"
#include "worker_client/link_owner.h"

namespace tally::worker_client {

// A Result header from `reducer`: decoded, the Commit it carries taken into the books, and its
// record found. Not ok (the reducer broke the protocol): it does not decode, its Commit is
// refused (SliceLedger::commit), or no slice is waiting for it ("unexpected result for ...": it
// was never sent here, or its result landed already). On success *h and *entry are set.
// The link's mu_ held.
Status acceptResult(SliceLedger* ledger, const std::string& reducer, const uint8_t* data,
                    size_t size, wire::SliceHeader* h, LedgerEntry** entry);

// Whether result `h` answers the slice of `entry` as it was sent: the same piece of the same
// call. `sent`: the whole slice has left this rank (a link that posts a slice's payload after
// its record, or writes it over time, says whether it did); a result before that breaks the
// protocol and would let the call complete while the payload is still read from the caller's
// buffer. The link's mu_ held.
Status checkResult(const wire::SliceHeader& h, const LedgerEntry& entry, bool sent);

// Where the payload of result `h` for `entry` lands: the caller's receive buffer at the slice's
// offset; `scratch` (grown to fit, the receiving thread's own) for a result that is read,
// checked and dropped (SliceTask::drop_result); null for an empty piece, which is its header
// alone (its offset may lie before the receive buffer's origin, so no pointer is formed). The
// link's mu_ held.
uint8_t* resultDestination(const wire::SliceHeader& h, const LedgerEntry& entry,
                           std::vector<uint8_t>* scratch);

// The frame that should carry the payload of `h` came with `tag` and `size`: not ok unless it is
// the payload and all of it.
Status checkPayloadFrame(const wire::SliceHeader& h, int tag, size_t size);

// With TALLY_CHECKSUM (`crc` not null), the CRC32C of a payload landed at `data` against the one
// its header carries. A mismatch fails the communicator (*fatal set): the bytes are in the
// receive buffer, but the call never completes. No lock needed.
Status checkPayload(const crc32c::Crc32c* crc, int rank, const wire::SliceHeader& h,
                    const void* data, bool* fatal);

// Any message but a Result, of `type` (wire::peekType checked it): a Commit is taken into the
// books, a Pong only decoded (hearing it is what counts), a Relay handed to owner->relayed for
// the keeper. Not ok ends the link: a message that does not decode, a Commit the books refuse, a
// type a reducer never sends ("unexpected ... message"), or an Error, whose reason is the status;
// an Error of communicator scope sets *fatal (one of reducer scope loses only this reducer). The
// link's mu_ held.
Status onLinkMessage(SliceLedger* ledger, LinkOwner* owner, uint32_t slot,
                     const std::string& reducer, wire::MsgType type, const uint8_t* data,
                     size_t size, bool* fatal);

// The Ack this rank owes the reducer now, if any (SliceLedger::nextAck over what the client
// published): `alone`, an Ack message of its own, goes only when a call waits for it; otherwise
// it rides on the slice being sent. Taken as sent. The link's mu_ held.
std::optional<wire::AckPoint> dueAck(SliceLedger* ledger, const Shared& shared, bool alone);

// Reports an error of the link with `reducer` in `slot` to its owner, unless the owner is closing
// anyway: with `fatal` the communicator failed (LinkOwner::fail), otherwise the reducer is lost
// (LinkOwner::linkLost). The status names the reducer and keeps kTimeout. No lock of the link
// held; a link that was closed on purpose does not call it.
void reportLinkFailure(LinkOwner* owner, uint32_t slot, const std::string& reducer,
                       const Status& st, bool fatal);

// A link's one last message to its reducer: an Error saying why this worker gives up on the
// communicator (Link::postAbort), so the reducer can pass the cause on to the other ranks, or a
// Dismiss saying why it drops this reducer (Link::retire). At most one is ever made; its bytes
// stay put for as long as the LastMessage lives (a transport may read them until its send is
// done or the connection closed). Guarded by the lock the link posts it under.
class LastMessage {
 public:
  enum class Kind { kAbort, kDismiss };
  // The frame to post now, or null when one was made already.
  const wire::Frame* make(Kind kind, const std::string& reason);
  bool made() const { return made_; }

 private:
  bool made_ = false;
  wire::Frame frame_;
};

}  // namespace tally::worker_client
