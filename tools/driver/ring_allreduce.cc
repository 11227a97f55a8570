// SPDX-License-Identifier: Apache-2.0
#include "tools/driver/ring_allreduce.h"

#include <sched.h>
#include <unistd.h>

#include <chrono>

#include "kernels/kernels.h"

namespace tally::driver {
namespace {

using Clock = std::chrono::steady_clock;

struct Item {
  int step;
  int seg;
  size_t first;  // first element
  size_t n;      // elements
};

}  // namespace

Status RingComm::create(NetApi* api, Store* store, const std::string& name, int rank, int nranks,
                        const RingOptions& options, std::unique_ptr<RingComm>* out) {
  if (options.max_inflight < 1 || options.max_inflight > NCCL_NET_MAX_REQUESTS ||
      options.chunk_bytes == 0) {
    return Status::internal("bad RingOptions");
  }
  std::unique_ptr<RingComm> ring(new RingComm(rank, nranks, options));
  TALLY_RETURN_IF_ERROR(NetEndpoint::create(api, name, rank, options.net, &ring->endpoint_));
  if (nranks > 1) {
    int next = (rank + 1) % nranks;
    int prev = (rank + nranks - 1) % nranks;
    TALLY_RETURN_IF_ERROR(ring->endpoint_->connectPeers(store, {next}, {prev}));
    ring->scratch_.assign(options.chunk_bytes * static_cast<size_t>(options.max_inflight), 0);
    TALLY_RETURN_IF_ERROR(ring->endpoint_->regMr(ring->endpoint_->recvComm(prev),
                                                 ring->scratch_.data(), ring->scratch_.size(),
                                                 &ring->scratch_mh_));
  }
  *out = std::move(ring);
  return Status::ok();
}

Status RingComm::allreduce(void* data, size_t count, DataType type, ReduceOp op) {
  const int n = nranks_;
  if (n == 1 || count == 0) return Status::ok();
  const int r = rank_;
  const size_t esize = dataTypeSize(type);
  const size_t chunk_elems = std::max<size_t>(1, options_.chunk_bytes / esize);
  const size_t K = static_cast<size_t>(options_.max_inflight);
  const int next = (r + 1) % n;
  const int prev = (r + n - 1) % n;
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  auto seg_begin = [&](int seg) {
    return count * static_cast<size_t>(seg) / static_cast<size_t>(n);
  };
  const int steps = 2 * (n - 1);
  auto send_seg = [&](int s) { return s < n - 1 ? mod(r - s) : mod(r + 1 - (s - (n - 1))); };
  auto recv_seg = [&](int s) { return s < n - 1 ? mod(r - s - 1) : mod(r - (s - (n - 1))); };

  // The (step, chunk) lists, in the order both ends of a connection post them.
  std::vector<Item> sends, recvs;
  std::vector<size_t> recv_offset(static_cast<size_t>(steps), 0);
  auto add = [&](std::vector<Item>* list, int s, int seg) {
    size_t b = seg_begin(seg), e = seg_begin(seg + 1);
    for (size_t f = b; f < e; f += chunk_elems)
      list->push_back({s, seg, f, std::min(chunk_elems, e - f)});
  };
  for (int s = 0; s < steps; ++s) {
    add(&sends, s, send_seg(s));
    recv_offset[static_cast<size_t>(s)] = recvs.size();
    add(&recvs, s, recv_seg(s));
  }

  NetEndpoint* ep = endpoint_.get();
  NetApi* api = ep->api();
  void* send_comm = ep->sendComm(next);
  void* recv_comm = ep->recvComm(prev);
  const size_t bytes = count * esize;
  char* base = static_cast<char*>(data);
  void* data_send_mh = nullptr;
  void* data_recv_mh = nullptr;
  TALLY_RETURN_IF_ERROR(ep->regMr(send_comm, data, bytes, &data_send_mh));
  TALLY_RETURN_IF_ERROR(ep->regMr(recv_comm, data, bytes, &data_recv_mh));

  std::vector<void*> send_req(sends.size(), nullptr), recv_req(recvs.size(), nullptr);
  size_t sends_posted = 0, sends_done = 0, recvs_posted = 0, recvs_done = 0;
  auto last_progress = Clock::now();
  int idle = 0;
  Status failure;
  while (sends_done < sends.size() || recvs_done < recvs.size()) {
    bool progressed = false;
    while (recvs_posted < recvs.size() && recvs_posted - recvs_done < K) {
      const Item& it = recvs[recvs_posted];
      bool reduce_step = it.step < n - 1;
      void* dst = reduce_step ? scratch_.data() + (recvs_posted % K) * options_.chunk_bytes
                              : base + it.first * esize;
      void* mh = reduce_step ? scratch_mh_ : data_recv_mh;
      size_t size = it.n * esize;
      int tag = 0;
      void* req = nullptr;
      failure = ncclStatus(api->irecv(recv_comm, 1, &dst, &size, &tag, &mh, &req), "ring irecv");
      if (!failure.isOk() || req == nullptr) break;
      recv_req[recvs_posted++] = req;
      progressed = true;
    }
    if (!failure.isOk()) break;
    while (sends_posted < sends.size() && sends_posted - sends_done < K) {
      const Item& it = sends[sends_posted];
      if (it.step > 0) {
        // Sent once the same chunk of the previous step has arrived.
        size_t chunk = (it.first - seg_begin(it.seg)) / chunk_elems;
        if (recvs_done <= recv_offset[static_cast<size_t>(it.step - 1)] + chunk) break;
      }
      void* req = nullptr;
      failure = ncclStatus(
          api->isend(send_comm, base + it.first * esize, it.n * esize, 0, data_send_mh, &req),
          "ring isend");
      if (!failure.isOk() || req == nullptr) break;
      send_req[sends_posted++] = req;
      progressed = true;
    }
    if (!failure.isOk()) break;
    while (sends_done < sends_posted) {
      int done = 0;
      failure = ncclStatus(api->test(send_req[sends_done], &done, nullptr), "ring test send");
      if (!failure.isOk() || !done) break;
      ++sends_done;
      progressed = true;
    }
    if (!failure.isOk()) break;
    while (recvs_done < recvs_posted) {
      int done = 0;
      int got = -1;
      failure = ncclStatus(api->test(recv_req[recvs_done], &done, &got), "ring test recv");
      if (!failure.isOk() || !done) break;
      const Item& it = recvs[recvs_done];
      if (got >= 0 && static_cast<size_t>(got) != it.n * esize) {
        failure = Status::internal("ring received " + std::to_string(got) + " bytes, expected " +
                                   std::to_string(it.n * esize));
        break;
      }
      if (it.step < n - 1) {
        void* dst = base + it.first * esize;
        const void* srcs[2] = {dst, scratch_.data() + (recvs_done % K) * options_.chunk_bytes};
        reduce(type, op, dst, srcs, 2, it.n);
      }
      ++recvs_done;
      progressed = true;
    }
    if (!failure.isOk()) break;
    if (progressed) {
      idle = 0;
      last_progress = Clock::now();
      continue;
    }
    if (Clock::now() - last_progress > std::chrono::milliseconds(options_.net.timeout_ms)) {
      failure = Status::timeout("ring all-reduce made no progress for " +
                                std::to_string(options_.net.timeout_ms) + " ms");
      break;
    }
    if (++idle < 64) {
      sched_yield();
    } else {
      ::usleep(20);
    }
  }
  Status s1 = ep->deregMr(send_comm, data_send_mh);
  Status s2 = ep->deregMr(recv_comm, data_recv_mh);
  TALLY_RETURN_IF_ERROR(failure);
  TALLY_RETURN_IF_ERROR(s1);
  return s2;
}

}  // namespace tally::driver
