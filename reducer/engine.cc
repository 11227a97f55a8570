// SPDX-License-Identifier: Apache-2.0
// The engine: collect every rank's input of a slice, reduce in rank order, answer every rank,
// all on the threads that receive the inputs.
//
// Each (communicator, slice index) stream is hashed to one shard. A shard's lock guards its
// pending slices only while an input is filed; reducing and answering happen after it is
// dropped.
//
// Reduce as the inputs arrive. Where folding one input at a time gives the same bits as reducing
// all at once (every type but the narrow floats, which reduce() rounds once at the end), the
// inputs of an all-reduce or reduce-scatter slice are folded into rank 0's buffer in rank order
// as soon as the ranks before them are in: the thread that files an input which extends that
// prefix folds it (and whatever the prefix reaches meanwhile) without the lock, and frees each
// folded buffer at once. So when the last input lands only it remains to be reduced, and a slice
// holds about two inputs' memory rather than nranks'. One thread folds a slice at a time
// (Pending::folding); a slice dropped meanwhile (mismatch, failed communicator) is only marked,
// and the folder frees it. The narrow floats and all-gather slices are combined when complete, as
// before.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <exception>
#include <map>
#include <stdexcept>
#include <tuple>

#include "common/log.h"
#include "common/small_pool.h"
#include "kernels/kernels_many.h"
#include "reducer/server_internal.h"

namespace tally::reducer::server {
namespace wire = protocol::wire;
using protocol::pieceOf;
using protocol::Span;

namespace {

struct Key {
  const Communicator* comm;
  uint64_t seq;
  uint32_t slice;
  bool operator<(const Key& o) const {
    return std::tie(comm, seq, slice) < std::tie(o.comm, o.seq, o.slice);
  }
};

// The inputs gathered so far for one (communicator, call, slice).
struct Pending {
  std::shared_ptr<Communicator> comm;
  wire::SliceHeader header;  // from the first rank that sent it
  Span slice;                // the whole slice (an all-gather input is only part of it)
  int first_rank = 0;
  // When the earliest of its inputs arrived (payload received).
  std::chrono::steady_clock::time_point first_arrival;
  // By rank. Pooled, like the map node holding them: no heap use per slice (up to
  // small_pool::kMaxBytes of pointers, i.e. 64 ranks).
  // Inputs by rank; an empty all-gather piece has a null buffer, so peers[r] (non-null once
  // rank r's input came) says who sent.
  std::vector<Buffer, PoolAllocator<Buffer>> inputs;
  std::vector<std::shared_ptr<Member>, PoolAllocator<std::shared_ptr<Member>>> peers;
  uint32_t have = 0;
  // Reduce as the inputs arrive (foldsOnArrival): ranks [0, folded) are summed into inputs[0],
  // whose owner is the thread with `folding` set; `dropped`: it was dropped meanwhile.
  bool folds = false;
  uint32_t folded = 0;
  bool folding = false;
  bool dropped = false;
};

// Whether folding one input at a time gives the bits of reducing them all at once: reduce() is
// left to right, and rounds each step, except for the narrow floats (widened, rounded once).
bool foldsOnArrival(const wire::SliceHeader& h, uint32_t nranks) {
  if (h.kind == wire::CollKind::kAllGather || nranks < 3) return false;
  switch (h.type) {
    case DataType::kFloat16:
    case DataType::kBfloat16:
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2:
      return false;
    default:
      return true;
  }
}

// The first rank past the folded prefix whose input is not in yet (nranks: all are).
uint32_t prefixEnd(const Pending& p) {
  uint32_t end = p.folded;
  while (end < p.peers.size() && p.peers[end]) ++end;
  return end;
}

// Every rank must send the same call. Pieces of one all-gather slice differ by sender (the
// receiving Peer checked each against the slice), so only the call's fields are compared.
bool sameCall(const wire::SliceHeader& a, const wire::SliceHeader& b) {
  const bool same_piece =
      a.kind == wire::CollKind::kAllGather || (a.offset == b.offset && a.count == b.count);
  return same_piece && a.kind == b.kind && a.total_count == b.total_count && a.type == b.type &&
         a.op == b.op && a.rank_count == b.rank_count && a.window_offset == b.window_offset;
}

void releaseAll(Pending* p) {
  for (size_t r = 0; r < p->peers.size(); ++r) {
    p->inputs[r].reset();
    if (p->peers[r]) {
      p->peers[r]->releaseCredit();
      p->peers[r].reset();
    }
  }
}

}  // namespace

using PendingMap =
    std::map<Key, Pending, std::less<Key>, PoolAllocator<std::pair<const Key, Pending>>>;

struct Engine::Shard {
  ServerObserver* observer = nullptr;
  std::shared_ptr<BufferPool> pool;
  std::mutex mu;
  PendingMap pending;  // guarded by mu

