// The engine: collect every rank's input of a slice, reduce in rank order, answer every rank,
// all on the thread that received the last input.
//
// Each (communicator, slice index) stream is hashed to one shard. A shard's lock guards its
// pending slices only while an input is filed; the slice that became complete is taken out of
// the map, and reduced and answered after the lock is dropped.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <stdexcept>
#include <exception>
#include <map>
#include <tuple>

#include "common/log.h"
#include "common/small_pool.h"
#include "reducer/kernels_many.h"
#include "reducer/server_internal.h"

namespace tally::reducer::server {
namespace {

struct Key {
  const Comm* comm;
  uint64_t seq;
  uint32_t slice;
  bool operator<(const Key& o) const {
    return std::tie(comm, seq, slice) < std::tie(o.comm, o.seq, o.slice);
  }
};

// The inputs gathered so far for one (communicator, call, slice).
struct Pending {
  std::shared_ptr<Comm> comm;
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
};

// Every rank must send the same call. Pieces of one all-gather slice differ by sender (the
// receiving Peer checked each against the slice), so only the call's fields are compared.
bool sameCall(const wire::SliceHeader& a, const wire::SliceHeader& b) {
  const bool same_piece = a.kind == wire::CollKind::kAllGather ||
                          (a.offset == b.offset && a.count == b.count);
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
  // map; *fail_reason is set when the input contradicts what other ranks sent (the slice is then
  // dropped, and the caller fails the communicator after unlocking).
  PendingMap::node_type fileLocked(SliceInput in, std::string* fail_reason);
  void complete(Pending* p);
  // The slice's result: the inputs reduced in rank order (all-reduce, reduce-scatter) or the
  // pieces put in place (all-gather).
  Buffer combine(Pending* p);
};

PendingMap::node_type Engine::Shard::fileLocked(SliceInput in, std::string* fail_reason) {
  Comm& comm = *in.comm;
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
  } else if (!sameCall(p.header, in.header) || p.peers[in.rank]) {
    // Ranks must issue the same calls in the same order. Say who sent what.
    *fail_reason =
        p.peers[in.rank]
            ? "rank " + std::to_string(in.rank) + " sent " + wire::describeSlice(in.header) +
                  " twice"
            : "ranks disagree: rank " + std::to_string(p.first_rank) + " sent " +
                  wire::describeSlice(p.header) + ", rank " + std::to_string(in.rank) + " sent " +
                  wire::describeSlice(in.header);
    in.data.reset();
    in.peer->releaseCredit();
    releaseAll(&p);
    pending.erase(it);
    observer->error(ServerError::kMismatch);
    return {};
  }
  // Inputs are stamped before they are filed, so a later stamp can be filed first.
  p.first_arrival = std::min(p.first_arrival, in.arrived);
  p.inputs[in.rank] = std::move(in.data);
  p.peers[in.rank] = std::move(in.peer);
  if (++p.have < comm.nranks) return {};
  return pending.extract(it);
}

Buffer Engine::Shard::combine(Pending* p) {
  const wire::SliceHeader& h = p->header;
  const uint32_t n = p->comm->nranks;
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
  const bool scatter = h.kind == wire::CollKind::kReduceScatter;
  // Once for all ranks; a reduce-scatter's pieces get their own below.
  if (!scatter) result_header.crc = p->comm->resultCrc(result->data(), p->slice.count * elt);
  wire::Frame frame = wire::encodeResult(result_header);
  for (uint32_t r = 0; r < n; ++r) {
    OutMsg m;
    Span piece = p->slice;
    if (scatter) {
      // Each rank gets only its own part of the sum: maybe nothing, then the bare header.
      piece = pieceOf(p->slice, p->comm->partOf(h, r));
      wire::SliceHeader mine = result_header;
      mine.offset = piece.offset;
      mine.count = piece.count;
      mine.crc = piece.count == 0 ? 0
                                  : p->comm->resultCrc(
                                        result->data() + (piece.offset - p->slice.offset) * elt,
                                        piece.count * elt);
      frame = wire::encodeResult(mine);
    }
    m.header = frame;
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
      dropped.swap(s->pending);
    }
    for (auto& [key, p] : dropped) releaseAll(&p);
  }
}

void Engine::submit(int shard, SliceInput in) {
  Shard& s = *shards_[shard];
  std::shared_ptr<Comm> comm = in.comm;
  std::string fail_reason;
  try {
    PendingMap::node_type done;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      done = s.fileLocked(std::move(in), &fail_reason);
    }
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

void Engine::dropComm(const std::shared_ptr<Comm>& comm) {
  const Comm* key = comm.get();
  for (auto& s : shards_) {
    PendingMap dropped;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      auto it = s->pending.lower_bound(Key{key, 0, 0});
      while (it != s->pending.end() && it->first.comm == key) {
        auto next = std::next(it);
        dropped.insert(s->pending.extract(it));
        it = next;
      }
    }
    for (auto& [k, p] : dropped) releaseAll(&p);
  }
}

}  // namespace tally::reducer::server
