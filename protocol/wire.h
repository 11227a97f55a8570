// SPDX-License-Identifier: Apache-2.0
// The reducer protocol's wire format: what workers (coll_client) and tally-reducer (server)
// exchange over a transport::Connection.
//
// Every message is a header: a fixed-size little-endian record, encoded and decoded field by field
// (never a memcpy of a C++ struct, so padding and host byte order never reach the wire). Slice and
// result headers are followed by their payload as a separate message; the two are told apart by
// their transport tags (kTagHeader, kTagPayload).
//
//   preamble (8 bytes): magic u32 | version u16 | type u8 | reserved u8 (0)
//
//   worker -> reducer                         reducer -> worker
//                                             Challenge  first, on every connection
//   Answer      proof of the job token        Proof      the reducer's proof of the token
//   Hello       join a communicator           Ready   every rank joined
//   SliceHeader + payload (count elements)    Reject  this Hello is refused (reason)
//   Bye         this member leaves            ResultHeader + payload (the reduced slice)
//   Reject      (opening only) the worker     Error   the communicator failed (reason), or
//               refuses this reducer                  this reducer lost it (scope)
//   Error       this member gives up (reason;
//               the reducer fails the communicator
//               and passes the reason on)
//   Ack         results landed (calls, epoch) Commit  every rank's Ack passed (min of each)
//   Ping        are you there                 Pong    the Ping's token back
//   Relay       a failover message            Relay   the same, stamped with its sender's rank
//               (docs/failover.md)                    (rank 0's to every rank, others' to 0)
//   Dismiss     the communicator drops this
//               reducer (reason)
//
// The opening (docs/security.md; MACs in common/auth.h). On accept the reducer sends Challenge:
// its fresh nonce, and whether it requires the job token. A worker with a token answers a
// requiring Challenge with Answer (its own nonce and its MAC over both) and waits; the reducer
// checks the MAC before it reads anything else and, if it holds, sends Proof (its own MAC), else
// Reject "authentication failed". The worker checks the Proof before it sends Hello, so a
// reducer that did not prove the token learns no communicator and gets no slice. Without tokens
// on either side the worker sends Hello right after the Challenge. A worker with a token refuses
// a Challenge that does not require one (Reject, then it closes); a reducer with a token refuses
// a Hello that comes without an Answer.
//
// With Hello.checksum (TALLY_CHECKSUM=1) every slice and result header carries the CRC32C of its
// payload; the receiver checks it before using the payload.
//
// Each message type has exactly one encoded size; decode rejects anything else, unknown types,
// type and op codes, counts that are zero or whose byte size overflows or passes kMaxSliceBytes,
// offsets past the call's total count, and text longer than kMaxReasonBytes. A decode never
// writes its output on failure.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "common/auth.h"
#include "common/status.h"
#include "common/types.h"
#include "protocol/slicing.h"