  // Files `in` (mu held). Returns the node of a slice that is now complete, taken out of the
  // map; *fail_reason is set when the input contradicts what other ranks sent, or its slice
  // lacks the input of a rank that said Bye (the slice is then dropped, and the caller fails the
  // communicator after unlocking). *fold: a slice this thread now folds (foldLoop), its
  // `folding` set.
  PendingMap::node_type fileLocked(SliceInput in, std::string* fail_reason,
                                   PendingMap::iterator* fold);
  // Folds the slice's arrived prefix until nothing more is in; returns its node once every rank
  // is folded. Takes mu for the bookkeeping only.
  PendingMap::node_type foldLoop(PendingMap::iterator it);
  // Drops a slice (mu held): frees it, or marks it for its folder.
  void dropLocked(PendingMap::iterator it, PendingMap* into);
  void complete(Pending* p);
  // The slice's result: the inputs reduced in rank order (all-reduce, reduce-scatter) or the
  // pieces put in place (all-gather).
  Buffer combine(Pending* p);
};

PendingMap::node_type Engine::Shard::fileLocked(SliceInput in, std::string* fail_reason,
                                                PendingMap::iterator* fold) {
  Communicator& comm = *in.comm;
  if (comm.failed()) {
    in.data.reset();
    in.peer->releaseCredit();
    return {};
  }
  const Key key{&comm, in.header.seq, in.header.slice};
  auto [it, fresh] = pending.try_emplace(key);
  Pending& p = it->second;
  if (fresh) {
    p.comm = in.comm;
    p.header = in.header;
    p.slice = comm.sliceOf(in.header);
    p.first_rank = in.rank;
    p.first_arrival = in.arrived;
    p.inputs.resize(comm.nranks);
    p.peers.resize(comm.nranks);
    p.folds = foldsOnArrival(in.header, comm.nranks);
  } else if (p.dropped) {
    // Its communicator failed while the slice was being folded: the folder frees it.
    in.data.reset();
    in.peer->releaseCredit();
    return {};
  } else if (!sameCall(p.header, in.header) || p.peers[in.rank]) {
    // Ranks must issue the same calls in the same order. Say who sent what.
    *fail_reason = p.peers[in.rank]
                       ? "rank " + std::to_string(in.rank) + " sent " +
                             wire::describeSlice(in.header) + " twice"
                       : "ranks disagree: rank " + std::to_string(p.first_rank) + " sent " +
                             wire::describeSlice(p.header) + ", rank " + std::to_string(in.rank) +
                             " sent " + wire::describeSlice(in.header);
    in.data.reset();
    in.peer->releaseCredit();
    PendingMap freed;
    dropLocked(it, &freed);
    for (auto& [dropped_key, q] : freed) releaseAll(&q);
    observer->error(ServerError::kMismatch);
    return {};
  }
  if (comm.anyLeft()) {
    // A rank that said Bye sends no more inputs: a slice without its input can never complete,
    // and its call fails now rather than at every other rank's timeout (leave() checks the
    // slices filed before the Bye).
    for (uint32_t r = 0; r < comm.nranks; ++r) {
      if (r == static_cast<uint32_t>(in.rank) || p.peers[r] || !comm.left(r)) continue;
      *fail_reason = comm.leftReason(r) + ": " + wire::describeSlice(in.header) + " from rank " +
                     std::to_string(in.rank) + " waits for its input";
      in.data.reset();
      in.peer->releaseCredit();
      PendingMap freed;
      dropLocked(it, &freed);
      for (auto& [dropped_key, q] : freed) releaseAll(&q);
      return {};
    }
  }
  // Inputs are stamped before they are filed, so a later stamp can be filed first.
  p.first_arrival = std::min(p.first_arrival, in.arrived);
  p.inputs[in.rank] = std::move(in.data);
  p.peers[in.rank] = std::move(in.peer);
  ++p.have;
  if (p.folds) {
    // This input extends the folded prefix, and nobody folds: this thread does.
    if (!p.folding && static_cast<uint32_t>(in.rank) < prefixEnd(p) &&
        static_cast<uint32_t>(in.rank) >= p.folded) {
      p.folding = true;
      *fold = it;
    }
    return {};
  }
  if (p.have < comm.nranks) return {};
  return pending.extract(it);
}

void Engine::Shard::dropLocked(PendingMap::iterator it, PendingMap* into) {
  if (it->second.folding) {
    it->second.dropped = true;  // its folder frees it
    return;
  }
  into->insert(pending.extract(it));
}

PendingMap::node_type Engine::Shard::foldLoop(PendingMap::iterator it) {
  Pending& p = it->second;
  const size_t n = p.peers.size();
  // Per thread: several threads may fold slices of one shard at once.
  thread_local std::vector<const void*> srcs;
  for (;;) {
    uint32_t from;
    uint32_t to;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (p.dropped) {
        releaseAll(&p);
        pending.erase(it);
        return {};
      }
      // Rank 0's buffer is the accumulator: it needs no folding of its own.
      if (p.folded == 0 && p.peers[0]) p.folded = 1;
      from = p.folded;
      to = prefixEnd(p);
      if (from == to) {
        p.folding = false;
        if (p.folded == n) return pending.extract(it);
        return {};
      }
    }
    // Inputs [from, to) are in and, like the accumulator, only this thread touches them now.
    srcs.resize(1 + (to - from));
    srcs[0] = p.inputs[0]->data();
    for (uint32_t r = from; r < to; ++r) srcs[1 + (r - from)] = p.inputs[r]->data();
    reduceMany(p.header.type, p.header.op, p.inputs[0]->data(), srcs.data(),
               static_cast<int>(srcs.size()), p.slice.count);
    std::lock_guard<std::mutex> lock(mu);
    for (uint32_t r = from; r < to; ++r) p.inputs[r].reset();
    p.folded = to;
  }
}

