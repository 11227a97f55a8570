// SPDX-License-Identifier: Apache-2.0
// A reducer played by the test: a TCP listener on 127.0.0.1 that speaks the worker/reducer
// protocol (protocol/wire.h) well enough for CollClients to take it as one of their reducers, and
// misbehaves once, as its script says. Until then, and afterwards towards every rank that still
// talks to it, it is a correct reducer: it sums every slice in rank order once each rank's copy
// is in (float32 and int32 sums), turns Acks into Commits (the least of every rank's), answers
// Pings, and relays failover messages the way a ReducerServer does (rank 0's to every other
// rank, the others' to rank 0, each stamped with its sender's rank).
//
// It is the transport's own TCP listener (transport/network.h), so the opening of each stream
// and the framing are the real ones, for one-socket raw links and striped threaded links alike.
// Per connection: a Challenge without auth, the worker's Hello; once every rank said Hello, Ready
// to each; then a reader thread (this rank's messages) and a writer thread (a queue of messages
// to it, sent in order). Every wait is bounded.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "protocol/wire.h"
#include "transport/network.h"

namespace tally::reducer::test {
namespace wire = protocol::wire;

// What the fake does wrong, once.
enum class Misbehaviour {
  kNone,
  // The target is sent a Result for a slice it never sent this reducer (the next slice of the
  // same call, which another reducer holds, or the next call's first), before the true one.
  kStrayResult,
  // The target is sent a Commit covering the call of the slice just summed, before its result.
  kEarlyCommit,
  // After the slice's results, every rank is sent forged failover messages (forgedRelays()):
  // a Decide and a Propose of a future epoch, a Propose of a stale one, and Proposes and Decides
  // stamped with a rank other than 0. Correct afterwards.
  kForgeControl,
  // Once an epoch was decided through this reducer and every rank has posted past its boundary,
  // every rank is sent a copy of each failover message this reducer relayed (rank 0's and the
  // others', stamped as they were). Correct afterwards.
  kReplayControl,
  // The target is sent bytes that are no wire header, in place of its result.
  kGarbage,
  // Partial delivery: from the act on, no Commit leaves (neither as a message nor with a
  // result); the act's slice's results go to the ranks aimed at (every rank, or the target
  // only), and once they are out every connection is closed, as by a reducer that dies between
  // its results and their Commit (or amid its results).
  kCrashBeforeCommit,
};

struct FakeScript {
  Misbehaviour act = Misbehaviour::kNone;
  // Slices summed and answered correctly before the act (kReplayControl: after the boundary).
  uint64_t after_slices = 4;
  // The rank the act is aimed at; -1: every rank (the forged and replayed relays always go to
  // every rank).
  int target = -1;
  uint32_t window = 8;  // the window its Ready announces
  // Set: it requires and proves this job token in the opening, as a reducer of the job does (an
  // insider: it can do everything a reducer can, but make a rank's seal).
  std::string job_token;
  // False: it passes no failover message on (records them, relayed() lists them), a reducer
  // that swallows them; correct otherwise.
  bool relays = true;
};

class FakeReducer {
 public:
  // Listens on 127.0.0.1 (an ephemeral port) for a communicator of `nranks` ranks.
  static Status start(int nranks, const FakeScript& script, std::unique_ptr<FakeReducer>* out);
  ~FakeReducer();
  FakeReducer(const FakeReducer&) = delete;
  FakeReducer& operator=(const FakeReducer&) = delete;

  // "127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  // Closes every connection and joins every thread. Idempotent.
  void stop();

  // The act was done.
  bool acted() const { return acted_.load(); }
  // Slices summed and answered (every rank's copy in), in all and since the act.
  uint64_t slicesSummed() const { return summed_.load(); }
  uint64_t slicesSummedAfterAct() const { return summed_after_act_.load(); }
  // Slice copies received from any rank since the act.
  uint64_t copiesAfterAct() const { return copies_after_act_.load(); }
  // Pings received from any rank, in all.
  uint64_t pings() const { return pings_.load(); }
  // Ranks whose connection ended (a Dismiss, a close, an error).
  int ranksGone() const { return gone_.load(); }
  // Every relay this reducer passed on, stamped with its sender, in order.
  std::vector<wire::Relay> relayed() const;
  // The relays it sent as its act (kForgeControl, kReplayControl).
  std::vector<wire::Relay> sentAsAct() const;
  // What went wrong on the fake's own side (a slice it cannot sum); empty when nothing did.
  std::string trouble() const;

