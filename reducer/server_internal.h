// SPDX-License-Identifier: Apache-2.0
// Inside the ReducerServer (server.h): connections (Peer, peer.cc), communicators (Communicator,
// CommunicatorRegistry, communicator.cc) and the engine (Engine, engine.cc); the event loops that
// serve TCP connections are in loop.h. Not a public interface.
//
// Ownership: the server owns every Peer until its threads are joined. A Peer that joined holds
// its Communicator; a Communicator holds its members until the last one leaves (then the registry
// forgets it and the cycle is broken). Engine entries hold the Communicator and the Peers of their
// inputs.
//
// Lock order: CommunicatorRegistry::mu_ -> Communicator::mu_ -> Peer's queue and credit locks.
// Engine shard queues are leaves. No lock is held across a transport wait, except a Peer's post_mu_
// by its writer (everyone else only try-locks it).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "common/small_pool.h"
#include "protocol/slicing.h"
#include "protocol/wire.h"
#include "reducer/buffer_pool.h"
#include "reducer/observer.h"
#include "reducer/opening_budget.h"
#include "reducer/server.h"
#include "transport/transport.h"

namespace tally::reducer::server {
namespace wire = protocol::wire;
using protocol::SlicePlan;
using protocol::Span;

class CommunicatorRegistry;
class Engine;
class Communicator;

// WARN lines that any peer can cause at will, one line per second each (common/log.h).
struct PeerWarnings {
  log::RateLimitedLog refused;    // refused at accept, evicted from the opening budget
  log::RateLimitedLog rejected;   // a Hello or the job token's Answer refused
  log::RateLimitedLog dropped;    // closed before joining: timeouts, protocol errors, EOF
  log::RateLimitedLog transport;  // the transport's hello failed or timed out
  log::RateLimitedLog zerocopy;   // --zerocopy asked for, the kernel refused SO_ZEROCOPY
};

// Slices a connection may have buffered before its reader stops: the window announced in Ready
// and the prompt recovery slices past it (wire::kPromptSlices, docs/failover.md).
inline int bufferedLimit(int window) { return window + wire::kPromptSlices; }

struct ServerContext {
  ServerOptions options;
  CommunicatorRegistry* registry = nullptr;
  Engine* engine = nullptr;
  ServerObserver* observer = nullptr;  // options.observer, or nullServerObserver(); never null
  std::atomic<bool> stopping{false};
  OpeningBudget openings;  // connections that have not joined (opening_budget.h)
  PeerWarnings warnings;
};

// One message waiting in a Peer's writer queue.
struct OutMsg {
  wire::Frame header;
  Buffer payload;             // null: the header alone
  size_t payload_offset = 0;  // where in `payload` the bytes sent start
  size_t payload_bytes = 0;
  bool releases_credit = false;  // a result: frees one window slot once sent (or dropped)
  // A Pong: dropped while an earlier Pong of its connection is still unsent, which then answers
  // this Ping too (a worker matches no token: any message tells it the reducer is alive).
  bool pong = false;
};

// Control messages (every message but a result: Ready, Commits, Pongs, Relays, an Error) one
// connection may leave queued and unwritten before the reducer closes it for not reading
// (controlOverflow, session.h); results are bounded by the window. Each costs the reducer a
// queue entry of a few hundred bytes whatever its size, so at the default window this holds a
// peer that never reads to under a megabyte. An honest worker reads all the time and stays far
// below it even with its socket full of results: one Pong at a time (a Ping while its Pong is
// unsent is answered by that one), at most a Commit per result it acknowledged (so about a
// window of them, counted twice for margin) and Relays, about two per rank and epoch of a
// failover (rank 0 hears from every rank); kUnsentControlSlack leaves room for rank 0 of a
// thousand ranks to have one failover's Relays unread at once, and for Ready and an Error.
inline constexpr size_t kUnsentControlSlack = 2048;
inline size_t unsentControlLimit(int window) {
  return kUnsentControlSlack + 2 * static_cast<size_t>(bufferedLimit(window));
}

// What communicators and the engine need of a worker connection, whichever kind serves it: a
// Peer (below, threads over any transport) or a LoopPeer (loop.h, a TCP socket in an event
// loop).
class Member {
 public:
  virtual ~Member() = default;
  // Queues a message; dropped (with its credit released) once the connection has ended. Any
  // thread.
  virtual void send(OutMsg msg) = 0;
  // One slice this connection sent is no longer buffered. Any thread.
  virtual void releaseCredit() = 0;
  virtual const std::string& name() const = 0;
};

// One worker connection served by threads (any transport; TCP connections of one socket go to
// the event loops instead): a reader thread (headers, payloads into pooled buffers, into the
// engine) and a writer thread (Ready, Reject, results, Commits, Pongs, Relays, Error in queue
// order). A message queued while the writer has nothing queued or being posted is posted by the
// sending thread itself (the one that completed the slice, saving a thread hand-off per result);
// the writer still reaps its completion. Only the holder of post_mu_ posts, and send() posts only
// when nothing is ahead, so order is kept.
// Peer lock order: out_mu_ -> post_mu_ -> credit_mu_ (send() only try-locks post_mu_).
class Peer final : public Member, public std::enable_shared_from_this<Peer> {
 public:
  Peer(std::unique_ptr<transport::Connection> conn, ServerContext* ctx);
  ~Peer() override;

