// SPDX-License-Identifier: Apache-2.0
// What a posted CollNet call is inside the client, shared by the client (coll_client.cc), its
// links (coll_link.cc, coll_raw_link.cc) and their books (ledger.h). Not a public interface.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/crc32c.h"
#include "common/status.h"
#include "common/types.h"
#include "protocol/slicing.h"
#include "protocol/wire.h"
#include "worker_client/coll_client.h"

namespace tally::worker_client {
namespace wire = protocol::wire;
using protocol::Span;

// Progress driven by the caller's own thread (TALLY_COLL_PROGRESS=poll): a request's test(), and
// a post that finds no room, run one non-blocking round of it.
class Poller {
 public:
  virtual ~Poller() = default;
  // Does what is ready now and returns; a no-op while another thread polls or once stopped.
  virtual void poll() = 0;
};

// State shared by the client, its links and its requests (which may outlive the client).
struct Shared {
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status error;  // set once, before `failed` turns true
  std::atomic<int> calls_in_flight{0};
  // Every call below this has all its slices queued on links or parked (published after
  // cutting, so an Ack never speaks for slices not yet cut), and the last epoch whose recovery
  // slices have all been queued (docs/failover.md): what a link may acknowledge.
  std::atomic<uint64_t> posted_through{0};
  std::atomic<uint32_t> applied_epoch{0};
  // Set by connect() before the first post, in poll mode only; kept alive by requests too.
  std::shared_ptr<Poller> poller;

  Status errorStatus() {
    std::lock_guard<std::mutex> lock(mu);
    return error;
  }
};

// What a call computes and where its buffers are.
struct CallSpec {
  const uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  uint64_t count = 0;  // elements of the call (all-gather, reduce-scatter: of the window)
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  wire::CollKind kind = wire::CollKind::kAllReduce;
  uint64_t rank_count = 0;     // all-gather, reduce-scatter: CollWindow::rank_count
  uint64_t window_offset = 0;  // all-gather, reduce-scatter: CollWindow::offset
  // The window-relative element that send[0] and recv[0] hold: 0, except for the side that
  // holds only this rank's part (all-gather's send, reduce-scatter's recv).
  uint64_t send_origin = 0;
  uint64_t recv_origin = 0;
};

// A call of at most this many bytes (the whole call, as every rank sees it alike) is done as soon
// as its results have landed, not when the reducers commit them: the client keeps a copy of its
// input until then, so the rank can still send it again if a reducer is lost, and it drops any
// result sent again (docs/failover.md, "Small calls"). A lone small call then pays no commit
// round trip; the copy costs less than that round trip up to about a bandwidth-delay product,
// and a large call's round trip is hidden by the calls in flight behind it. A rank that got such
// a result from a reducer that died before the others got theirs must not leave them behind: on
// the decision every rank sends those slices again at once (SliceTask::prompt).
inline constexpr size_t kEarlyDoneBytes = 128 * 1024;

// One posted call; records are reused (CollClientImpl::freeCallLocked).
struct Call final : CollCall, CallSpec {
  Status test(bool* done) override;

  std::shared_ptr<Shared> shared;
  uint64_t seq = 0;
  // Slices not done yet: not committed (ledger.h), or, for an early call, not landed.
  std::atomic<uint32_t> remaining{0};
  // Done at landing (kEarlyDoneBytes): every slice is sent from `copy`, this rank's input as it
  // was posted, held as long as the record (so until every slice is committed); the caller's
  // buffers may be reused once the call is done.
  bool early = false;
  std::vector<uint8_t> copy;  // kept across reuses of the record: no allocation once warm
  // Whether the send and receive buffers overlap: a result that lands there overwrites the
  // input, which can then not be sent again.
  bool inPlace() const;
};

// One slice of a call on its link: the piece this rank sends and the piece of the result it
// gets back (the same for all-reduce; either may be empty for all-gather and reduce-scatter,
// then only a header travels).
struct SliceTask {
  std::shared_ptr<Call> call;
  uint32_t slice = 0;
  Span send;  // window-relative elements
  Span recv;
  uint32_t epoch = 0;  // 0: a normal slice; else a recovery slice of that epoch (placement.h)
  // Sent again after its call was done at landing (an early call): its result is dropped, not
  // written into the receive buffer the caller has been given back.
  bool drop_result = false;
  // A recovery slice every rank sends on the decision of its epoch rather than at its boundary
  // (an early call's, docs/failover.md): it goes out ahead of queued slices and may take one
  // credit past the window, which the reducer keeps for it.
  bool prompt = false;
};

// Recovery slices in the order every rank sends them, whatever order its books held them in: by
// call, then slice.
inline void sortForSending(std::vector<SliceTask>* tasks) {
  std::sort(tasks->begin(), tasks->end(), [](const SliceTask& a, const SliceTask& b) {
    return a.call->seq != b.call->seq ? a.call->seq < b.call->seq : a.slice < b.slice;
  });
}

// What goes out for a slice: its header (with the payload's CRC32C when `crc` is given) and
// its payload, straight from the caller's send buffer (null and 0 for an empty piece).
struct OutgoingSlice {
  wire::SliceHeader header;
  const void* payload = nullptr;
  size_t bytes = 0;
};
inline OutgoingSlice outgoingSlice(const SliceTask& task, const crc32c::Crc32c* crc) {
  const Call& call = *task.call;
  const size_t elt = dataTypeSize(call.type);
  OutgoingSlice out;
  wire::SliceHeader& h = out.header;
  h.seq = call.seq;
  h.slice = task.slice;
  h.kind = call.kind;
  h.offset = task.send.offset;
  h.count = task.send.count;
  h.total_count = call.count;
  h.type = call.type;
  h.op = call.op;
  h.rank_count = call.rank_count;
  h.window_offset = call.window_offset;
  // Zero copy: the payload goes from the user's buffer (an early call's from its copy). Its
  // result can only come back (and be written over this range, when send == recv) after the
  // reducer has received all of it.
  out.bytes = task.send.count * elt;
  if (out.bytes > 0) {
    const uint8_t* base = call.early ? call.copy.data() : call.send;
    out.payload = base + (task.send.offset - call.send_origin) * elt;
    if (crc != nullptr) h.crc = crc->compute(out.payload, out.bytes);
  }
  return out;
}

// The steady clock in nanoseconds, for the links' progress timestamps.
inline int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace tally::worker_client
