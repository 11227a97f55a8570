// SPDX-License-Identifier: Apache-2.0
#include "tools/driver/coll_driver.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>

#include "tools/driver/reference.h"

namespace tally::driver {
namespace {

using Clock = std::chrono::steady_clock;

// Backs off politely when nothing progressed: on a small machine the reducers and the plugin's
// threads need the CPU a spinning driver would take.
class IdleBackoff {
 public:
  void progressed() { idle_ = 0; }
  void idle() {
    if (++idle_ < 64) {
      sched_yield();
    } else {
      ::usleep(20);
    }
  }

 private:
  int idle_ = 0;
};

int64_t msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max<int64_t>(0, left.count());
}

}  // namespace

Status CollComm::create(CollNetApi* api, Store* store, const std::string& name, int rank,
                        int nranks, const CollCommOptions& options,
                        std::unique_ptr<CollComm>* out) {
  if (rank < 0 || rank >= nranks) return Status::internal("rank out of range");
  if (options.max_inflight < 1 || options.call_bytes == 0 || options.nchannels < 1) {
    return Status::internal("bad CollCommOptions");
  }
  std::unique_ptr<CollComm> comm(new CollComm(api, rank, nranks, options));
  Status s = comm->setup(store, name);
  if (!s.isOk()) {
    (void)comm->close();
    return s;
  }
  *out = std::move(comm);
  return Status::ok();
}

Status CollComm::setup(Store* store, const std::string& name) {
  uint64_t comm_id = options_.comm_id != 0 ? options_.comm_id : hashBytes(name.data(), name.size());
  TALLY_RETURN_IF_ERROR(ncclStatus(api_->init(comm_id, &ctx_), "collnet init"));
  if (ctx_ == nullptr) return Status::internal("collnet init returned a NULL ctx");

  int ndev = 0;
  TALLY_RETURN_IF_ERROR(ncclStatus(api_->devices(&ndev), "collnet devices"));
  if (options_.dev >= ndev) {
    return Status::invalidUsage("collnet reports " + std::to_string(ndev) +
                                " devices (is TALLY_REDUCERS set?)");
  }
  TALLY_RETURN_IF_ERROR(
      ncclStatus(api_->getProperties(options_.dev, &props_), "collnet getProperties"));

  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen_comm = nullptr;
  TALLY_RETURN_IF_ERROR(
      ncclStatus(api_->listen(ctx_, options_.dev, handle, &listen_comm), "collnet listen"));
  if (listen_comm == nullptr) return Status::internal("collnet listen returned a NULL listenComm");

  // NCCL's bootstrap all-gather of the handles, here through the store.
  Status s = store->set(name + "/handle/" + std::to_string(rank_),
                        std::string_view(handle, sizeof(handle)));
  std::vector<std::string> all(static_cast<size_t>(nranks_));
  // One deadline for the whole gather, not timeout_ms per rank.
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  for (int r = 0; r < nranks_ && s.isOk(); ++r) {
    s = store->get(name + "/handle/" + std::to_string(r), &all[static_cast<size_t>(r)],
                   msLeft(deadline));
    if (s.isOk() && all[static_cast<size_t>(r)].size() != NCCL_NET_HANDLE_MAXSIZE) {
      s = Status::internal("handle of rank " + std::to_string(r) + " has the wrong size");
    }
  }
  if (!s.isOk()) {
    (void)api_->closeListen(listen_comm);
    return s;
  }
  std::vector<void*> handles;
  for (auto& h : all) handles.push_back(h.data());

  // Called once, no retry loop: CollNet connect blocks until the group has formed. On failure
  // NCCL drops the listenComm without closing it; a driver is allowed to be tidier.
  ncclResult_t r = api_->connect(handles.data(), nranks_, rank_, listen_comm, &coll_comm_);
  if (r != ncclSuccess || coll_comm_ == nullptr) {
    (void)api_->closeListen(listen_comm);
    coll_comm_ = nullptr;
    if (r == ncclSuccess) return Status::internal("collnet connect returned a NULL collComm");
    return ncclStatus(r, "collnet connect");
  }
  TALLY_RETURN_IF_ERROR(ncclStatus(api_->closeListen(listen_comm), "collnet closeListen"));

  // One shared region, registered by every channel's send and receive connector.
  slot_bytes_ = options_.call_bytes;
  half_bytes_ = slot_bytes_ * static_cast<size_t>(options_.max_inflight);
  region_.assign(2 * half_bytes_, 0);
  for (int i = 0; i < 2 * options_.nchannels; ++i) {
    void* mh = nullptr;
    TALLY_RETURN_IF_ERROR(
        ncclStatus(api_->regMr(coll_comm_, region_.data(), region_.size(), NCCL_PTR_HOST, &mh),
                   "collnet regMr"));
    mhandles_.push_back(mh);
  }

  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      int supported = 0;
      TALLY_RETURN_IF_ERROR(ncclStatus(api_->reduceSupport(static_cast<ncclDataType_t>(t),
                                                           static_cast<ncclRedOp_t>(o), &supported),
                                       "collnet reduceSupport"));
      support_[t][o] = supported != 0;
    }
  }
  return Status::ok();
}