  // Starts the reader and writer threads. Fails (kSystem, the connection closed, the observer
  // told it opened and closed) when they cannot be created.
  Status start();
  void send(OutMsg msg) override;
  void releaseCredit() override;
  // Server stop: closes the connection so both threads end soon. Any thread.
  void abort();
  // Joins the reader (which joined the writer). Call after finished() or abort().
  void join();
  bool finished() const { return finished_.load(std::memory_order_acquire); }

  const std::string& name() const override { return name_; }

 private:
  void readerLoop();
  void writerLoop();
  // Receives one message of at most `size` bytes with `tag`; polls `stopping` while waiting.
  Status recvOne(void* data, size_t size, int tag, size_t* got);
  // The opening (peer_opening.cc): Challenge, then with a job token the worker's Answer, checked
  // before anything else is read. *end: the connection was refused (Reject queued, counted).
  Status greet(bool* end);
  // A Reject from the worker during the opening (it refused this reducer), or an Answer this
  // reducer did not ask for: logged, counted, refused. Always ends the connection.
  void refusedInOpening(wire::MsgType type, const uint8_t* data, size_t size);
  // After a Reject was queued: keeps reading (and dropping) until the worker closes, for at most
  // a couple of seconds, so the Reject reaches it before this side closes (peer_opening.cc).
  void lingerAfterRefusal();
  Status handleHello(const uint8_t* data, size_t size, bool* end);
  Status handleSlice(const uint8_t* data, size_t size);
  void waitForCredit();
  // Nothing queued for the writer and nothing in flight: what was sent is out of its hands.
  bool writerIdle();

  // One message handed to the transport: the header bytes must live until the send is done.
  struct Inflight {
    TALLY_POOLED_NEW(Inflight);
    OutMsg msg;
    std::unique_ptr<transport::Request> header_req;
    std::unique_ptr<transport::Request> payload_req;
  };
  // The writer side; every *Locked member runs with post_mu_ held.
  bool tryPostNowLocked(OutMsg* msg);  // out_mu_ held too; false: queue it instead
  void postLocked(OutMsg msg);
  void reapLocked();
  void waitOldestLocked();
  void settleFrontLocked();
  void markDeadLocked(Status st);

  std::unique_ptr<transport::Connection> conn_;
  ServerContext* ctx_;
  std::string name_;
  const std::chrono::steady_clock::time_point opened_ = std::chrono::steady_clock::now();
  std::thread reader_;
  std::thread writer_;
  std::atomic<bool> finished_{false};
  std::atomic<bool> aborted_{false};

