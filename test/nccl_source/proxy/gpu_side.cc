// SPDX-License-Identifier: Apache-2.0
// The GPU kernel's side of NCCL's CollNet step protocol, played by one CPU thread per connection
// with real data: what NCCL's Simple-protocol primitives do for the CollNet connectors of a head
// rank with no local peers (one GPU per node).
//
// Send connector (data to the network), per step:
//   wait until head + NCCL_STEPS > step (the proxy's credit), write connFifo[slot].size, read
//   connFifo[slot].offset, copy the step's data to buffs[Simple] + offset, fence, tail = step + 1.
// Receive connector (data from the network): head = step at the start (the credits the kernel
//   returns when it loads the connection), then per step wait until tail > step, read
//   connFifo[slot].offset, copy the data out, head = step + 1.
// The step carries over in conn->step from one collective to the next.
//
// Which bytes a step carries is the kernels' arithmetic for one GPU per node:
//   CollNetChain all-reduce: step t of channel p covers elements (t * channels + p) * chunk on,
//     `chunk` of them or what is left (possibly none); average pre-scales float inputs by
//     1/nranks (PreMulSum) and divides integer results by nranks (SumPostDiv).
//   CollNetDirect all-gather: the window [(t * channels + p) * chunk, + chunk) of the global
//     nranks x bytesPerRank vector, clamped to it; the rank sends its own part of the window and
//     receives the whole window.
//   CollNetDirect reduce-scatter: sends the whole window of its input, receives its own part of
//     the reduced window.
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "test/nccl_source/proxy/proxy_internal.h"

