// SPDX-License-Identifier: Apache-2.0
// The CollClient's link over a transport::Connection (any transport; TCP with
// TALLY_COLL_PROGRESS=legacy): a sender thread and a receiver thread. Not a public interface.
//
// A slice is posted by the iallreduce caller itself when the link has nothing queued, a free
// credit and no send under way (tryPostNow); otherwise the sender thread posts it. Either way only
// the holder of send_mu_ posts, so a link sends its slices in queue order, and a control frame
// (Ack, Ping, Relay) goes out between two slices, never between a slice's header and its
// payload. Only the sender thread waits for the transport: when another thread (the posting
// thread, under the client's post_mu_, or the keeper sending a Ping or a Relay) finds no room for
// a send, it leaves the rest of that message to the sender and returns. The receiver reads a
// result header, then the payload straight into the caller's receive buffer; the protocol steps
// (what a result must match, where it lands, Commits, Pongs, Relays and Errors) are
// link_session.h's.
//
// Lock order: CollClientImpl::post_mu_ -> send_mu_ -> mu_; abort_mu_ is a leaf.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/small_pool.h"
#include "transport/transport.h"
#include "worker_client/link_owner.h"
#include "worker_client/busy_clock.h"
#include "worker_client/link.h"
#include "worker_client/link_session.h"

namespace tally::worker_client {

class ThreadedLink final : public Link {
 public:
  // `crc` (TALLY_CHECKSUM; null when off) checksums each slice sent and checks each result.
  ThreadedLink(LinkOwner* client, uint32_t slot, std::string address,
               std::unique_ptr<transport::Connection> conn, int window, int64_t timeout_ms,
               const crc32c::Crc32c* crc);
  ~ThreadedLink() override;

  Status start() override;
  void post(SliceTask task) override;
  void sendControl(const wire::Frame& frame) override;
  void ackIfBehind() override;
  // Asks the sender to send Bye after what is queued, then end.
  void requestBye() override;
  bool waitSenderDone(int64_t timeout_ms) override;
  void postAbort(const std::string& reason) override;
  void finishAbort(Clock::time_point deadline, bool yield_to_abort) override;
  void closeConnection() override;
  // Stops and joins both threads (closes the connection first).
  void stopAndJoin() override;
  void retire(const std::string& reason, bool dismiss) override;
  std::vector<LedgerEntry> takeOrphans(wire::AckPoint* committed) override;
  InPlaceOut inPlaceOut() const override;
  bool ended() const override { return stop_.load(std::memory_order_acquire); }
  int64_t lastHeardNs() const override;
  int64_t busyNs(int64_t now_ns) const override { return busy_.total(now_ns); }
  const std::string& address() const override { return address_; }
  uint32_t slot() const override { return slot_; }

 private:
  // A message being sent: its header, and a slice's payload (borrowed from the caller's send
  // buffer, or null). The header bytes must live until the transport is done with them.
  struct Sent {
    wire::Frame header;
    const void* payload = nullptr;
    size_t bytes = 0;
    bool header_posted = false;
    bool payload_posted = false;
    // Posted and not yet seen done.
    std::unique_ptr<transport::Request> header_req;
    std::unique_ptr<transport::Request> payload_req;
    bool posted() const { return header_posted && (bytes == 0 || payload_posted); }
  };