  // Reader-thread state.
  std::shared_ptr<Communicator> comm_;
  int rank_ = -1;
  bool recv_failed_ = false;  // the reader ended because a receive failed (the peer is gone)
  bool counted_ = false;      // this connection's error was counted already (auth, checksum)
  bool answering_ = false;    // greet() waits for the job token's Answer
  // When the reader first saw its communicator's failure sent (the Error queued to it).
  std::chrono::steady_clock::time_point failure_seen_{};
  std::unique_ptr<OpeningBudget::Slot> opening_;  // until it joins (opening_budget.h)

  // Writer queue.
  std::mutex out_mu_;
  std::condition_variable out_cv_;
  std::deque<OutMsg, PoolAllocator<OutMsg>> out_;
  bool writer_finish_ = false;   // the reader ended: send what is queued, then close
  bool writer_done_ = false;     // the writer ended: later messages are dropped
  bool writer_posting_ = false;  // the writer took messages from out_ and is posting them
  // Control messages in out_ (admitToQueue, session.h), and whether a Pong is one of them. What
  // the writer took is bounded the same way, so a peer that does not read holds at most twice
  // the limit here, and the sends in flight.
  size_t unsent_control_ = 0;
  bool pong_queued_ = false;
  Status overflow_;  // it left too many unread: closed, and this is why (controlOverflow)

  // Posting and reaping sends.
  std::mutex post_mu_;
  std::deque<std::unique_ptr<Inflight>, PoolAllocator<std::unique_ptr<Inflight>>> inflight_;
  std::atomic<size_t> inflight_count_{0};  // inflight_.size(), read without post_mu_
  Status dead_;                            // first send error; later messages are dropped
  std::chrono::steady_clock::time_point flush_deadline_{};

  // Slices received and not yet answered (window flow control).
  std::mutex credit_mu_;
  std::condition_variable credit_cv_;
  int buffered_ = 0;
};

// Every rank's largest Ack (docs/failover.md), field by field, and the smallest of each field
// over the ranks: what the next Commit says. Each minimum is kept with how many ranks hold it, so
// an Ack costs O(1) and only the Ack that lifts the last rank off a minimum looks at every rank.
// O(nranks), nothing per call. Not thread-safe: its Communicator's mu_ guards it.
class AckFloor {
 public:
  explicit AckFloor(uint32_t nranks);
  // Raises `rank`'s Ack to `to`, each field on its own: a field that would fall stays (a late or
  // reordered Ack is no error).
  void raise(uint32_t rank, const wire::AckPoint& to);
  // The smallest of each field over every rank; neither field ever falls.
  wire::AckPoint least() const;

 private:
  struct Field {
    std::vector<uint64_t> by_rank;
    uint64_t least = 0;
    uint32_t holders = 0;  // ranks whose value is `least`
    void raise(uint32_t rank, uint64_t to);
  };
  Field calls_;
  Field epochs_;
};

// How many Relays one member may send: a burst of kRelayBurst, then kRelayPerSecond. An epoch
// of failover costs each rank about two per reducer connection (a Suspect and a Report; rank 0 a
// Propose and a Decide), so a burst of 64 covers many epochs back to back with room to spare. A
// member past it is broken or hostile: each of its relays costs rank 0 a message, or every other
// rank one, so it fails its communicator rather than flood the others.
inline constexpr uint32_t kRelayBurst = 64;
inline constexpr uint32_t kRelayPerSecond = 32;

// One member's allowance of Relays, a token bucket. Guarded by its Communicator's mu_.
struct RelayAllowance {
  double tokens = kRelayBurst;
  std::chrono::steady_clock::time_point refilled{};
  // Takes one token, refilled for the time since the last; false: none is left.
  bool take(std::chrono::steady_clock::time_point now);
};

// A communicator as seen by one reducer.
class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  Communicator(const wire::Hello& first, Engine* engine, ServerObserver* observer);