Buffer Engine::Shard::combine(Pending* p) {
  const wire::SliceHeader& h = p->header;
  const uint32_t n = p->comm->nranks;
  if (p->folds) return std::move(p->inputs[0]);  // folded as the inputs came (foldLoop)
  if (h.kind == wire::CollKind::kAllGather) {
    // Each byte of the slice belongs to one rank's part: copy every piece into place.
    const size_t bytes = p->slice.count * dataTypeSize(h.type);
    Buffer out = pool->get(bytes);
    size_t placed = 0;
    for (uint32_t r = 0; r < n; ++r) {
      const Span piece = pieceOf(p->slice, p->comm->partOf(h, r));
      if (piece.count == 0) continue;
      std::memcpy(out->data() + (piece.offset - p->slice.offset), p->inputs[r]->data(),
                  piece.count);
      placed += piece.count;
    }
    if (placed != bytes) throw std::logic_error("all-gather pieces do not cover their slice");
    for (uint32_t r = 0; r < n; ++r) p->inputs[r].reset();
    return out;
  }
  // Per thread: several threads may complete slices of one shard at once.
  thread_local std::vector<const void*> srcs;
  srcs.resize(n);
  for (uint32_t r = 0; r < n; ++r) srcs[r] = p->inputs[r]->data();
  // In rank order whatever order the inputs came in, so every run gives the same bits. The sum
  // lands in rank 0's buffer, which becomes the result all ranks receive.
  if (n > 1) {
    reduceMany(h.type, h.op, p->inputs[0]->data(), srcs.data(), static_cast<int>(n),
               p->slice.count);
  }
  Buffer result = std::move(p->inputs[0]);
  for (uint32_t r = 1; r < n; ++r) p->inputs[r].reset();
  return result;
}

