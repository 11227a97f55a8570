// SPDX-License-Identifier: Apache-2.0
#include "plugin/coll_comm.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "common/log.h"
#include "common/sizes.h"

namespace tally::plugin {
namespace {

std::string counted(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// ", 3 all-gathers, 1 reduce-scatter", only for the kinds a communicator ran.
std::string calls(const CollCommStats& s) {
  std::string text;
  if (s.allgathers > 0) text += ", " + counted(s.allgathers, "all-gather", "all-gathers");
  if (s.reducescatters > 0) {
    text += ", " + counted(s.reducescatters, "reduce-scatter", "reduce-scatters");
  }
  return text;
}

}  // namespace

Status CollComm::connect(const worker_client::CollOptions& options, int dev, const void* const* handles,
                         int nranks, int rank, CollCommInfo info, std::unique_ptr<CollComm>* out) {
  std::unique_ptr<worker_client::CollClient> client;
  TALLY_RETURN_IF_ERROR(worker_client::CollClient::connect(options, handles, nranks, rank, &client));
  TALLY_INFO(log::kInit | log::kColl, "CollNet dev %d: rank %d of %d joined %zu reducer(s)", dev,
             rank, nranks, options.reducers.size());
  *out = std::make_unique<CollComm>(dev, options.max_requests, std::move(client), std::move(info),
                                    options.reducers.size());
  return Status::ok();
}

CollComm::CollComm(int dev, int max_requests, std::unique_ptr<worker_client::CollClient> client,
                   CollCommInfo info, size_t reducers)
    : dev_(dev),
      client_(std::move(client)),
      info_(std::move(info)),
      reducers_(reducers),
      requests_(std::max(static_cast<size_t>(max_requests), kNcclUntestedRequests)) {
  tracked_.reserve(requests_.capacity());
}

CollComm::~CollComm() {
  close();
  magic_ = 0;
}

void CollComm::close() {
  int64_t open_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - opened_).count();
  int64_t expected = -1;
  if (!closed_ns_.compare_exchange_strong(expected, open_ns)) return;
  if (client_) client_->close();
  TALLY_INFO(log::kColl, "%s", summary().c_str());
}

CollCommStats CollComm::stats() const {
  CollCommStats s;
  s.allreduces = allreduces_.load();
  s.allgathers = allgathers_.load();
  s.reducescatters = reducescatters_.load();
  s.bytes = bytes_.load();
  s.errors = errors_.load();
  int64_t ns = closed_ns_.load();
  if (ns < 0) {
    ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - opened_).count();
  }
  s.seconds_open = static_cast<double>(ns) / 1e9;
  return s;
}

std::string CollComm::summary() const {
  CollCommStats s = stats();
  std::string who = "CollNet comm ";
  if (info_.has_comm_id) {
    char id[32];
    std::snprintf(id, sizeof(id), "0x%" PRIx64 " ", info_.comm_id);
    who += id;
  }
  if (client_) {
    who += "rank " + std::to_string(client_->rank()) + "/" + std::to_string(client_->nranks());
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f s open", s.seconds_open);
  std::string origin = info_.reducer_origin.empty() ? "" : " from " + info_.reducer_origin;
  return who + (closed_ns_.load() < 0 ? " open: " : " closed: ") +
         counted(s.allreduces, "all-reduce", "all-reduces") + calls(s) + ", " +
         formatBytesApprox(s.bytes) + ", " + seconds + ", " +
         counted(reducers_, "reducer", "reducers") + origin + ", " +
         counted(s.errors, "error", "errors");
}

template <typename Post>
Status CollComm::postWith(std::atomic<uint64_t>* calls, MemRange reads, MemRange writes,
                          CollReq** out, Post post) {
  *out = nullptr;
  CollReq* slot = requests_.acquire();
  if (slot == nullptr) return Status::ok();
  Status st = post(&slot->request);
  if (!st || !slot->request.posted()) {
    requests_.release(slot);
    if (!st) errors_.fetch_add(1);
    return st;
  }
  calls->fetch_add(1);
  slot->magic = kCollRequestMagic;
  slot->owner = this;
  track(slot, reads, writes);
  *out = slot;
  return Status::ok();
}

Status CollComm::iallreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                            CollReq** out) {
  const size_t bytes = count * dataTypeSize(type);
  return postWith(&allreduces_, MemRange::of(send, bytes), MemRange::of(recv, bytes), out,
                  [&](worker_client::CollRequest* r) {
    return client_->iallreduce(send, recv, count, type, op, r);
  });
}

Status CollComm::iallgather(const void* send, void* recv, const worker_client::CollWindow& window,
                            CollReq** out) {
  // The part sent is at most the window: a larger span is safe (track's rule).
  return postWith(&allgathers_, MemRange::of(send, window.count), MemRange::of(recv, window.count),
                  out, [&](worker_client::CollRequest* r) {
    return client_->iallgather(send, recv, window, r);
  });
}

Status CollComm::ireducescatter(const void* send, void* recv, const worker_client::CollWindow& window,
                                DataType type, ReduceOp op, CollReq** out) {
  // The part received is at most the window.
  const size_t bytes = window.count * dataTypeSize(type);
  return postWith(&reducescatters_, MemRange::of(send, bytes), MemRange::of(recv, bytes), out,
                  [&](worker_client::CollRequest* r) {
    return client_->ireducescatter(send, recv, window, type, op, r);
  });
}

bool CollComm::ownsRequest(const CollReq* req) const {
  return requests_.owns(req) && req->magic == kCollRequestMagic && req->owner == this;
}

Status CollComm::test(CollReq* req, bool* done, size_t* bytes) {
  bool finished = false;
  size_t got = 0;
  Status st = req->request.test(&finished, &got);
  if (!st) {
    errors_.fetch_add(1);
    return st;
  }
  *done = finished;
  if (!finished) return Status::ok();
  bytes_.fetch_add(got);
  if (bytes != nullptr) *bytes = got;
  untrackAndRelease(req);
  return Status::ok();
}

void CollComm::track(CollReq* req, MemRange reads, MemRange writes) {
  std::lock_guard<std::mutex> lock(tracked_mu_);
  req->reads = reads;
  req->writes = writes;
  tracked_.push_back(req);
}

void CollComm::untrackAndRelease(CollReq* req) {
  {
    std::lock_guard<std::mutex> lock(tracked_mu_);
    for (size_t i = 0; i < tracked_.size(); ++i) {
      if (tracked_[i] == req) {
        tracked_[i] = tracked_.back();
        tracked_.pop_back();
        break;
      }
    }
  }
  requests_.release(req);
}

int CollComm::releaseMemory(const void* data, size_t size) {
  const MemRange region = MemRange::of(data, size);
  int in_flight = 0;
  {
    std::lock_guard<std::mutex> lock(tracked_mu_);
    for (CollReq* r : tracked_) {
      if (!r->reads.overlaps(region) && !r->writes.overlaps(region)) continue;
      // Done but not yet tested: every result has landed and no thread touches it again.
      bool done = false;
      if (r->request.test(&done, nullptr).isOk() && done) continue;
      ++in_flight;
    }
  }
  if (in_flight == 0) return 0;
  const Status why = Status::internal("CollNet comm aborted: memory deregistered with " +
                                      std::to_string(in_flight) + " call" +
                                      (in_flight == 1 ? "" : "s") + " in flight");
  // The client WARNs with the cause, unless the communicator had failed before.
  TALLY_INFO(log::kColl, "%s", why.message().c_str());
  if (client_) client_->abort(why);
  return in_flight;
}

}  // namespace tally::plugin