  const wire::CommId id;
  const uint32_t nranks;
  const uint32_t nreducers;
  const uint32_t reducer_index;
  const uint64_t slice_bytes;
  // How the ranks cut their calls (protocol/slicing.h), from the first Hello.
  const SlicePlan plan;
  // TALLY_CHECKSUM: inputs carry a CRC32C and results get one (protocol/wire.h).
  const bool checksum;
  // The epoch its Hellos named: 0 when it formed with this reducer, above when this reducer
  // joined it at a membership change (docs/failover.md).
  const uint32_t epoch;
  uint64_t reserved_bytes = 0;  // memory it holds against the server's limits (registry's mu_)
  // When its first Hello came: it must form (every rank join) within the join timeout.
  const std::chrono::steady_clock::time_point created = std::chrono::steady_clock::now();

  // Every rank joined.
  bool formed() const { return formed_.load(std::memory_order_acquire); }
  // "3 of 16 ranks joined", for the reason it did not form.
  std::string joinedText();

  // The CRC32C a result header with this payload carries: computed once per slice for every
  // rank; 0 when !checksum. Any thread.
  uint32_t resultCrc(const void* data, size_t bytes) const;

  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Failed, and the Error went into every open member's queue: a member may now be closed once
  // its queue is out (before, closing it could lose the reason).
  bool failureSent() const { return failure_sent_.load(std::memory_order_acquire); }
  // Marks the communicator failed, sends Error(reason, scope) to every member still connected and
  // has the engine drop its buffered slices. Only the first call acts (true: this one did), so
  // the first cause decides the scope. kReducer only when this reducer can no longer serve the
  // communicator but the others may (a member's connection ended without a word, or a member
  // dismissed this reducer); everything else fails the communicator everywhere. Any thread;
  // takes mu_.
  bool fail(const std::string& reason, wire::ErrorScope scope = wire::ErrorScope::kCommunicator);

  // The failover messages of members (failover.cc). Any thread; each takes mu_ and sends with
  // no lock held.
  //
  // An Ack from `rank`: raises its books (AckFloor) and, when either minimum over every rank
  // grew, sends every open member Commit(the minimums). Commits leave in the order they were
  // computed, however many threads bring Acks: one thread at a time sends, and a thread that
  // finds another sending leaves the newest Commit to it. A Commit to rank r follows every
  // result it covers on r's connection: r acknowledged those results, so they were queued
  // before. Not ok (nothing changed): the communicator has not formed.
  //
  // A Commit rides on the next result to a rank when one is coming: a rank with an input on its
  // way to a slice not yet complete gets one (sliceCompleted); the others get a Commit message
  // at once. So a stream of results needs no Commit messages, and none is held back for good.
  Status ack(int rank, const wire::AckPoint& point);
  // A slice header of `rank` was accepted: its input is on its way to the engine, which will
  // complete its slice unless the communicator fails (any thread, no lock).
  void inputFiled(int rank) { pending_inputs_[rank].fetch_add(1, std::memory_order_seq_cst); }
  // The engine completed a slice (every rank's input of it filed): out[r] is the Commit rank r
  // is owed, to go with its result, or {0, 0}. Takes mu_.
  void sliceCompleted(wire::AckPoint* out);
  // A Relay from `rank`: stamped with it and forwarded, from rank 0 to every other open member,
  // from any other rank to rank 0 only; never back to the sender. Dropped once failed. Rank 0's
  // first Decide of an epoch above every earlier one (and above `epoch`) is told the observer,
  // before any rank can have it. Not ok (nothing sent): the communicator has not formed, or
  // `rank` has used up its allowance (the reason names it; the caller fails the communicator).
  Status relay(int rank, wire::Relay msg, std::chrono::steady_clock::time_point now);
  // Members that said Bye. One sends no more inputs, so a slice without its input can never
  // complete: the engine fails the communicator with leftReason(rank) when such a slice is
  // filed, and CommunicatorRegistry::leave when one is waiting at the Bye. The flags are set
  // under mu_ before leave asks the engine, and read under a shard lock as each input is filed,
  // so every such slice is seen by one of the two. Any thread, no lock.
  bool anyLeft() const { return left_count_.load(std::memory_order_acquire) > 0; }
  bool left(uint32_t rank) const { return left_[rank].load(std::memory_order_acquire); }
  // Why a call that needs `rank` fails the communicator, naming it. Only once left(rank): it is
  // written once, before that flag is set, and never again.
  const std::string& leftReason(uint32_t rank) const { return left_why_[rank]; }
  // Checks a slice header against this communicator's slicing; the reason names the rank.
  Status checkSlice(const wire::SliceHeader& h, int rank) const;
  // The whole slice h belongs to (protocol/slicing.h), and `rank`'s part of h's window
  // (all-gather and reduce-scatter). Headers that passed checkSlice only.
  Span sliceOf(const wire::SliceHeader& h) const;
  Span partOf(const wire::SliceHeader& h, uint32_t rank) const;
  // "3f2a...9c (4 ranks)"
  std::string describe() const;