  // Sends `frame` to `rank` now, after whatever is queued for it (a misbehaviour the test times
  // itself, between calls), and waits (up to 5 s) until the transport took it. False when that
  // rank is not connected, or the send did not finish.
  // With `copies`, that many copies of it back to back (a flood).
  bool inject(int rank, const wire::Frame& frame, int copies = 1);

  // What kForgeControl sends: each aimed at a communicator whose epoch 0 is the last decided,
  // about slot `slot`.
  static std::vector<wire::Relay> forgedRelays(uint32_t slot);

 private:
  // One message to a rank, as the writer sends it.
  struct Out {
    int tag = wire::kTagHeader;
    std::vector<uint8_t> bytes;
  };
  struct Member {
    int rank = -1;
    std::unique_ptr<transport::Connection> conn;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Out> queue;
    bool closed = false;  // no more sends (guarded by mu)
    uint64_t queued = 0;  // messages queued and sent in all (guarded by mu)
    uint64_t sent = 0;
    bool writer_done = false;  // the writer thread has returned (guarded by mu)
    std::thread writer;
    wire::AckPoint acked;  // guarded by FakeReducer::mu_
  };
  // A slice being summed: each rank's copy, by rank.
  struct Pending {
    wire::SliceHeader header;
    std::vector<std::vector<uint8_t>> inputs;
    std::vector<bool> seen;
    int have = 0;
  };

  FakeReducer(int nranks, const FakeScript& script);
  void acceptLoop();
  // One connection from its opening to its end (runs on its own thread).
  void serve(std::unique_ptr<transport::Connection> conn);
  Status readLoop(Member* m);
  Status recvMessage(transport::Connection* conn, void* data, size_t size, int tag, size_t* got);
  void writeLoop(Member* m);
  void writeQueued(Member* m);  // writeLoop until the connection or the fake ends
  // Queues messages to one rank, in order, as one unit (a header and its payload stay together).
  void send(Member* m, std::vector<Out> msgs);
  void sendHeader(Member* m, const wire::Frame& f);
  void endMember(Member* m);

  void onSlice(int rank, const wire::SliceHeader& h, std::vector<uint8_t> payload);
  void onAck(int rank, const wire::AckPoint& p);
  void onRelay(int rank, wire::Relay relay);
  // The sum of a slice whose every copy came, and what the script does about it.
  void answer(Pending p);
  Status sum(const Pending& p, std::vector<uint8_t>* out) const;
  void sendResult(Member* m, const wire::SliceHeader& h, const std::vector<uint8_t>& payload);
  bool aimedAt(int rank) const { return script_.target < 0 || script_.target == rank; }
  std::vector<Member*> liveMembers();

  const int nranks_;
  const FakeScript script_;
  std::string address_;
  std::shared_ptr<transport::Network> network_;
  std::unique_ptr<transport::Listener> listener_;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;

  mutable std::mutex mu_;  // everything below, unless atomic
  std::condition_variable joined_cv_;
  std::vector<std::shared_ptr<Member>> members_;  // by rank, once its Hello came
  int joined_ = 0;
  wire::CommId comm_;
  std::vector<std::thread> servers_;  // one per accepted connection
  std::map<std::pair<uint64_t, uint32_t>, Pending> pending_;
  wire::AckPoint committed_;
  std::vector<wire::Relay> relayed_;
  std::vector<wire::Relay> sent_as_act_;
  std::string trouble_;
  bool decided_ = false;  // a Decide from rank 0 passed (kReplayControl)
  uint64_t decided_boundary_ = 0;
  uint64_t summed_past_boundary_ = 0;

  std::atomic<bool> acted_{false};
  std::atomic<uint64_t> summed_{0};
  std::atomic<uint64_t> summed_after_act_{0};
  std::atomic<uint64_t> copies_after_act_{0};
  std::atomic<int> gone_{0};
  std::atomic<uint64_t> pings_{0};
};

}  // namespace tally::reducer::test