namespace tally::protocol::wire {

inline constexpr uint32_t kMagic = 0x594c4154;  // bytes "TALY" on the wire
// 2: slices cut as protocol/slicing.h says. 3: the authenticated opening (Challenge, Answer,
// Proof), Hello.checksum and the slice CRC. 4: all-gather and reduce-scatter (SliceHeader::kind,
// rank_count, window_offset; empty pieces). 5: the slice plan in Hello (slices_per_reducer,
// min_slice_bytes). 6: reducer failover (Ack, Commit, Ping, Pong, Relay, Dismiss; Hello.epoch;
// the scope of an Error). 7: Relay.seal, rank-to-rank MACs under a key in rank 0's handle.
// 8: Control.first_call (a Decide's F, docs/failover.md).
inline constexpr uint16_t kVersion = 8;

// Transport tags: a header, and the payload that follows a slice or result header.
inline constexpr int kTagHeader = 0x7a11;
inline constexpr int kTagPayload = 0x7a12;

inline constexpr size_t kPreambleBytes = 8;
inline constexpr size_t kMaxHeaderBytes = 256;   // receive buffer size for any header
inline constexpr size_t kMaxReasonBytes = 240;   // Reject/Error text, truncated to this
inline constexpr uint64_t kMaxSliceBytes = 64ull << 20;
inline constexpr uint32_t kMaxRanks = 1u << 16;
inline constexpr uint32_t kMaxReducers = 4096;
inline constexpr uint32_t kMaxWindow = 4096;

enum class MsgType : uint8_t {
  kHello = 1,
  kReady = 2,
  kReject = 3,
  kSlice = 4,
  kResult = 5,
  kError = 6,
  kBye = 7,
  kChallenge = 8,
  kAnswer = 9,
  kProof = 10,
  kAck = 11,
  kCommit = 12,
  kPing = 13,
  kPong = 14,
  kRelay = 15,
  kDismiss = 16,
};
const char* msgTypeName(MsgType t);

// A communicator's 128-bit id, chosen at random by rank 0.
struct CommId {
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool operator==(const CommId&) const = default;
  // 32 hex digits, for logs.
  std::string toString() const;
};
struct CommIdHash {
  size_t operator()(const CommId& id) const {
    return std::hash<uint64_t>()(id.hi ^ (id.lo * 0x9e3779b97f4a7c15ull));
  }
};

struct Hello {
  CommId comm;
  uint32_t rank = 0;
  uint32_t nranks = 0;
  uint32_t reducer_index = 0;  // which entry of TALLY_REDUCERS the worker thinks this reducer is
  uint32_t nreducers = 0;
  uint64_t slice_bytes = 0;    // the worker's TALLY_SLICE_BYTES
  // The rest of its slice plan (protocol/slicing.h); the slow-link plan unless set.
  uint32_t slices_per_reducer = kSlicesPerReducer;
  uint32_t min_slice_bytes = static_cast<uint32_t>(kMinSliceBytes);
  uint32_t window = 0;         // slices the worker keeps in flight to this reducer
  bool checksum = false;       // TALLY_CHECKSUM: slices and results carry a CRC32C
  // The communicator's epoch when this reducer joins it: 0 when the communicator forms, the
  // epoch of the Join otherwise (docs/failover.md). Every rank sends the same.
  uint32_t epoch = 0;
};

// The reducer's opening message.
struct Challenge {
  bool auth_required = false;  // the reducer has a job token and requires the worker's
  auth::Nonce nonce{};         // the reducer's nonce for this connection
};

// The worker's proof of the job token.
struct Answer {
  auth::Nonce nonce{};  // the worker's nonce for this connection
  auth::Mac mac{};      // JobToken::prove(kWorker, reducer nonce, worker nonce)
};

// The reducer's proof of the job token.
struct Proof {
  auth::Mac mac{};  // JobToken::prove(kReducer, reducer nonce, worker nonce)
};

struct Ready {
  CommId comm;
  uint32_t nranks = 0;
  uint32_t window = 0;  // the reducer's per-connection limit; the worker uses min(its own, this)
};
// Past its window a worker may have this many more slices in flight on a connection: the
// recovery slices it sends at once on a membership change (prompt, docs/failover.md, "Small
// calls"), which must pass slices waiting for a rank that is behind. A reducer buffers as many.
inline constexpr int kPromptSlices = 1;

// Reject, Error and Dismiss carry a reason only.
struct Reason {
  std::string text;
};

// What an Error from a reducer says has ended. kCommunicator: the communicator failed (ranks
// disagree, a checksum mismatch, a rank gave up, an internal error); every rank fails it.
// kReducer: this reducer can no longer serve it, because one member's connection ended without
// a word (a lost link or a lost worker) or a member dismissed it; the workers treat this reducer
// as lost (docs/failover.md), and a lost worker still fails the communicator, as every reducer
// says the same.
enum class ErrorScope : uint8_t { kCommunicator = 0, kReducer = 1 };

// Ack (worker -> reducer): every normal slice this worker sent the reducer for calls below
// `calls` has landed, and every recovery slice of epochs up to `recovery_epoch`.
// Commit (reducer -> worker): the smallest of every rank's Ack, field by field.
struct AckPoint {
  uint64_t calls = 0;
  uint32_t recovery_epoch = 0;
  bool operator==(const AckPoint&) const = default;
};

// The body of a failover message (docs/failover.md), carried in a Relay.
enum class ControlKind : uint8_t { kSuspect = 1, kPropose = 2, kReport = 3, kDecide = 4 };
enum class Change : uint8_t {
  kLost = 1,  // slot `slot` becomes empty
  kJoin = 2,  // the reducer at `address` fills slot `slot`
  kVoid = 3,  // (Decide) a join that did not happen: the epoch passes, nothing changes
  kFail = 4,  // (Decide) too few reducers are left: every rank fails with `reason`
};
inline constexpr size_t kMaxControlAddressBytes = 64;
inline constexpr size_t kMaxControlReasonBytes = 112;
struct Control {
  ControlKind kind = ControlKind::kSuspect;
  Change change = Change::kLost;
  uint32_t epoch = 0;  // the epoch proposed, reported on or decided (Suspect: the sender's)
  uint32_t slot = 0;
  // Report: the last Commit from the lost reducer, and the sender's next call number.
  // Decide (Lost): the largest of the reported commits, the boundary K (the largest next call)
  // and F, the smallest: every rank has posted every call below F.
  AckPoint commit;
  uint64_t next_call = 0;
  uint64_t first_call = 0;
  bool ok = true;  // Report of a Join: the sender has joined the new reducer
  std::string address;  // the reducer concerned, cut to kMaxControlAddressBytes
  std::string reason;   // why (Suspect, Propose, Decide, a failed Report), cut likewise
  bool operator==(const Control&) const = default;
};
const char* controlKindName(ControlKind k);
const char* changeName(Change c);

// A Relay: `from` is written by the reducer (the sender's rank in the communicator); a worker
// sends 0. `seal` is the sending rank's MAC over the relay (worker_client/relay_seal.h), which
// reducers carry untouched and cannot make: all zero when the job has no token.
inline constexpr size_t kRelaySealBytes = 16;
struct Relay {
  uint32_t from = 0;
  Control control;
  std::array<uint8_t, kRelaySealBytes> seal{};
};

// A Ping's token comes back in its Pong.
struct Ping {
  uint64_t token = 0;
};

// What a call computes. The values are the wire's.
enum class CollKind : uint8_t { kAllReduce = 0, kAllGather = 1, kReduceScatter = 2 };
const char* collKindName(CollKind k);

// A piece of one call (kSlice: worker -> reducer), or of its result (kResult): elements
// [offset, offset + count) of a call of total_count elements.
//
// All-reduce: the call is the buffer, and a piece is always a whole slice (protocol/slicing.h).
// All-gather and reduce-scatter: the call is a window of total_count elements starting at
// element window_offset of a vector of nranks x rank_count elements, rank r owning elements
// [r x rank_count, (r + 1) x rank_count). Offsets stay window-relative. A reduce-scatter input
// and an all-gather result are whole slices; an all-gather input is the slice's intersection
// with the sender's part and a reduce-scatter result the slice's intersection with the
// receiver's part (slicing.h's pieceOf), so they may be empty (count 0, no payload follows).
// Every rank still sends every slice and gets a result for every slice, so flow control and
// completion work as for all-reduce. All-gather moves bytes: type kUint8, op kSum.
struct SliceHeader {
  uint64_t seq = 0;          // the call's number within the communicator, from 0
  uint32_t slice = 0;        // slice index within the call
  CollKind kind = CollKind::kAllReduce;
  uint64_t offset = 0;       // first element of the piece
  uint64_t count = 0;        // elements in this piece, >= 1 for all-reduce
  uint64_t total_count = 0;  // elements of the whole call (the window)
  uint64_t rank_count = 0;     // all-gather, reduce-scatter: elements each rank owns; else 0
  uint64_t window_offset = 0;  // all-gather, reduce-scatter: where the window starts; else 0
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  uint32_t crc = 0;          // CRC32C of the payload when the communicator checksums, else 0
  // Carried along so that a stream of slices and results needs no Ack or Commit messages of its
  // own: in a Slice, the sender's Ack (as an Ack message says it); in a Result, a Commit for
  // its receiver. A point that raises nothing is ignored: {0, 0} carries nothing.
  AckPoint ack;