namespace tally::nccl_source {
namespace {

// What one step moves: `bytes` bytes between the user buffer at `user_offset` and the network
// buffer (whose offset the proxy gives in connFifo).
struct StepData {
  size_t user_offset = 0;
  size_t bytes = 0;
};

StepData stepData(const GpuSideJob& job, uint64_t t) {
  const ProxyCollective& c = job.c;
  const size_t elt = proxyTypeSize(c.dtype);
  const size_t chunk = static_cast<size_t>(c.chunk_bytes);
  const size_t channels = static_cast<size_t>(c.channels);
  StepData d;
  if (c.coll == ProxyColl::kAllReduce) {
    const size_t total = c.count * elt;
    const size_t beg = (t * channels + job.part) * chunk;
    d.user_offset = beg;
    d.bytes = beg < total ? std::min(chunk, total - beg) : 0;
    return d;
  }
  const size_t per_rank = c.count * elt;
  const size_t total = per_rank * job.nnodes;
  const size_t all_beg = std::min((t * channels + job.part) * chunk, total);
  const size_t all_end = std::min(all_beg + chunk, total);
  const size_t own_beg = std::max(all_beg, job.node * per_rank);
  const size_t own_end = std::min(all_end, (job.node + 1) * per_rank);
  const size_t own_bytes = own_end > own_beg ? own_end - own_beg : 0;
  const bool whole_window = (c.coll == ProxyColl::kAllGather) != job.send;
  if (whole_window) {
    // All-gather receives, reduce-scatter sends the whole window (global offsets).
    d.user_offset = all_beg;
    d.bytes = all_end - all_beg;
  } else {
    // The own part, at its offset within this rank's part.
    d.user_offset = own_bytes > 0 ? own_beg - job.node * per_rank : 0;
    d.bytes = own_bytes;
  }
  return d;
}

uint64_t stepsOf(const ProxyCollective& c, int nnodes) {
  const size_t elt = proxyTypeSize(c.dtype);
  const size_t bytes = c.coll == ProxyColl::kAllReduce ? c.count * elt : c.count * elt * nnodes;
  const size_t loop = static_cast<size_t>(c.channels) * static_cast<size_t>(c.chunk_bytes);
  return (bytes + loop - 1) / loop;
}

template <typename T>
void multiplyAll(void* data, size_t bytes, T by) {
  T* p = static_cast<T*>(data);
  for (size_t i = 0; i < bytes / sizeof(T); i++) p[i] = static_cast<T>(p[i] * by);
}

// Average and PreMulSum on the GPU: the network sees a sum.
void preScale(const GpuSideJob& job, void* data, size_t bytes) {
  if (job.c.op == kPreMulSumOp) {
    switch (job.c.dtype) {
      case ncclFloat32:
        multiplyAll<float>(data, bytes, kPreMulSumScalar);
        break;
      case ncclFloat64:
        multiplyAll<double>(data, bytes, kPreMulSumScalar);
        break;
      case ncclInt32:
        multiplyAll<int32_t>(data, bytes, kPreMulSumScalar);
        break;
      case ncclInt64:
        multiplyAll<int64_t>(data, bytes, kPreMulSumScalar);
        break;
      default:
        break;
    }
    return;
  }
  if (job.c.op != ncclAvg) return;
  const double scale = 1.0 / job.nnodes;
  if (job.c.dtype == ncclFloat32) {
    float* p = static_cast<float*>(data);
    for (size_t i = 0; i < bytes / sizeof(float); i++) p[i] = p[i] * static_cast<float>(scale);
  } else if (job.c.dtype == ncclFloat64) {
    double* p = static_cast<double*>(data);
    for (size_t i = 0; i < bytes / sizeof(double); i++) p[i] = p[i] * scale;
  }
}

void postDivide(const GpuSideJob& job, void* data, size_t bytes) {
  if (job.c.op != ncclAvg) return;
  if (job.c.dtype == ncclInt32) {
    int32_t* p = static_cast<int32_t*>(data);
    for (size_t i = 0; i < bytes / sizeof(int32_t); i++) p[i] = p[i] / job.nnodes;
  } else if (job.c.dtype == ncclUint32) {
    uint32_t* p = static_cast<uint32_t*>(data);
    for (size_t i = 0; i < bytes / sizeof(uint32_t); i++) p[i] = p[i] / job.nnodes;
  }
}

uint64_t loadStep(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void storeStep(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// Spins (then yields) until ready() or the job must end. False when it must end.
template <typename Ready>
bool waitFor(const GpuSideJob& job, Ready ready, std::string* why) {
  for (int spins = 0;; spins++) {
    if (ready()) return true;
    if (job.stop->load(std::memory_order_relaxed)) {
      *why = "stopped";
      return false;
    }
    if ((spins & 1023) == 0 && Clock::now() > job.deadline) {
      *why = "deadline passed waiting for the proxy";
      return false;
    }
    // Spin, then yield, then nap: the tests run many of these threads on few cores.
    if (spins > 4096) {
      usleep(20);
    } else if (spins > 64) {
      sched_yield();
    }
  }
}

}  // namespace

std::string runGpuSide(const GpuSideJob& job) {
  ncclConnInfo* conn = job.conn;
  char* buff = conn->buffs[NCCL_PROTO_SIMPLE];
  volatile ncclConnFifo* fifo = conn->connFifo;
  const uint64_t nsteps = stepsOf(job.c, job.nnodes);
  const char* in = static_cast<const char*>(job.c.sendbuff);
  char* out = static_cast<char*>(job.c.recvbuff);
  std::string why;
  uint64_t step = conn->step;
  if (!job.send) storeStep(conn->head, step);
  for (uint64_t t = 0; t < nsteps; t++) {
    const int slot = static_cast<int>(step % NCCL_STEPS);
    const StepData d = stepData(job, t);
    if (job.send) {
      if (!waitFor(
              job, [&] { return loadStep(conn->head) + NCCL_STEPS > step; }, &why)) {
        return why;
      }
      fifo[slot].size = static_cast<int64_t>(d.bytes);
      const int64_t offset = __atomic_load_n(&conn->connFifo[slot].offset, __ATOMIC_ACQUIRE);
      if (d.bytes > 0) {
        memcpy(buff + offset, in + d.user_offset, d.bytes);
        preScale(job, buff + offset, d.bytes);
      }
      __atomic_thread_fence(__ATOMIC_SEQ_CST);
      step++;
      storeStep(conn->tail, step);
    } else {
      if (!waitFor(
              job, [&] { return loadStep(conn->tail) > step; }, &why))
        return why;
      const int64_t offset = __atomic_load_n(&conn->connFifo[slot].offset, __ATOMIC_ACQUIRE);
      if (d.bytes > 0) {
        memcpy(out + d.user_offset, buff + offset, d.bytes);
        postDivide(job, out + d.user_offset, d.bytes);
      }
      step++;
      storeStep(conn->head, step);
    }
    conn->step = step;
  }
  return "";
}

}  // namespace tally::nccl_source
