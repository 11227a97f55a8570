// SPDX-License-Identifier: Apache-2.0
// The CollClient's links over raw TCP sockets (TALLY_COLL_PROGRESS=thread or poll): no thread
// hand-off per slice. Not a public interface.
//
// Each RawLink owns a socket taken from a one-socket TCP connection (Connection::takeSocket) and
// speaks the TCP backend's framing on it (transport/raw_stream.h), so the reducer sees the same
// bytes as from a ThreadedLink. One Progress thread per client runs epoll over every link's
// socket:
//   - sends: the posting thread (iallreduce) queues a slice's header and payload (borrowed from
//     the user's send buffer) in the link's FrameQueue and writes at once what the socket takes;
//     what it does not take the progress thread writes on EPOLLOUT, which a link arms only while
//     its socket is full. A result frees a credit, and the progress thread then sends the next
//     queued slice itself.
//   - receives: the progress thread drains every readable socket: a result header, then its
//     payload read straight into the user's recv buffer at the slice's offset; a call completes
//     when its last slice lands. The protocol steps (what a result must match, where it lands,
//     Commits, Pongs, Relays and Errors) are link_session.h's.
//   - zero-copy (TALLY_ZEROCOPY): the kernel's completions come as EPOLLERR and release the
//     written messages; a committed slice completes only once released (ledger.h).
//   - every kPollMs it checks each link for timeout_ms without a result while slices are
//     outstanding, or without a release while committed slices wait for one.
// With TALLY_COLL_PROGRESS=poll there is no progress thread: the same rounds (epoll_wait with no
// wait, then the same handlers) run on the thread that tests a request (NCCL's proxy thread,
// which calls test() in a loop) or posts into a full client, one thread at a time. What the
// progress thread's wake-ups cost is then gone, and a result is read when the caller asks.
//
// Every step that reads or writes caller memory (CRC, sendmsg from the send buffer, recv into
// the recv buffer) runs under the link's mu_ and only while the link is open. closeConnection
// takes mu_ and marks the link closed (with zero-copy sends outstanding it first resets the
// connection and waits briefly for their completions), so once it returns nobody touches
// caller memory through this link; stopAndJoin also joins the progress thread (unless the link
// is detached: the other links still share it).
//
// Lock order: CollClientImpl::post_mu_ -> RawLink::mu_. Nobody holds a link's mu_ when calling
// LinkOwner::fail (which takes every link's mu_).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/fd.h"
#include "transport/raw_stream.h"
#include "worker_client/link_owner.h"
#include "worker_client/busy_clock.h"
#include "worker_client/link.h"
#include "worker_client/link_session.h"

namespace tally::worker_client {
namespace wire = protocol::wire;

class RawLink;

// The epoll loop of one client, run by its own thread (threaded) or by callers through poll().
// Links are added before start(); watch() and unwatch() may be called from any thread.
class Progress final : public Poller {
 public:
  // Makes the epoll set and the wake-up eventfd.
  static Status create(bool threaded, std::shared_ptr<Progress>* out);
  ~Progress() override;

  // Adds a link's socket, watched for input (before start(), or later from any thread for a
  // link that joins).
  Status add(RawLink* link, int fd);
  // Starts the thread (threaded; kSystem when it cannot be created) or lets poll() run.
  Status start();
  // One round without waiting (not threaded; a no-op while another caller polls, before start()
  // and after stop()).
  void poll() override;
  // Whether the link's socket is also watched for room to write.
  void watch(RawLink* link, int fd, bool output);
  // Stops watching the socket (before it is shut down).
  void unwatch(int fd);
  // Takes a link whose socket is no longer watched out of the timeout checks. Returns a ticket
  // for pastRound: once that is true no round can still reach the link, which may then go.
  uint64_t forget(RawLink* link);
  bool pastRound(uint64_t ticket) const {
    return stop_.load(std::memory_order_acquire) ||
           rounds_finished_.load(std::memory_order_acquire) >= ticket;
  }
  // Ends and joins the thread, or waits for a poll() under way; no link is touched after it.
  // Idempotent; never from the progress thread or from inside poll().
  void stop();