bool CollComm::supported(DataType type, ReduceOp op) const {
  return support_[static_cast<int>(type)][static_cast<int>(op)];
}

Status CollComm::pipeline(const char* what, size_t npieces, const PostFn& post,
                          const FinishFn& finish) {
  if (closed_ || coll_comm_ == nullptr) {
    return Status::internal(std::string(what) + " on a closed CollComm");
  }
  const size_t slots = static_cast<size_t>(options_.max_inflight);
  struct InFlight {
    void* request;
    size_t piece;
  };
  std::deque<InFlight> inflight;
  size_t issued = 0;
  size_t completed = 0;
  size_t staged = SIZE_MAX;  // piece whose input already sits in its slot
  IdleBackoff backoff;
  auto last_progress = Clock::now();
  while (completed < npieces) {
    bool progressed = false;
    bool retry_post = false;
    // Post: a slot is free once the piece `slots` before it completed (completion is in order).
    while (inflight.size() < slots && issued < npieces) {
      const size_t slot = issued % slots;
      void* request = nullptr;
      TALLY_RETURN_IF_ERROR(
          post(issued, slotOf(true, slot), slotOf(false, slot), staged != issued, &request));
      staged = issued;
      if (request == nullptr) {  // no room now: NCCL calls again later
        ++stats_.null_requests;
        retry_post = true;
        break;
      }
      ++stats_.calls;
      inflight.push_back({request, issued});
      ++issued;
      progressed = true;
    }
    // Test oldest first; take every completed call at the front. As NCCL's send proxy does, only
    // when there is nothing to post: a NULL post is retried before anything is tested, so a
    // plugin must make room without waiting for a test.
    while (!retry_post && !inflight.empty()) {
      int done = 0;
      int size = -1;
      TALLY_RETURN_IF_ERROR(ncclStatus(api_->test(inflight.front().request, &done, &size),
                                       std::string("collnet test of ") + what));
      if (!done) break;
      const size_t piece = inflight.front().piece;
      TALLY_RETURN_IF_ERROR(finish(piece, slotOf(false, piece % slots), size));
      inflight.pop_front();
      ++completed;
      progressed = true;
    }
    if (progressed) {
      backoff.progressed();
      last_progress = Clock::now();
    } else {
      if (Clock::now() - last_progress > std::chrono::milliseconds(options_.timeout_ms)) {
        return Status::timeout(std::string("collnet ") + what + " made no progress for " +
                               std::to_string(options_.timeout_ms) + " ms (" +
                               std::to_string(completed) + "/" + std::to_string(npieces) +
                               " calls done)");
      }
      backoff.idle();
    }
  }
  return Status::ok();
}

char* CollComm::slotOf(bool send, size_t slot) {
  return region_.data() + (send ? 0 : half_bytes_) + slot * slot_bytes_;
}

