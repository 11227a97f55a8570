// SPDX-License-Identifier: Apache-2.0
// What a ReducerServer reports as it runs: connections, communicators, reduced slices, errors and
// the failover epochs relayed through it.
// tally-reducer turns these events into Prometheus metrics (reducer/metrics/); tests count them.
// Nothing here knows about any metrics library.
//
// Threads: the server calls an observer from its accept, loop and reader threads, concurrently
// and with no lock of its own held, so every method must be thread-safe. Slice events come once
// per reduced slice on the data path: keep them to a few atomic operations, never block.
//
// Lifetime: ServerOptions::observer is borrowed, never owned; it must outlive the server (until
// ReducerServer::stop() returned or the server was destroyed). Null means nullServerObserver().
#pragma once

#include <chrono>
#include <cstdint>

namespace tally::reducer {

// Why the server counted an error. One incident counts under one cause; a communicator that fails
// because of it is reported separately (communicatorFailed).
enum class ServerError : uint8_t {
  kAccept,         // a connection failed the transport handshake
  kRejectedHello,  // a Hello was refused with Reject: malformed, or contradicts earlier members
  kProtocol,       // a connection was dropped for a malformed or unexpected message
  kPeerLost,       // a connection ended without Bye (EOF, reset, transport error)
  kMismatch,       // ranks disagreed on a call (type, count, op, or a slice sent twice)
  kInternal,       // an exception in the server: allocation failure or a broken invariant
  kAuth,           // the opening failed authentication: wrong or missing job token, either side
  kChecksum,       // a slice payload did not match its CRC32C (TALLY_CHECKSUM=1)
  kLimit,          // refused for a server limit: connections, memory a communicator needs, or
                   // control messages a member left unread
  kTimeout,        // a connection did not join in time, or stalled mid-message
};
inline constexpr int kServerErrorCount = 10;

// "accept", "rejected_hello", "protocol", "peer_lost", "mismatch", "internal", "auth",
// "checksum", "limit", "timeout": the metric label.
inline const char* serverErrorName(ServerError e) {
  switch (e) {
    case ServerError::kAccept:
      return "accept";
    case ServerError::kRejectedHello:
      return "rejected_hello";
    case ServerError::kProtocol:
      return "protocol";
    case ServerError::kPeerLost:
      return "peer_lost";
    case ServerError::kMismatch:
      return "mismatch";
    case ServerError::kInternal:
      return "internal";
    case ServerError::kAuth:
      return "auth";
    case ServerError::kChecksum:
      return "checksum";
    case ServerError::kLimit:
      return "limit";
    case ServerError::kTimeout:
      return "timeout";
  }
  return "unknown";
}

// The change a communicator's rank 0 decided for an epoch (docs/failover.md), as the metrics label
// it: the wire's codes are not the observer's business.
enum class EpochChange : uint8_t {
  kLost,  // a reducer slot became empty
  kJoin,  // a reducer filled an empty slot
  kVoid,  // a join that did not happen: the epoch passed with no change
  kFail,  // too few reducers were left: the communicator fails
};
inline constexpr int kEpochChangeCount = 4;

// "lost", "join", "void", "fail": the metric label.
inline const char* epochChangeName(EpochChange c) {
  switch (c) {
    case EpochChange::kLost:
      return "lost";
    case EpochChange::kJoin:
      return "join";
    case EpochChange::kVoid:
      return "void";
    case EpochChange::kFail:
      return "fail";
  }
  return "unknown";
}

class ServerObserver {
 public:
  virtual ~ServerObserver() = default;

  // A worker connection was accepted / has ended (both its threads done). Every opened
  // connection is closed exactly once, at the latest during stop().
  virtual void connectionOpened() = 0;
  virtual void connectionClosed() = 0;

  // A communicator was created by its first Hello / forgotten after its last member left (or at
  // stop()). Each opened communicator is closed exactly once.
  virtual void communicatorOpened() = 0;
  virtual void communicatorClosed() = 0;
  // A communicator failed (Error sent to its members). At most once per communicator.
  virtual void communicatorFailed() = 0;
  // Slice memory reserved against the server's limits grew (a communicator formed, a member
  // joined) or shrank (a communicator was forgotten) by `bytes`. The running sum is what all
  // communicators hold now; it is back to 0 once every communicator has been forgotten.
  virtual void memoryReserved(uint64_t bytes) = 0;
  virtual void memoryReleased(uint64_t bytes) = 0;

  // One slice was reduced and its result is about to be queued to every rank. `input_bytes` is
  // the slice's bytes times the number of ranks; `latency` runs from the first of its inputs
  // having arrived (payload received) to now. Called on the thread that completed the slice,
  // before any rank can have the result, so a worker that got its results sees them counted.
  virtual void sliceReduced(uint64_t input_bytes, std::chrono::nanoseconds latency) = 0;

  virtual void error(ServerError cause) = 0;

  // Rank 0 of a communicator relayed its decision for a new epoch through this reducer. Once per
  // communicator and epoch: the copies rank 0 sends again, and older epochs, are not reported.
  virtual void epochDecided(EpochChange change) = 0;
  // A communicator formed (Ready sent) whose Hellos named an epoch above 0: this reducer joined a
  // running communicator at a membership change rather than at its formation.
  virtual void communicatorRejoined() = 0;

  // A connection's MSG_ZEROCOPY sends since it last reported (--zerocopy): sendmsg calls made
  // with it, those of them the kernel copied after all, and batches copied because the kernel
  // refused to pin more pages. Reported by its loop every tick while it changes, and when it
  // closes.
  virtual void zerocopySent(uint64_t sends, uint64_t copied, uint64_t refused) = 0;
};

// Ignores everything.
class NullServerObserver final : public ServerObserver {
 public:
  void connectionOpened() override {}
  void connectionClosed() override {}
  void communicatorOpened() override {}
  void communicatorClosed() override {}
  void communicatorFailed() override {}
  void memoryReserved(uint64_t) override {}
  void memoryReleased(uint64_t) override {}
  void sliceReduced(uint64_t, std::chrono::nanoseconds) override {}
  void error(ServerError) override {}
  void epochDecided(EpochChange) override {}
  void communicatorRejoined() override {}
  void zerocopySent(uint64_t, uint64_t, uint64_t) override {}
};

// The shared do-nothing observer the server uses when ServerOptions::observer is null.
inline ServerObserver* nullServerObserver() {
  static NullServerObserver instance;
  return &instance;
}

}  // namespace tally::reducer