 private:
  explicit Progress(bool threaded) : threaded_(threaded) {}
  void loop();
  // Waits up to wait_ms for events, handles them, and checks timeouts when due. False: epoll
  // failed.
  bool round(int wait_ms);

  const bool threaded_;
  Fd epoll_;
  Fd wake_;  // eventfd: stop() wakes the thread through it
  std::mutex links_mu_;  // add() after start() races the loop's timeout checks
  std::vector<RawLink*> links_;
  std::vector<RawLink*> checked_;  // the round's copy of links_ (the progress thread's)
  std::atomic<bool> started_{false};
  std::atomic<bool> stop_{false};
  std::mutex stop_mu_;
  std::thread thread_;
  std::mutex poll_mu_;          // held by the caller in poll()
  int64_t next_check_ns_ = 0;  // the progress thread's, or poll_mu_'s holder's
  // Rounds begun and ended. Rounds run one at a time, so when rounds_finished_ reaches the count
  // begun at some moment, every round that began before that moment has ended.
  std::atomic<uint64_t> rounds_begun_{0};
  std::atomic<uint64_t> rounds_finished_{0};
};

class RawLink final : public Link {
 public:
  // `fd`: the socket, after the opening (recvFrame read exactly up to Ready). `crc` as
  // ThreadedLink's.
  RawLink(LinkOwner* client, uint32_t slot, std::string address, Fd fd, Progress* progress,
          int window, int64_t timeout_ms, const crc32c::Crc32c* crc);
  ~RawLink() override;

  int fd() const { return fd_.get(); }

  Status start() override;
  void post(SliceTask task) override;
  void sendControl(const wire::Frame& frame) override;
  void ackIfBehind() override;
  void requestBye() override;
  bool waitSenderDone(int64_t timeout_ms) override;
  void postAbort(const std::string& reason) override;
  void finishAbort(Clock::time_point deadline, bool yield_to_abort) override;
  void closeConnection() override;
  void stopAndJoin() override;
  void retire(const std::string& reason, bool dismiss) override;
  void detach() override;
  bool detached() const override;
  std::vector<LedgerEntry> takeOrphans(wire::AckPoint* committed) override;
  InPlaceOut inPlaceOut() const override;
  bool ended() const override;
  int64_t lastHeardNs() const override;
  int64_t busyNs(int64_t now_ns) const override { return busy_.total(now_ns); }
  const std::string& address() const override { return address_; }
  uint32_t slot() const override { return slot_; }

  // The progress thread: the socket is readable (or hung up), writable, and/or has an error or
  // zero-copy completions queued (EPOLLERR). Reports an error to the client itself.
  void onEvents(bool readable, bool writable, bool error);
  // What its zero-copy sends did (TALLY_ZEROCOPY).
  transport::ZerocopyCounts zerocopyCounts() const override;
  // The progress thread: fails the client when no result came for timeout_ms while slices are
  // outstanding, or no release while committed slices wait for their zero-copy completions.
  void checkTimeout(int64_t now_ns);

 private:
  enum class Phase { kResultHeader, kPayload };

