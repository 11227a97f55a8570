// SPDX-License-Identifier: Apache-2.0
// CollClient: handles, connect (every reducer joined at once by coll_formation.cc, the I/O steps
// in coll_connect.cc; the ones not joined reported lost), iallreduce, close.
#include "worker_client/coll_client.h"

#include <strings.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/auth.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "worker_client/coll_client_impl.h"
#include "worker_client/coll_connect.h"
#include "worker_client/coll_formation.h"
#include "worker_client/coll_handle.h"
#include "worker_client/coll_link.h"
#include "worker_client/coll_raw_link.h"
#include "worker_client/dead_link.h"
#include "worker_client/relay_seal.h"
#include "protocol/slicing.h"

namespace tally::worker_client {
namespace wire = protocol::wire;
using protocol::kMaxSlicesPerReducer;
using protocol::SlicePlan;
using protocol::sliceElements;
using protocol::Span;
using protocol::sliceSpan;
using protocol::rankPart;
using protocol::pieceOf;

namespace {

// Whether a communicator can form with the reducers joined (`lost`: the slots whose join failed,
// each with its status in `formed`): a Reject fails it (a configuration every reducer refuses
// alike, the first in slot order); so do fewer than TALLY_MIN_REDUCERS joined, naming every
// reducer not joined and why. One reducer alone fails with its own error.
Status formationOutcome(const CollOptions& options, const std::vector<FormedLink>& formed,
                        const std::vector<uint32_t>& lost) {
  for (uint32_t s : lost) {
    if (formed[s].status.code() == StatusCode::kInvalidUsage) return formed[s].status;
  }
  const size_t joined = formed.size() - lost.size();
  if (joined > 0 && joined >= static_cast<size_t>(std::max(options.min_reducers, 1))) {
    return Status::ok();
  }
  if (formed.size() == 1) return formed[0].status;
  std::string why;
  for (uint32_t s : lost) why += (why.empty() ? "" : "; ") + formed[s].status.message();
  const std::string head =
      joined == 0 ? "no reducer could be joined"
                  : "joined " + std::to_string(joined) + " of " + std::to_string(formed.size()) +
                        " reducers, fewer than TALLY_MIN_REDUCERS=" +
                        std::to_string(options.min_reducers);
  return Status(formed[lost.front()].status.code(), "CollNet connect: " + head + ": " + why);
}

}  // namespace

Status CollClient::makeHandle(const CollOptions& options, void* out) {
  if (out == nullptr) return Status::internal("makeHandle: null output");
  TALLY_RETURN_IF_ERROR(validateOptions(options));
  return encodeHandle(options, out);
}

Status CollClient::connect(const CollOptions& options, const void* const* handles, int nranks,
                           int rank, std::unique_ptr<CollClient>* out) {
  TALLY_RETURN_IF_ERROR(validateOptions(options));
  if (handles == nullptr || nranks < 1 || nranks > static_cast<int>(wire::kMaxRanks) || rank < 0 ||
      rank >= nranks) {
    return Status::internal("CollNet connect: rank " + std::to_string(rank) + " of " +
                            std::to_string(nranks));
  }
  std::vector<HandleInfo> infos(nranks);
  for (int i = 0; i < nranks; ++i) TALLY_RETURN_IF_ERROR(decodeHandle(handles[i], i, &infos[i]));
  TALLY_RETURN_IF_ERROR(checkHandles(infos, options, rank));
  const wire::CommId comm = infos[0].comm;
  const auto deadline = Clock::now() + std::chrono::milliseconds(options.timeouts.connect_ms);
  const size_t nred = options.reducers.size();
  auth::JobToken token;
  const crc32c::Crc32c* crc = nullptr;
  {
    Status st = auth::loadJobToken(options.job_token, options.job_token_file, &token);
    if (st.isOk() && options.checksum) crc = crc32c::shared(&st);
    if (!st.isOk()) {
      TALLY_WARN("CollNet rank %d: %s", rank, st.toString().c_str());
      return st;
    }
  }
  RelaySeal seal;
  {
    Status st = relaySealFor(infos[0], token, rank, &seal);
    explicit_bzero(infos[0].key.data(), infos[0].key.size());
    if (!st.isOk()) {
      TALLY_WARN("CollNet rank %d: %s", rank, st.toString().c_str());
      return st;
    }
  }
  // Each reducer is reached over a transport Connection, or (TALLY_COLL_PROGRESS=thread or poll
  // on TCP) over the raw socket taken from a one-socket TCP connection.
  const bool raw = options.progress != CollProgress::kLegacy && isTcpNetwork(options.network.get());
  wire::Hello hello;
  hello.comm = comm;
  hello.rank = static_cast<uint32_t>(rank);
  hello.nranks = static_cast<uint32_t>(nranks);
  hello.nreducers = static_cast<uint32_t>(nred);
  hello.slice_bytes = options.slice_bytes;
  hello.slices_per_reducer = options.slices_per_reducer;
  hello.min_slice_bytes = static_cast<uint32_t>(options.min_slice_bytes);
  hello.window = static_cast<uint32_t>(options.window);
  hello.checksum = options.checksum;
  std::vector<JoinRequest> requests(nred);
  for (size_t r = 0; r < nred; ++r) {
    JoinRequest& req = requests[r];
    req.network = options.network.get();
    req.address = options.reducers[r];
    req.raw = raw;
    req.token = &token;
    req.hello = hello;
    req.hello.reducer_index = static_cast<uint32_t>(r);
    req.deadline = deadline;
  }
  // Every reducer at once (a reducer answers Hello only once every rank has joined, and other
  // ranks may be slower); one still silent a reducer timeout (at least a second, as for a
  // join) after another said Ready is lost. Without a reducer timeout, each waits out the
  // connect timeout.
  const int64_t grace_ms =
      options.reducer_timeout_ms > 0 ? std::max<int64_t>(options.reducer_timeout_ms, 1000) : 0;
  std::vector<FormedLink> formed;
  {
    Status st = formWithReducers(std::move(requests), grace_ms, &formed);
    if (!st.isOk()) {
      TALLY_WARN("CollNet rank %d: %s", rank, st.toString().c_str());
      return st;
    }
  }
  std::vector<uint32_t> lost;  // slots whose reducer could not be joined
  for (size_t r = 0; r < nred; ++r) {
    if (!formed[r].status.isOk()) lost.push_back(static_cast<uint32_t>(r));
  }
  if (Status st = formationOutcome(options, formed, lost); !st.isOk()) {
    TALLY_WARN("CollNet rank %d: %s", rank, st.toString().c_str());
    return st;  // `formed` closes what was opened
  }
  auto impl = std::make_unique<CollClientImpl>(options, rank, nranks);
  {
    KeeperSettings settings;
    settings.rank = rank;
    settings.nranks = nranks;
    settings.comm = comm;
    settings.seal = seal;
    settings.link.raw = raw;
    settings.link.token = token;
    settings.link.crc = crc;
    settings.link.hello = hello;
    impl->makeKeeper(std::move(settings));
  }
  auto fail = [&](const Status& st) {
    for (FormedLink& f : formed) {
      if (f.conn) f.conn->close();
      f.fd.reset();
    }
    TALLY_WARN("CollNet rank %d: %s", rank, st.toString().c_str());
    return st;
  };
  Progress* progress = nullptr;
  for (size_t r = 0; r < nred; ++r) {
    const uint32_t slot = static_cast<uint32_t>(r);
    if (!formed[r].status.isOk()) {
      impl->addLink(std::make_shared<DeadLink>(slot, options.reducers[r]));
      continue;
    }
    const int window = std::min(options.window, formed[r].window);
    if (!formed[r].fd.valid()) {
      impl->addLink(std::make_shared<ThreadedLink>(impl.get(), slot, options.reducers[r],
                                                   std::move(formed[r].conn), window,
                                                   options.timeouts.io_ms, crc));
      continue;
    }
    if (progress == nullptr) {
      std::shared_ptr<Progress> p;
      Status st = Progress::create(options.progress != CollProgress::kPoll, &p);
      if (!st.isOk()) return fail(st);
      progress = p.get();
      impl->setProgress(std::move(p));
    }
    const int fd = formed[r].fd.get();
    auto link = std::make_shared<RawLink>(impl.get(), slot, options.reducers[r],
                                          std::move(formed[r].fd), progress, window,
                                          options.timeouts.io_ms, crc);
    Status st = progress->add(link.get(), fd);
    impl->addLink(std::move(link));
    if (!st.isOk()) return fail(st);
  }
  // The ranks agree to drop each reducer that could not be joined, as if it were lost now: the
  // keeper finds these first, before any failover message from another rank.
  for (uint32_t slot : lost) impl->linkLost(slot, formed[slot].status);
  Status started = impl->start();
  if (!started.isOk()) return fail(started);
  TALLY_INFO(log::kColl, "CollNet rank %d of %d joined communicator %s on %zu of %zu reducers%s%s%s",
             rank, nranks, comm.toString().c_str(), nred - lost.size(), nred,
             progress == nullptr                        ? ""
             : options.progress == CollProgress::kPoll ? ", raw sockets progressed by test()"
                                                       : ", raw sockets with one progress thread",
             token.empty() ? "" : ", job token proven both ways",
             crc != nullptr ? ", CRC32C on every slice" : "");
  *out = std::move(impl);
  return Status::ok();
}

Status CollRequest::test(bool* done, size_t* bytes) {
  if (done == nullptr) return Status::internal("CollRequest::test: null done");
  if (!posted_) return Status::internal("CollRequest::test: nothing was posted");
  if (call_ != nullptr) {
    TALLY_RETURN_IF_ERROR(call_->test(done));
    if (!*done) return Status::ok();
  }
  *done = true;
  if (bytes) *bytes = bytes_;
  return Status::ok();
}


Status Call::test(bool* done) {
  if (remaining.load(std::memory_order_acquire) == 0) {
    *done = true;
    return Status::ok();
  }
  if (shared->failed.load(std::memory_order_acquire)) return shared->errorStatus();
  if (shared->poller != nullptr) {
    shared->poller->poll();
    if (remaining.load(std::memory_order_acquire) == 0) {
      *done = true;
      return Status::ok();
    }
    if (shared->failed.load(std::memory_order_acquire)) return shared->errorStatus();
  }
  *done = false;
  return Status::ok();
}

bool Call::inPlace() const {
  const size_t elt = dataTypeSize(type);
  // Each side's bytes, at most: all-gather sends only this rank's part, reduce-scatter receives
  // only it (no more than rank_count elements either way).
  const uint8_t* send_lo = send;
  const uint8_t* recv_lo = recv;
  const size_t send_bytes = (kind == wire::CollKind::kAllGather ? rank_count : count) * elt;
  const size_t recv_bytes = (kind == wire::CollKind::kReduceScatter ? rank_count : count) * elt;
  if (send_lo == nullptr || recv_lo == nullptr) return false;
  return send_lo < recv_lo + recv_bytes && recv_lo < send_lo + send_bytes;
}

CollClientImpl::CollClientImpl(const CollOptions& options, int rank, int nranks)
    : options_(options),
      rank_(rank),
      nranks_(nranks),
      placement_(static_cast<uint32_t>(options.reducers.size())) {}

CollClientImpl::~CollClientImpl() { close(); }

Status CollClientImpl::start() {
  for (auto& l : links_) TALLY_RETURN_IF_ERROR(l->start());
  if (progress_) TALLY_RETURN_IF_ERROR(progress_->start());
  return keeper_->start();
}

void CollClientImpl::makeKeeper(KeeperSettings settings) {
  link_crc_ = settings.link.crc;
  keeper_ = std::make_unique<Keeper>(options_, std::move(settings), shared_, this);
}

std::vector<std::shared_ptr<Link>> CollClientImpl::linkSnapshot() {
  std::lock_guard<std::mutex> lock(links_mu_);
  return links_;
}

transport::ZerocopyCounts CollClientImpl::zerocopyCounts() const {
  transport::ZerocopyCounts sum;
  std::lock_guard<std::mutex> lock(links_mu_);
  for (const auto& l : links_) {
    const transport::ZerocopyCounts c = l->zerocopyCounts();
    sum.sends += c.sends;
    sum.copied += c.copied;
    sum.refused += c.refused;
  }
  return sum;
}

void CollClientImpl::snapshotLinks(std::vector<std::shared_ptr<Link>>* out) {
  std::lock_guard<std::mutex> lock(links_mu_);
  out->assign(links_.begin(), links_.end());
}

void CollClientImpl::setProgress(std::shared_ptr<Progress> progress) {
  progress_ = std::move(progress);
  if (options_.progress == CollProgress::kPoll) shared_->poller = progress_;
}

Status CollClientImpl::iallreduce(const void* send, void* recv, size_t count, DataType type,
                                  ReduceOp op, CollRequest* req) {
  if (req == nullptr) return Status::internal("iallreduce: null request pointer");
  req->reset();
  if (!isValidDataType(static_cast<int>(type)) || !isValidReduceOp(static_cast<int>(op))) {
    return Status::internal("iallreduce: bad data type or op");
  }
  if (count > 0 && (send == nullptr || recv == nullptr)) {
    return Status::internal("iallreduce: null buffer");
  }
  if (count > SIZE_MAX / dataTypeSize(type)) return Status::internal("iallreduce: count overflows");
  CallSpec spec;
  spec.send = static_cast<const uint8_t*>(send);
  spec.recv = static_cast<uint8_t*>(recv);
  spec.count = count;
  spec.type = type;
  spec.op = op;
  return post(spec, count * dataTypeSize(type), req);
}

namespace {

// Checks a window against the rank count and computes this rank's part of it. `what` names
// the call for errors.
Status windowPart(const char* what, const CollWindow& w, int rank, int nranks, Span* part) {
  if (w.rank_count == 0 || w.count == 0) {
    return Status::internal(std::string(what) + ": empty window or rank part");
  }
  const uint64_t n = static_cast<uint64_t>(nranks);
  if (w.rank_count > UINT64_MAX / 8 / n || w.offset > w.rank_count * n ||
      w.count > w.rank_count * n - w.offset) {
    return Status::internal(std::string(what) + ": window [" + std::to_string(w.offset) + ", +" +
                            std::to_string(w.count) + ") passes the end of " +
                            std::to_string(nranks) + " parts of " + std::to_string(w.rank_count));
  }
  *part = rankPart(static_cast<uint64_t>(rank), w.rank_count, w.offset, w.count);
  return Status::ok();
}

}  // namespace

Status CollClientImpl::iallgather(const void* send, void* recv, const CollWindow& window,
                                  CollRequest* req) {
  if (req == nullptr) return Status::internal("iallgather: null request pointer");
  req->reset();
  Span part;
  TALLY_RETURN_IF_ERROR(windowPart("iallgather", window, rank_, nranks_, &part));
  if (recv == nullptr || (part.count > 0 && send == nullptr)) {
    return Status::internal("iallgather: null buffer");
  }
  CallSpec spec;
  spec.send = static_cast<const uint8_t*>(send);
  spec.recv = static_cast<uint8_t*>(recv);
  spec.count = window.count;
  spec.type = DataType::kUint8;
  spec.op = ReduceOp::kSum;
  spec.kind = wire::CollKind::kAllGather;
  spec.rank_count = window.rank_count;
  spec.window_offset = window.offset;
  spec.send_origin = part.offset;
  return post(spec, window.count, req);
}

Status CollClientImpl::ireducescatter(const void* send, void* recv, const CollWindow& window,
                                      DataType type, ReduceOp op, CollRequest* req) {
  if (req == nullptr) return Status::internal("ireducescatter: null request pointer");
  req->reset();
  if (!isValidDataType(static_cast<int>(type)) || !isValidReduceOp(static_cast<int>(op))) {
    return Status::internal("ireducescatter: bad data type or op");
  }
  Span part;
  TALLY_RETURN_IF_ERROR(windowPart("ireducescatter", window, rank_, nranks_, &part));
  if (send == nullptr || (part.count > 0 && recv == nullptr)) {
    return Status::internal("ireducescatter: null buffer");
  }
  CallSpec spec;
  spec.send = static_cast<const uint8_t*>(send);
  spec.recv = static_cast<uint8_t*>(recv);
  spec.count = window.count;
  spec.type = type;
  spec.op = op;
  spec.kind = wire::CollKind::kReduceScatter;
  spec.rank_count = window.rank_count;
  spec.window_offset = window.offset;
  spec.recv_origin = part.offset;
  return post(spec, part.count * dataTypeSize(type), req);
}

Status CollClientImpl::post(const CallSpec& spec, size_t result_bytes, CollRequest* req) {
  if (shared_->failed.load(std::memory_order_acquire)) return shared_->errorStatus();
  if (closing()) return Status::internal("collective posted after close");
  if (spec.count == 0) {
    *req = CollRequest::completed();
    return Status::ok();
  }
  const size_t elt = dataTypeSize(spec.type);
  const SlicePlan plan{options_.slice_bytes, options_.slices_per_reducer,
                       options_.min_slice_bytes};
  const uint64_t per_slice = sliceElements(spec.count, elt, plan, links_.size());
  const uint64_t nslices = (spec.count + per_slice - 1) / per_slice;
  if (nslices > UINT32_MAX) return Status::invalidUsage("collective: too many slices");
  const bool all_reduce = spec.kind == wire::CollKind::kAllReduce;
  const Span part = all_reduce ? Span{0, spec.count}
                               : rankPart(static_cast<uint64_t>(rank_), spec.rank_count,
                                          spec.window_offset, spec.count);
  {
    std::unique_lock<std::mutex> lock(post_mu_);
    // A rank behind a membership change's boundary posts past max_requests until it reaches it
    // (docs/failover.md, "Every rank reaches K"); while a change is agreed nobody posts.
    const bool room =
        next_seq_ < catch_up_until_ ||
        shared_->calls_in_flight.load(std::memory_order_acquire) < options_.max_requests;
    if (hold_ || !room) {
      lock.unlock();
      // No room: NCCL calls again. In poll mode, results that make room come in now.
      if (shared_->poller != nullptr) shared_->poller->poll();
      return Status::ok();
    }
    std::shared_ptr<Call> call = freeCallLocked();
    static_cast<CallSpec&>(*call) = spec;
    call->shared = shared_;
    // This rank's input, as far as its buffer holds it: all of it, but for an all-gather only
    // its own part.
    const size_t send_bytes =
        (spec.kind == wire::CollKind::kAllGather ? part.count : spec.count) * elt;
    // By the whole call, which every rank sees alike: on a loss every rank must tell the same
    // slices apart as early (applyLost).
    call->early = spec.count * elt <= kEarlyDoneBytes;
    if (call->early) {
      call->copy.resize(send_bytes);  // within the record's kept capacity once warm
      if (send_bytes > 0) std::memcpy(call->copy.data(), spec.send, send_bytes);
    }
    call->remaining.store(static_cast<uint32_t>(nslices), std::memory_order_relaxed);
    call->seq = next_seq_++;
    shared_->calls_in_flight.fetch_add(1, std::memory_order_acq_rel);
    for (uint64_t j = 0; j < nslices; ++j) {
      SliceTask t;
      t.call = call;
      t.slice = static_cast<uint32_t>(j);
      const Span slice = sliceSpan(spec.count, per_slice, j);
      // Every rank sends every slice and gets a result for each (protocol/wire.h): pieces may
      // be empty.
      t.send = spec.kind == wire::CollKind::kAllGather ? pieceOf(slice, part) : slice;
      t.recv = spec.kind == wire::CollKind::kReduceScatter ? pieceOf(slice, part) : slice;
      const Placement p = placement_.place(call->seq, j);
      if (!p.placed) {
        // Every slot is empty: the keeper is failing the communicator.
        parked_[placement_.epoch()].push_back(std::move(t));
      } else if (p.epoch != 0) {
        // A recovery slice of an epoch whose boundary is still ahead (this call is below it):
        // it goes out with that epoch's others, at the boundary.
        parked_[p.epoch].push_back(std::move(t));
      } else {
        links_[p.slot]->post(std::move(t));
      }
    }
    shared_->posted_through.store(next_seq_, std::memory_order_release);
    flushBoundariesLocked();
    // A result of this call may have landed before it was published (the others ranks were
    // waiting for it): its Ack is due now.
    for (auto& link : links_) link->ackIfBehind();
    *req = CollRequest(std::move(call), result_bytes);
  }
  return Status::ok();
}

void CollClientImpl::flushBoundariesLocked() {
  while (!boundaries_.empty() && boundaries_.front().call <= next_seq_) {
    const uint32_t epoch = boundaries_.front().epoch;
    boundaries_.pop_front();
    flushEpochLocked(epoch);
    shared_->applied_epoch.store(epoch, std::memory_order_release);
    for (auto& link : links_) link->ackIfBehind();
  }
}

void CollClientImpl::flushEpochLocked(uint32_t epoch) {
  auto it = parked_.find(epoch);
  if (it == parked_.end()) return;
  std::vector<SliceTask> tasks = std::move(it->second);
  parked_.erase(it);
  sortForSending(&tasks);
  for (SliceTask& t : tasks) {
    const Placement p = placement_.place(t.call->seq, t.slice, epoch);
    // Placed on a slot a later epoch lost: that epoch sends it, as the ranks that sent it there
    // before they knew find it among that slot's orphans.
    const uint32_t later = p.placed ? placement_.lostAfter(p.slot, epoch) : 0;
    if (!p.placed || later != 0) {
      parked_[later != 0 ? later : placement_.epoch()].push_back(std::move(t));
      continue;
    }
    t.epoch = epoch;
    links_[p.slot]->post(std::move(t));
  }
}

std::shared_ptr<Call> CollClientImpl::freeCallLocked() {
  // A call is free once its request and slices have let go of it. Few are ever live at once
  // (max_requests), so the list stays short.
  for (auto& c : calls_) {
    if (c.use_count() == 1) {
      // Pairs with the release in the last holder's reference drop: its writes are visible.
      std::atomic_thread_fence(std::memory_order_acquire);
      return c;
    }
  }
  constexpr size_t kMaxKept = 64;
  auto c = std::make_shared<Call>();
  if (calls_.size() < kMaxKept) calls_.push_back(c);
  return c;
}

void CollClientImpl::fail(const Status& st, int64_t wait_ms) {
  std::lock_guard<std::mutex> lock(fail_mu_);
  if (shared_->failed.load(std::memory_order_acquire)) return;
  const std::vector<std::shared_ptr<Link>> links = linkSnapshot();
  if (!closing()) {
    TALLY_WARN("CollNet rank %d: %s", rank_, st.toString().c_str());
    // Each reducer hears why, so the other ranks learn the cause (bounded: a reducer that does
    // not take the message in time is simply closed).
    const auto deadline = Clock::now() + std::chrono::milliseconds(wait_ms);
    for (auto& l : links) l->postAbort(st.toString());
    // A fail() found by a link thread gives way to an abort() on the owner's thread, which
    // waits on it; the abort's own short wait runs to its end.
    const bool yield_to_abort = wait_ms > kAbortWaitMs;
    for (auto& l : links) l->finishAbort(deadline, yield_to_abort);
  }
  // Close first: once requests report the error, the caller may free its buffers, and no receive
  // may still be writing into them.
  for (auto& l : links) l->closeConnection();
  {
    std::lock_guard<std::mutex> elock(shared_->mu);
    shared_->error = st;
  }
  shared_->failed.store(true, std::memory_order_release);
}

void CollClientImpl::abortLocked(const Status& why) {
  closed_ = true;
  // A link thread's fail() may be waiting for its Error messages: it stops at once.
  hurry_.store(true, std::memory_order_release);
  fail(why, kAbortWaitMs);
  closing_.store(true, std::memory_order_release);
  // The keeper first: it may be retiring a link. The connections are closed, so the transport is
  // out of the caller's buffers; joining the link threads (each may finish a CRC or a post
  // first) and taking each send_mu_ once more (an iallreduce caller's tryPostNow) leaves nobody
  // in them.
  if (keeper_) keeper_->stop();
  for (auto& l : linkSnapshot()) l->stopAndJoin();
}

void CollClientImpl::abort(const Status& why) {
  std::lock_guard<std::mutex> lock(close_mu_);
  if (closed_) return;
  abortLocked(why);
}

void CollClientImpl::close() {
  std::lock_guard<std::mutex> lock(close_mu_);
  if (closed_) return;
  const int in_flight = shared_->calls_in_flight.load(std::memory_order_acquire);
  if (in_flight > 0) {
    // The other ranks may never match these calls: no waiting for them.
    abortLocked(Status::internal("the CollNet communicator was closed with " +
                                 std::to_string(in_flight) + " call" + (in_flight == 1 ? "" : "s") +
                                 " in flight"));
    return;
  }
  closed_ = true;
  closing_.store(true, std::memory_order_release);
  hurry_.store(true, std::memory_order_release);
  if (keeper_) keeper_->stop();
  if (options_.zerocopy != transport::ZerocopyMode::kOff) {
    // Whether TALLY_ZEROCOPY paid: "copied" sends gained nothing (loopback, veth).
    const transport::ZerocopyCounts zc = zerocopyCounts();
    TALLY_INFO(log::kColl,
               "CollNet rank %d: %llu zero-copy sends (the kernel copied %llu of them anyway); "
               "%llu writes copied at the pinned-memory limit",
               rank_, static_cast<unsigned long long>(zc.sends),
               static_cast<unsigned long long>(zc.copied),
               static_cast<unsigned long long>(zc.refused));
  }
  // Nothing is queued or outstanding: Bye goes out at once, and the reducers see a clean leave.
  const auto deadline = Clock::now() + std::chrono::milliseconds(kByeWaitMs);
  const std::vector<std::shared_ptr<Link>> links = linkSnapshot();
  for (auto& l : links) l->requestBye();
  for (auto& l : links) l->waitSenderDone(msLeft(deadline));
  for (auto& l : links) l->stopAndJoin();
  fail(Status::internal("the CollNet communicator was closed"));
}

}  // namespace tally::worker_client