  size_t payloadBytes() const { return static_cast<size_t>(count) * dataTypeSize(type); }
};

// An encoded header, ready for isend. Self-contained (safe to copy or keep until the send is done).
struct Frame {
  std::array<uint8_t, kMaxHeaderBytes> bytes{};
  size_t size = 0;
  const uint8_t* data() const { return bytes.data(); }
};

Frame encodeHello(const Hello& m);
Frame encodeReady(const Ready& m);
Frame encodeReject(const Reason& m);  // text beyond kMaxReasonBytes is cut
Frame encodeSlice(const SliceHeader& m);
Frame encodeResult(const SliceHeader& m);
Frame encodeError(const Reason& m, ErrorScope scope = ErrorScope::kCommunicator);
Frame encodeAck(const AckPoint& m);
Frame encodeCommit(const AckPoint& m);
Frame encodePing(const Ping& m);
Frame encodePong(const Ping& m);
Frame encodeRelay(const Relay& m);
Frame encodeDismiss(const Reason& m);
Frame encodeBye();
Frame encodeChallenge(const Challenge& m);
Frame encodeAnswer(const Answer& m);
Frame encodeProof(const Proof& m);

// Checks the preamble (magic, version, known type, reserved byte) and that `size` is exactly the
// size of that type. On success writes *type.
Status peekType(const uint8_t* data, size_t size, MsgType* type);

// Each decode checks the preamble, the type, the size and every field.
Status decodeHello(const uint8_t* data, size_t size, Hello* out);
Status decodeReady(const uint8_t* data, size_t size, Ready* out);
Status decodeReject(const uint8_t* data, size_t size, Reason* out);
Status decodeSlice(const uint8_t* data, size_t size, SliceHeader* out);
Status decodeResult(const uint8_t* data, size_t size, SliceHeader* out);
// *scope (when non-null) says what ended (ErrorScope).
Status decodeError(const uint8_t* data, size_t size, Reason* out, ErrorScope* scope = nullptr);
Status decodeAck(const uint8_t* data, size_t size, AckPoint* out);
Status decodeCommit(const uint8_t* data, size_t size, AckPoint* out);
Status decodePing(const uint8_t* data, size_t size, Ping* out);
Status decodePong(const uint8_t* data, size_t size, Ping* out);
// Checks the kinds, the slot against kMaxReducers and the text lengths.
Status decodeRelay(const uint8_t* data, size_t size, Relay* out);
Status decodeDismiss(const uint8_t* data, size_t size, Reason* out);
// The byte offset of Relay::from in an encoded Relay, where a reducer stamps the sender.
inline constexpr size_t kRelayFromOffset = kPreambleBytes;
Status decodeBye(const uint8_t* data, size_t size);
Status decodeChallenge(const uint8_t* data, size_t size, Challenge* out);
Status decodeAnswer(const uint8_t* data, size_t size, Answer* out);
Status decodeProof(const uint8_t* data, size_t size, Proof* out);

// Field checks used by decodeSlice/decodeResult, exposed for the server and tests.
Status validateSlice(const SliceHeader& m);

// "call 7 slice 3 [offset 196608, count 65536 of 300000] float32 sum", for error messages;
// all-gather and reduce-scatter add the kind and the window.
std::string describeSlice(const SliceHeader& m);

}  // namespace tally::protocol::wire