  // Posts the slice from this thread when nothing is queued or being sent and a credit is free
  // (called with the client's post_mu_ held); false: queue it instead. Never waits for the
  // transport: a slice it has no room for is left to the sender thread. A failed send is
  // reported, as on the sender thread.
  bool tryPostNow(SliceTask& task);
  // A queued slice may go out now: a prompt one within one credit past the window, another
  // within the window (mu_ held).
  bool sendableLocked() const;
  void senderLoop();
  void receiverLoop();
  // Waits for `req` in short steps; gives up when stopping or when no result has arrived for
  // timeout_ms while slices are outstanding (that one fails the communicator: *fatal).
  Status waitBounded(transport::Request* req, size_t* size, bool* fatal);
  // Sends a slice that was just recorded as `entry` (send_mu_ held), with the Ack it carries
  // ({0, 0}: none). `may_wait`: the sender thread, which waits for room in the transport;
  // another thread leaves what has no room to the sender (parkLocked).
  Status sendSlice(const SliceTask& task, const wire::AckPoint& ack, const LedgerEntry* entry,
                   bool may_wait);
  // The Ack due now, to go along with the slice being sent ({0, 0}: none; mu_ held).
  wire::AckPoint dueAckLocked();
  // Sends the control frames waiting in control_ (send_mu_ held); `may_wait` as sendSlice's.
  Status sendControlLocked(bool may_wait);
  // A Sent from the spares, or a new one.
  std::unique_ptr<Sent> takeSpare();
  // Appends `sent` to sends_ and posts it (send_mu_ held); what has no room without waiting is
  // parked (unless may_wait).
  Status pushSent(std::unique_ptr<Sent> sent, const LedgerEntry* entry, bool may_wait);
  // Posts what of `s` is not posted yet, header first (send_mu_ held); *done once all of it is.
  // With may_wait it waits for the oldest send when the transport has no room, else it returns
  // with *done false.
  Status postSent(Sent& s, bool may_wait, bool* done);
  // Posts the rest of a parked message (send_mu_ held); *clear: none is parked any more, so
  // others may follow. Without may_wait it may stay parked.
  Status finishParked(bool may_wait, bool* clear);
  // The last message in sends_ could not be posted whole without waiting: the sender thread
  // posts the rest before anything else (send_mu_ held). `entry`: the slice's record, if a slice.
  void parkLocked(const LedgerEntry* entry);
  // Reports an error of this link to the client (unless it is closing anyway): the reducer is
  // lost, or with `fatal` the communicator failed.
  void reportFailure(const Status& st, bool fatal);
  // Drops completed sends from the front of sends_; with `block`, waits for the oldest first.
  Status reapSends(bool block);
  // Whether any send of sends_ is posted and not yet seen done (send_mu_ held).
  bool sendsInFlight() const;
  Status receiveResult(const uint8_t* header, size_t size, bool* fatal);
  // Queues an Ack when it covers newly landed slices (mu_ held); true when it did.
  bool ackLocked();

  LinkOwner* client_;
  const uint32_t slot_;
  const std::string address_;
  std::unique_ptr<transport::Connection> conn_;
  const int window_;
  const int64_t timeout_ms_;
  const crc32c::Crc32c* const crc_;
  std::thread sender_;
  std::thread receiver_;
  mutable std::atomic<int64_t> last_heard_ns_{0};
  // The connection's bytes received when lastHeardNs last looked: a result's body still coming
  // in counts as hearing from the reducer.
  mutable std::atomic<uint64_t> bytes_seen_{0};

  std::mutex send_mu_;  // held while posting sends and reaping sends_
  mutable std::mutex mu_;  // the books and the members below it, up to stop_ (link_session.h)
  std::condition_variable cv_;
  SliceLedger ledger_;  // queued, sent, landed: until committed (ledger.h)
  int outstanding_ = 0;  // slices sent whose results have not landed (credits in use)
  BusyClock busy_;       // the time outstanding_ was above 0
  std::deque<wire::Frame, PoolAllocator<wire::Frame>> control_;  // control frames for the sender
  bool bye_ = false;
  bool sender_done_ = false;
  // A message is parked (mu_, for the sender's wait), and the record of its slice, whose result
  // cannot have come yet (null: a control frame, or none parked).
  bool parked_ = false;
  const LedgerEntry* parked_entry_ = nullptr;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> last_progress_ns_{0};

  // Guarded by send_mu_; dropped only after the connection is closed (transport rule). Posted in
  // order; with parked_sends_, the last one is not posted whole yet and nothing may follow it
  // until the sender thread has posted the rest.
  std::deque<std::unique_ptr<Sent>, PoolAllocator<std::unique_ptr<Sent>>> sends_;
  bool parked_sends_ = false;
  std::vector<std::unique_ptr<Sent>> spare_sends_;  // finished, kept for reuse
  // The receiver thread's header receive; a pending one is kept until the connection is closed.
  std::array<uint8_t, wire::kMaxHeaderBytes> recv_header_;
  std::unique_ptr<transport::Request> recv_req_;
  std::vector<uint8_t> scratch_;  // the receiver's: where a dropped result goes
  // The one last message (an Error from postAbort, or a Dismiss from retire) and its send, kept
  // like sends_ until the connection is closed: posted once, by whichever of the failing thread
  // and the keeper comes first, and waited on and dropped by others, so all of it is under
  // abort_mu_ (a leaf).
  std::mutex abort_mu_;
  LastMessage last_;
  std::unique_ptr<transport::Request> abort_req_;
  // Posts the last message, unless one was posted or the link stopped (abort_mu_ held); true
  // when it posted.
  bool postLastLocked(LastMessage::Kind kind, const std::string& reason);
};

}  // namespace tally::worker_client