  // Queues the slice's header and payload (mu_ held, a credit free).
  void pushSliceLocked(SliceTask task, bool from_queue);
  // Queues a control frame (mu_ held); its bytes live in control_ until written.
  void pushControlLocked(const wire::Frame& frame);
  // Writes what the socket takes; arms or disarms EPOLLOUT (mu_ held).
  Status flushLocked();
  // The queue let go of n more messages (mu_ held): their bytes may change now, so control
  // frames and header slots go, and the ledger lets committed slices complete.
  void releasedLocked(size_t n);
  // Reads the zero-copy completions queued on the socket and releases what they free (mu_
  // held); *any: there was at least one.
  Status reapLocked(bool* any = nullptr);
  // Messages wholly written (mu_ held): released, or waiting for zero-copy completions.
  uint64_t writtenLocked() const { return messages_released_ + out_.writtenUnreleased(); }
  // Writes what the socket takes and reads zero-copy completions (mu_ held): *drained once
  // every message is released; *wait_for: the poll events to wait for before trying again.
  Status drainLocked(bool* drained, short* wait_for);
  // Closing with zero-copy sends outstanding (mu_ held): resets the connection, which drops
  // what the socket still holds of the caller's pages, waits a bounded time for the
  // completions of what a device already took, and lets every message and held slice go.
  void letGoOfPagesLocked();
  // Reads until the socket has nothing more (events handled one at a time under mu_).
  Status readAll();
  Status onHeaderLocked();
  Status onMessageLocked(const uint8_t* header, size_t size);
  Status onResultLocked(const uint8_t* header, size_t size);
  Status onPayloadLocked();
  // The result of current_ has landed: frees its credit and queues waiting slices on it.
  void landedLocked();
  // Sends queued slices while credits allow: prompt ones first (one past the window).
  void pushQueuedLocked();
  // Queues an Ack when it covers newly landed slices (mu_ held); true when it did.
  bool ackLocked();
  // Reports an error of this link to the client (unless it is closing anyway): lost reducer,
  // or with fatal_ set, the communicator's failure. No lock held.
  void reportFailure(const Status& st);
  // Queues the link's last message (unless one was, or the link is closed) after the message
  // in progress, dropping the slices not begun (they stay in the books), and writes it (mu_
  // held).
  void postLastLocked(LastMessage::Kind kind, const std::string& reason);

  LinkOwner* client_;
  const uint32_t slot_;
  const std::string address_;
  Fd fd_;
  Progress* progress_;
  // detach() ran: the progress no longer lists the link; it may go once past this round.
  std::atomic<bool> detached_{false};
  uint64_t detach_ticket_ = 0;
  const int window_;
  const int64_t timeout_ms_;
  const crc32c::Crc32c* const crc_;
  // Also moved by bytes waiting in the socket: a large body is read only once whole
  // (SO_RCVLOWAT), so its bytes still coming in count as hearing from the reducer.
  mutable std::atomic<int64_t> last_heard_ns_{0};
  mutable int pending_seen_ = 0;  // the socket's unread bytes when lastHeardNs looked (mu_)

  mutable std::mutex mu_;
  bool closed_ = false;
  bool landed_ = false;  // a result landed since the last Ack was considered
  bool fatal_ = false;  // the error being reported fails the communicator, not just this link
  bool out_armed_ = false;  // EPOLLOUT is watched
  SliceLedger ledger_;
  int outstanding_ = 0;  // slices sent whose results have not landed (credits in use)
  BusyClock busy_;       // the time outstanding_ was above 0
  std::atomic<int64_t> last_progress_ns_{0};
  transport::FrameQueue out_;
  uint64_t messages_pushed_ = 0;
  uint64_t messages_released_ = 0;
  // Slice header bytes live here until released: one slot per credit, more while zero-copy
  // completions lag (a deque, so the bytes stay put as it grows). A slot in use is listed with
  // the count of messages pushed once its header was.
  std::deque<wire::Frame> frames_;
  std::vector<uint32_t> free_frames_;
  std::deque<std::pair<uint64_t, uint32_t>, PoolAllocator<std::pair<uint64_t, uint32_t>>>
      used_frames_;
  // Control frames (Ack, Ping, Relay, Dismiss) until released, with the count of messages
  // pushed once each was.
  std::deque<std::pair<uint64_t, wire::Frame>, PoolAllocator<std::pair<uint64_t, wire::Frame>>>
      control_;
  wire::Frame bye_frame_;
  LastMessage last_;  // an Error (postAbort) or a Dismiss (retire)

  // The progress thread's receive state (mu_ held while it changes).
  transport::FrameReader reader_;
  Phase phase_ = Phase::kResultHeader;
  std::array<uint8_t, wire::kMaxHeaderBytes> header_{};
  wire::SliceHeader result_{};  // the result whose payload is being read
  LedgerEntry* current_ = nullptr;
  uint8_t* dst_ = nullptr;
  std::vector<uint8_t> scratch_;  // where a dropped result goes (SliceTask::drop_result)
};

}  // namespace tally::worker_client