void Engine::Shard::complete(Pending* p) {
  const wire::SliceHeader& h = p->header;
  const uint32_t n = p->comm->nranks;
  const size_t elt = dataTypeSize(h.type);
  Buffer result = combine(p);
  // Before the results go out, so a worker holding its result finds the slice counted.
  observer->sliceReduced(static_cast<uint64_t>(p->slice.count * elt) * n,
                         std::chrono::steady_clock::now() - p->first_arrival);
  wire::SliceHeader result_header = h;
  result_header.offset = p->slice.offset;
  result_header.count = p->slice.count;
  result_header.ack = wire::AckPoint{};  // h carried its sender's Ack; a result carries Commits
  const bool scatter = h.kind == wire::CollKind::kReduceScatter;
  // Once for all ranks; a reduce-scatter's pieces get their own below.
  if (!scatter) result_header.crc = p->comm->resultCrc(result->data(), p->slice.count * elt);
  // The Commit each rank is owed goes along with its result (failover.cc, sliceCompleted).
  thread_local std::vector<wire::AckPoint> commits;
  commits.resize(n);
  p->comm->sliceCompleted(commits.data());
  for (uint32_t r = 0; r < n; ++r) {
    OutMsg m;
    Span piece = p->slice;
    wire::SliceHeader mine = result_header;
    mine.ack = commits[r];
    if (scatter) {
      // Each rank gets only its own part of the sum: maybe nothing, then the bare header.
      piece = pieceOf(p->slice, p->comm->partOf(h, r));
      mine.offset = piece.offset;
      mine.count = piece.count;
      mine.crc = piece.count == 0
                     ? 0
                     : p->comm->resultCrc(result->data() + (piece.offset - p->slice.offset) * elt,
                                          piece.count * elt);
    }
    m.header = wire::encodeResult(mine);
    if (piece.count > 0) {
      m.payload = result;
      m.payload_offset = (piece.offset - p->slice.offset) * elt;
      m.payload_bytes = piece.count * elt;
    }
    m.releases_credit = true;
    p->peers[r]->send(std::move(m));
  }
  TALLY_TRACE(log::kColl, "reducer: %s reduced for %s", wire::describeSlice(h).c_str(),
              p->comm->id.toString().c_str());
}

Engine::Engine(int shards, size_t pool_cache_bytes, ServerObserver* observer) {
  const size_t per_shard = pool_cache_bytes / static_cast<size_t>(shards);
  for (int i = 0; i < shards; ++i) {
    auto s = std::make_unique<Shard>();
    s->observer = observer;
    s->pool = BufferPool::create(per_shard);
    shards_.push_back(std::move(s));
  }
}

Engine::~Engine() { stop(); }

void Engine::stop() {
  for (auto& s : shards_) {
    PendingMap dropped;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      for (auto it = s->pending.begin(); it != s->pending.end();) {
        auto next = std::next(it);
        s->dropLocked(it, &dropped);
        it = next;
      }
    }
    for (auto& [key, p] : dropped) releaseAll(&p);
  }
}

void Engine::submit(int shard, SliceInput in) {
  Shard& s = *shards_[shard];
  std::shared_ptr<Communicator> comm = in.comm;
  std::string fail_reason;
  try {
    PendingMap::node_type done;
    PendingMap::iterator fold = s.pending.end();
    bool folds = false;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      done = s.fileLocked(std::move(in), &fail_reason, &fold);
      folds = fold != s.pending.end();
    }
    if (folds) done = s.foldLoop(fold);
    if (done) s.complete(&done.mapped());
  } catch (const std::exception& e) {
    // Allocation failure or a broken invariant: fail what we can name, keep serving others.
    s.observer->error(ServerError::kInternal);
    fail_reason = std::string("reducer internal error: ") + e.what();
  }
  if (!fail_reason.empty()) comm->fail(fail_reason);
}

int Engine::shardOf(const wire::CommId& comm, uint32_t slice) const {
  const uint64_t h = wire::CommIdHash()(comm) + slice;
  return static_cast<int>(h % shards_.size());
}

BufferPool& Engine::pool(int shard) { return *shards_[shard]->pool; }

bool Engine::awaits(const Communicator& comm, uint32_t rank, wire::SliceHeader* slice) {
  for (auto& s : shards_) {
    std::lock_guard<std::mutex> lock(s->mu);
    for (auto it = s->pending.lower_bound(Key{&comm, 0, 0});
         it != s->pending.end() && it->first.comm == &comm; ++it) {
      const Pending& p = it->second;
      if (p.dropped || p.peers[rank]) continue;
      *slice = p.header;
      return true;
    }
  }
  return false;
}

void Engine::dropCommunicator(const std::shared_ptr<Communicator>& comm) {
  const Communicator* key = comm.get();
  for (auto& s : shards_) {
    PendingMap dropped;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      auto it = s->pending.lower_bound(Key{key, 0, 0});
      while (it != s->pending.end() && it->first.comm == key) {
        auto next = std::next(it);
        s->dropLocked(it, &dropped);
        it = next;
      }
    }
    for (auto& [k, p] : dropped) releaseAll(&p);
  }
}

}  // namespace tally::reducer::server