Status CollComm::setCallShape(size_t call_bytes, size_t whole_chunk_bytes) {
  if (call_bytes == 0 || call_bytes > slot_bytes_) {
    return Status::invalidUsage("calls of " + std::to_string(call_bytes) +
                                " bytes do not fit the region's slots of " +
                                std::to_string(slot_bytes_));
  }
  options_.call_bytes = call_bytes;
  options_.whole_chunk_bytes = whole_chunk_bytes;
  return Status::ok();
}

Status CollComm::allreduce(const void* src, void* dst, size_t count, DataType type, ReduceOp op) {
  const size_t esize = dataTypeSize(type);
  const size_t call_elems = options_.call_bytes / esize;
  if (call_elems == 0) return Status::internal("call_bytes is smaller than one element");
  const size_t npieces = (count + call_elems - 1) / call_elems;
  // Elements passed to iallreduce for a piece of n: with whole_chunk_bytes, rounded up to whole
  // chunks like NCCL's non-registered calls, so the tail reduces stale bytes nobody reads.
  auto posted = [&](size_t n) {
    if (options_.whole_chunk_bytes == 0) return n;
    size_t chunk = std::max<size_t>(1, options_.whole_chunk_bytes / esize);
    return std::min(call_elems, (n + chunk - 1) / chunk * chunk);
  };
  auto elems = [&](size_t piece) { return std::min(call_elems, count - piece * call_elems); };
  // The send connector of channel 0 and the receive connector of channel 0, as NCCL passes them.
  void* send_mh = mhandles_[0];
  void* recv_mh = mhandles_[1];
  const auto* in = static_cast<const char*>(src);
  auto* out = static_cast<char*>(dst);
  auto post = [&](size_t piece, char* sbuf, char* rbuf, bool stage, void** request) {
    const size_t n = elems(piece);
    if (stage) std::memcpy(sbuf, in + piece * call_elems * esize, n * esize);
    return ncclStatus(
        api_->iallreduce(coll_comm_, sbuf, rbuf, posted(n), static_cast<ncclDataType_t>(type),
                         static_cast<ncclRedOp_t>(op), send_mh, recv_mh, request),
        "collnet iallreduce");
  };
  auto finish = [&](size_t piece, const char* rbuf, int size) {
    const size_t n = elems(piece);
    if (size >= 0 && static_cast<size_t>(size) != posted(n) * esize) {
      return Status::internal("collnet test reported " + std::to_string(size) +
                              " bytes, expected " + std::to_string(posted(n) * esize));
    }
    std::memcpy(out + piece * call_elems * esize, rbuf, n * esize);
    return Status::ok();
  };
  return pipeline("allreduce", npieces, post, finish);
}

namespace {

// [begin, end) of a global vector, in bytes.
struct ByteRange {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end > begin ? end - begin : 0; }
};

// NCCL's CollNetDirect walk: windows of `width` bytes march over the global vector of nranks
// parts of bytes_per_rank; `mine` is the caller's part.
struct WindowWalk {
  WindowWalk(size_t bytes_per_rank, int nranks, int rank, size_t window_bytes)
      : total(bytes_per_rank * static_cast<size_t>(nranks)),
        width(window_bytes),
        windows((total + window_bytes - 1) / window_bytes),
        mine{static_cast<size_t>(rank) * bytes_per_rank,
             static_cast<size_t>(rank + 1) * bytes_per_rank} {}
  ByteRange window(size_t i) const {
    return ByteRange{i * width, std::min(total, (i + 1) * width)};
  }
  // The caller's bytes of window i (empty when the window misses its part).
  ByteRange mineIn(size_t i) const {
    const ByteRange w = window(i);
    return ByteRange{std::max(w.begin, mine.begin), std::min(w.end, mine.end)};
  }
  size_t total;
  size_t width;
  size_t windows;
  ByteRange mine;
};

}  // namespace