 private:
  friend class CommunicatorRegistry;
  Engine* engine_;
  ServerObserver* observer_;
  std::mutex mu_;
  std::vector<std::shared_ptr<Member>> members_;  // by rank; cleared when the last one leaves
  std::vector<bool> open_;
  uint32_t joined_ = 0;
  uint32_t open_count_ = 0;
  std::atomic<bool> formed_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> failure_sent_{false};

  // Failover (mu_): O(nranks).
  // The sending half of ack(): sends the newest Commit until none is due, then stops being the
  // committing thread.
  void sendCommits();
  AckFloor acks_;
  wire::AckPoint committed_;  // the newest Commit computed
  bool commit_due_ = false;   // committed_ has not been sent yet
  bool committing_ = false;   // a thread is in sendCommits()
  // By rank: committed_ has not reached it (neither in a Commit nor with a result), and the
  // inputs it has in slices the engine has not completed. The two decide together, under mu_
  // (the count falls only in sliceCompleted), whether a Commit can wait for a result.
  std::vector<bool> owed_;
  std::atomic<bool> owed_any_{false};  // some owed_ is set (written under mu_, read without)
  std::unique_ptr<std::atomic<uint32_t>[]> pending_inputs_;
  // The members a Commit goes to: only the committing thread uses it.
  std::vector<std::shared_ptr<Member>> commit_to_;
  std::vector<RelayAllowance> relays_;  // by rank
  uint32_t decided_epoch_;              // the highest epoch rank 0 relayed a Decide for

  // Graceful leaves (anyLeft): by rank, each flag and reason set once under mu_ (leave).
  void markLeftLocked(uint32_t rank, const std::string& why);
  std::unique_ptr<std::atomic<bool>[]> left_;
  std::vector<std::string> left_why_;
  std::atomic<uint32_t> left_count_{0};
};

// Communicators by id. Used on join and leave only, never per slice.
class CommunicatorRegistry {
 public:
  // Takes the window and the memory limits from `options`.
  CommunicatorRegistry(Engine* engine, const ServerOptions& options, ServerObserver* observer)
      : engine_(engine),
        window_(options.window),
        max_connection_bytes_(options.max_connection_bytes),
        max_communicator_bytes_(options.max_communicator_bytes),
        max_memory_bytes_(options.max_memory_bytes),
        max_members_(options.max_connections),
        observer_(observer) {}

