// SPDX-License-Identifier: Apache-2.0
// The reducer's event loops: a fixed set of threads, each an epoll loop over the TCP sockets of
// many worker connections (LoopPeer), so the thread count does not grow with connections.
//
// Run to completion: the loop thread that reads a slice input files it with the engine and, when
// it was the slice's last input, reduces the slice and writes the result to every rank's socket
// itself (LoopPeer::send writes at once when nothing is queued ahead). A socket that is full is
// finished by its own loop on EPOLLOUT. Nothing on the data path wakes another thread, except a
// reader that stopped at its window and gets a slot back from another thread's result.
//
// Each LoopPeer belongs to one loop, which alone reads its socket and runs its protocol (the
// opening, Hello, slices, Bye); any thread may send to it. Lock order: Engine shard ->
// LoopPeer::mu_ (a result is sent after the shard lock is dropped; a dropped input gives its
// credit back under the shard lock); Loop::mu_ is a leaf.
#pragma once

#include <sys/epoll.h>

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/fd.h"
#include "protocol/opening.h"
#include "reducer/server_internal.h"
#include "reducer/session.h"
#include "transport/raw_stream.h"

namespace tally::reducer::server {
namespace wire = protocol::wire;
namespace opening = protocol::opening;

class Loop;

class LoopPeer final : public Member, public std::enable_shared_from_this<LoopPeer> {
 public:
  LoopPeer(ServerContext* ctx, Loop* loop, Fd fd, std::string name);
  ~LoopPeer() override;

  // On the loop thread: registers the socket with the loop's epoll and queues the Challenge.
  Status open();
  // On the loop thread: the socket is ready (epoll events), or the loop was asked to go on
  // reading (a window slot came back).
  void onEvents(uint32_t events);
  // On the loop thread, every tick: the timeouts (join, a stalled message, a flush).
  void onTick(std::chrono::steady_clock::time_point now);
  // On the loop thread: the server stops; closes without reporting.
  void abort();
  // Closed, and no longer holding messages the kernel may still read (a zero-copy send).
  bool finished() const { return phase_ == Phase::kDone && !holding_; }

  void send(OutMsg msg) override;
  void releaseCredit() override;
  const std::string& name() const override { return name_; }

 private:
  enum class Phase {
    kAnswer,   // the job token's Answer is due
    kMain,     // Hello, slices, failover messages, Bye
    kHeld,     // a slice header came with the window full: its payload waits for a slot
    kPayload,  // a slice header came, its payload is due
    kLinger,   // a Reject was queued: drop what comes until the worker closes
    kFlush,    // the reader is done: send what is queued, then close
    kDone,
  };

  // Reads and handles messages until the socket has nothing, the window is full, the end, or
  // kMessagesPerTurn of them (then it asks the loop to resume it after the others).
  void readMessages();
  // A sender found the connection past its unread control messages (send()): it ends.
  void endOverflowed();
  // A message header arrived: where its body goes. False: the connection ended.
  bool placeBody();
  // A message body arrived.
  void onBody();
  void onHeaderMessage(const uint8_t* data, size_t size);
  void onPayload();
  // kHeld: takes the held slice's payload when the window has a slot. False: still full (the
  // reader paused until a result frees one).
  bool takeHeldSlice();
  void onAnswer(const uint8_t* data, size_t size);
  // Ends the connection: reported, then flushed (a graceful end with messages queued) or closed.
  void end(Ending ending);
  void closeNow();
  void lingerFor(const wire::Frame& reject);

  // EPOLLERR with zero-copy sends: reads their completions. True: that was what it reported
  // (not a socket error).
  bool reapCompletions();
  // With mu_ held.
  void flushLocked();
  // Gives the messages back (their credits, their buffers).
  void releaseQueuedLocked();
  // Tells the observer what the zero-copy sends did since the last report.
  void reportZerocopyLocked();
  void settleLocked(size_t messages);
  void creditLocked();
  void updateInterestLocked();