Status CollComm::allgather(const void* src, void* dst, size_t bytes_per_rank) {
  // NCCL's non-registered CollNetDirect all-gather: each window sends this rank's bytes of it from
  // the send half and receives the whole window into the receive half.
  const WindowWalk walk(bytes_per_rank, nranks_, rank_, options_.call_bytes);
  const auto* in = static_cast<const char*>(src);
  auto* out = static_cast<char*>(dst);
  auto post = [&](size_t i, char* sbuf, char* rbuf, bool stage, void** request) {
    const ByteRange w = walk.window(i);
    const ByteRange mine = walk.mineIn(i);
    if (stage && mine.size() > 0) {
      std::memcpy(sbuf, in + (mine.begin - walk.mine.begin), mine.size());
    }
    CollSge part{mhandles_[1], rbuf, w.size()};
    return ncclStatus(api_->iallgather(coll_comm_, sbuf, 1, &part, bytes_per_rank, w.begin,
                                       w.size(), mhandles_[0], request),
                      "collnet iallgather");
  };
  auto finish = [&](size_t i, const char* rbuf, int /*size*/) {
    const ByteRange w = walk.window(i);
    std::memcpy(out + w.begin, rbuf, w.size());
    return Status::ok();
  };
  return pipeline("allgather", walk.windows, post, finish);
}

Status CollComm::reducescatter(const void* src, void* dst, size_t count, DataType type,
                               ReduceOp op) {
  // NCCL's non-registered CollNetDirect reduce-scatter: windows of whole elements; each sends this
  // rank's input for the whole window and receives the reduction of its own part of the window
  // (often nothing).
  const size_t esize = dataTypeSize(type);
  const size_t width = options_.call_bytes / esize * esize;
  if (width == 0) return Status::internal("call_bytes is smaller than one element");
  const size_t bytes_per_rank = count * esize;
  const WindowWalk walk(bytes_per_rank, nranks_, rank_, width);
  const auto* in = static_cast<const char*>(src);
  auto* out = static_cast<char*>(dst);
  auto post = [&](size_t i, char* sbuf, char* rbuf, bool stage, void** request) {
    const ByteRange w = walk.window(i);
    if (stage) std::memcpy(sbuf, in + w.begin, w.size());
    CollSge part{mhandles_[0], sbuf, w.size()};
    return ncclStatus(api_->ireducescatter(coll_comm_, 1, &part, rbuf, bytes_per_rank, w.begin,
                                           w.size(), static_cast<ncclDataType_t>(type),
                                           static_cast<ncclRedOp_t>(op), mhandles_[1], request),
                      "collnet ireducescatter");
  };
  auto finish = [&](size_t i, const char* rbuf, int size) {
    const ByteRange mine = walk.mineIn(i);
    if (size >= 0 && static_cast<size_t>(size) != mine.size()) {
      return Status::internal("collnet test of a reduce-scatter reported " + std::to_string(size) +
                              " bytes, expected " + std::to_string(mine.size()));
    }
    if (mine.size() > 0) std::memcpy(out + (mine.begin - walk.mine.begin), rbuf, mine.size());
    return Status::ok();
  };
  return pipeline("reducescatter", walk.windows, post, finish);
}

Status CollComm::close() {
  if (closed_) return Status::ok();
  closed_ = true;
  Status first;
  auto keep = [&](Status s) {
    if (first.isOk() && !s.isOk()) first = std::move(s);
  };
  if (coll_comm_ != nullptr) {
    for (void* mh : mhandles_) keep(ncclStatus(api_->deregMr(coll_comm_, mh), "collnet deregMr"));
    mhandles_.clear();
    keep(ncclStatus(api_->closeColl(coll_comm_), "collnet closeColl"));
    coll_comm_ = nullptr;
  }
  if (ctx_ != nullptr) {
    keep(ncclStatus(api_->finalize(ctx_), "collnet finalize"));
    ctx_ = nullptr;
  }
  return first;
}

CollComm::~CollComm() { (void)close(); }

}  // namespace tally::driver