  // Adds `peer` as hello.rank. When this completes the group, Ready goes to every member. On
  // failure the peer is not a member and the Status message is the reason to Reject it with;
  // *over_limit tells whether a server limit (members, memory) was the reason.
  Status join(const std::shared_ptr<Member>& peer, const wire::Hello& hello,
              std::shared_ptr<Communicator>* out, bool* over_limit);
  // The member `rank` is gone: after Bye when `graceful`; otherwise its loss fails the
  // communicator, with `why` and `scope` in the Error the others get. After a Bye, `why` is the
  // reason any call that still needs the rank fails the communicator with (communicator scope):
  // at once when the engine holds a slice that waits for its input, else when another rank
  // files one (Communicator::anyLeft). The last leave frees the communicator.
  void leave(const std::shared_ptr<Communicator>& comm, int rank, bool graceful,
             const std::string& why, wire::ErrorScope scope = wire::ErrorScope::kCommunicator);
  // Server stop: forgets every communicator (and the member references they hold).
  void clear();
  size_t size();

 private:
  // join's locked part. *comm_out and *created are set whether or not the Hello is accepted
  // (*created: this Hello made the communicator); *ready_to when it completed the group;
  // *reserved: the bytes it reserved, whether or not the Hello is accepted.
  Status addMember(const std::shared_ptr<Member>& peer, const wire::Hello& hello,
                   std::shared_ptr<Communicator>* comm_out, bool* created,
                   std::vector<std::shared_ptr<Member>>* ready_to, bool* over_limit,
                   uint64_t* reserved);

  // Whether a communicator of this Hello's shape fits the limits once complete, and whether what
  // it reserves now fits the memory left: its results and its first member. *bytes: that
  // reservation (mu_ held).
  Status admitLocked(const wire::Hello& hello, uint64_t* bytes) const;
  // Whether one more member's inputs fit the memory left; *bytes: its reservation (mu_ held).
  Status admitMemberLocked(const Communicator& comm, uint64_t* bytes) const;

  Engine* engine_;
  const int window_;
  const uint64_t max_connection_bytes_;
  const uint64_t max_communicator_bytes_;
  const uint64_t max_memory_bytes_;
  const size_t max_members_;  // --max-connections
  ServerObserver* observer_;
  std::mutex mu_;
  size_t members_ = 0;  // connections that joined and have not left, over all communicators
  std::unordered_map<wire::CommId, std::shared_ptr<Communicator>, wire::CommIdHash> comms_;
  uint64_t reserved_bytes_ = 0;  // sum of the communicators' reservations (mu_)
};

// A slice input from one rank, handed to the engine by the thread that received it.
struct SliceInput {
  std::shared_ptr<Communicator> comm;
  std::shared_ptr<Member> peer;
  int rank = 0;
  wire::SliceHeader header;
  Buffer data;
  std::chrono::steady_clock::time_point arrived;  // when its payload had been received
};

// Gathers every rank's input of a slice and, on the thread that brings the last one, reduces
// them and sends the result (run to completion: no thread of its own, no hand-off). Each
// (communicator, slice index) stream is hashed to one of `shards` shards, each with its own lock
// and buffer pool; the lock is held only to file an input, never while reducing or sending.
class Engine {
 public:
  Engine(int shards, size_t pool_cache_bytes, ServerObserver* observer);
  ~Engine();
  // Forgets every buffered slice (server stop). Idempotent.
  void stop();

  int shardOf(const wire::CommId& comm, uint32_t slice) const;
  BufferPool& pool(int shard);
  // Files an input; when it was the last one of its slice, reduces and sends the results on this
  // thread. Any thread; never throws (an internal error fails the input's communicator).
  void submit(int shard, SliceInput in);
  // Every shard forgets the communicator's buffered slices (after fail or the last leave).
  void dropCommunicator(const std::shared_ptr<Communicator>& comm);
  // Whether a buffered slice of `comm` waits for `rank`'s input; *slice: the first such slice's
  // header. Any thread; takes each shard's lock in turn.
  bool awaits(const Communicator& comm, uint32_t rank, wire::SliceHeader* slice);

  struct Shard;

 private:
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace tally::reducer::server