  ServerContext* const ctx_;
  Loop* const loop_;
  const std::string name_;
  const std::chrono::steady_clock::time_point opened_ = std::chrono::steady_clock::now();

  // Loop-thread state.
  Phase phase_ = Phase::kMain;
  transport::FrameReader reader_;
  opening::ReducerSide side_;
  std::array<uint8_t, wire::kMaxHeaderBytes> header_{};
  std::shared_ptr<Communicator> comm_;
  int rank_ = -1;
  wire::SliceHeader slice_{};
  Buffer payload_;
  int payload_shard_ = 0;
  bool counted_ = false;
  std::unique_ptr<OpeningBudget::Slot> opening_;  // until it joins (opening_budget.h)
  bool hangup_ = false;  // epoll reported the connection reset or shut down
  // Closed with zero-copy sends not completed: their messages are kept until hold_until_, as the
  // device may still read their pages (closeNow).
  bool holding_ = false;
  std::chrono::steady_clock::time_point hold_until_{};
  std::chrono::steady_clock::time_point deadline_{};  // kLinger, kFlush: when to give up
  std::chrono::steady_clock::time_point last_read_ = opened_;

  // Shared with the threads that send results, guarded by mu_.
  std::mutex mu_;
  Fd fd_;
  struct Queued {
    OutMsg msg;
    int frames = 0;  // transport messages of it not yet written
  };
  std::deque<Queued, PoolAllocator<Queued>> queued_;
  transport::FrameQueue out_;
  bool out_blocked_ = false;  // the socket is full: the loop finishes on EPOLLOUT
  bool closed_ = false;       // later sends are dropped
  Status write_error_;
  std::chrono::steady_clock::time_point last_write_{};
  int buffered_ = 0;           // slices received and not yet answered
  bool paused_ = false;        // a slice is held at the full window: the reader stopped
  bool done_reading_ = false;  // the connection ended: it reads no more
  uint32_t interest_ = 0;      // what epoll watches for this socket
  transport::ZerocopyCounts zc_reported_;  // what reportZerocopyLocked last reported
  // Control messages queued and not yet released (admitToQueue, session.h). Frames are counted
  // as out_ takes and releases them, so that the last Pong's number tells whether it is still
  // unsent (released or written, it is out).
  size_t unsent_control_ = 0;
  uint64_t frames_pushed_ = 0;
  uint64_t frames_released_ = 0;
  bool pong_queued_ = false;
  uint64_t pong_frame_ = 0;
  // Set with write_error_ when a sender found it past unsentControlLimit; read by the loop
  // without mu_.
  std::atomic<bool> overflowed_{false};
};

// One loop thread and its connections.
class Loop {
 public:
  Loop(ServerContext* ctx, int index);
  ~Loop();
  Status start();
  // Closes every connection and joins the thread. Idempotent.
  void stop();
  // Takes an accepted socket; its connection opens on the loop thread.
  void adopt(Fd fd, std::string name);
  // Asks the loop thread to call `peer`'s onEvents (a window slot came back). Any thread.
  void resume(const std::shared_ptr<LoopPeer>& peer);
  int epollFd() const { return epoll_.get(); }
  size_t connections() const { return count_.load(std::memory_order_relaxed); }

 private:
  void run();
  void wake();

  ServerContext* const ctx_;
  const int index_;
  Fd epoll_;
  Fd wake_;  // an eventfd
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> count_{0};

  std::mutex mu_;
  std::vector<std::pair<Fd, std::string>> adopted_;
  std::vector<std::weak_ptr<LoopPeer>> resumed_;
  bool woken_ = false;

  // Loop-thread state: the connections it owns.
  std::unordered_map<LoopPeer*, std::shared_ptr<LoopPeer>> peers_;
};

// The loops of a server: a socket goes to the loop with the fewest connections.
class EventLoops {
 public:
  EventLoops(ServerContext* ctx, int threads);
  Status start();
  void stop();
  void adopt(Fd fd, std::string name);
  size_t connections() const;

 private:
  std::vector<std::unique_ptr<Loop>> loops_;
};

}  // namespace tally::reducer::server
