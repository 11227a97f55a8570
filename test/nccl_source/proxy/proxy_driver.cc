// SPDX-License-Identifier: Apache-2.0
// One rank of the proxy tests (proxy_rank.h): the NCCL proxy's progress loop for a collective, with
// one CPU thread per connection in the kernel's place, and NCCL's teardown.
//
// The loop is NCCL's progress thread reduced to what one collective needs: the send and the
// receive ncclProxyArgs (one sub per channel each, as NCCL appends the ops of a shared CollNet
// connection) are progressed in turn until both reach ncclProxyOpNone. A non-success from either
// ends the collective, as it would make NCCL's proxy thread report an asynchronous error.
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm.h"
#include "net.h"
#include "test/nccl_source/proxy/proxy_internal.h"
#include "test/nccl_source/stubs/captured_log.h"

namespace tally::nccl_source {
namespace {

ProxyResult error(int rc, const std::string& what) {
  ProxyResult r;
  r.nccl_rc = rc;
  r.error = what;
  return r;
}

// ncclProxyArgs is large (a sub per possible channel); one per collective and kind, zeroed as
// NCCL's pool hands them out.
struct ArgsDeleter {
  void operator()(ncclProxyArgs* a) const { free(a); }
};
using ArgsPtr = std::unique_ptr<ncclProxyArgs, ArgsDeleter>;
ArgsPtr newArgs() { return ArgsPtr(static_cast<ncclProxyArgs*>(calloc(1, sizeof(ncclProxyArgs)))); }

class ProxyRankImpl : public ProxyRank {
 public:
  explicit ProxyRankImpl(const ProxyRankOptions& options) : options_(options) {}
  ~ProxyRankImpl() override {
    if (!closed_) close();
  }

  ProxyResult init() {
    ProxyResult r = initComm(options_, &state_);
    if (!r.ok()) return r;
    return connectChannels(options_, &state_);
  }

  ProxyResult run(const ProxyCollective& c) override {
    if (failed_) return error(ncclInternalError, "an earlier collective failed");
    if (c.channels < 1 || c.channels > options_.channels) {
      return error(ncclInvalidArgument, "bad channel count");
    }
    const Clock::time_point deadline =
        Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
    ArgsPtr send_args = newArgs();
    ArgsPtr recv_args = newArgs();
    fillProxyArgs(c, state_.comm->node, state_.comm->nNodes,
                  state_.comm->buffSizes[NCCL_PROTO_SIMPLE], op_count_, state_.send.data(),
                  send_args.get());
    fillProxyArgs(c, state_.comm->node, state_.comm->nNodes,
                  state_.comm->buffSizes[NCCL_PROTO_SIMPLE], op_count_, state_.recv.data(),
                  recv_args.get());
    op_count_ += 2;

    // The kernel: one thread per connection of every channel the collective uses.
    std::atomic<bool> stop{false};
    std::vector<std::string> gpu_errors(2 * c.channels);
    std::vector<std::thread> gpu;
    for (int p = 0; p < c.channels; p++) {
      for (int kind = 0; kind < 2; kind++) {
        GpuSideJob job;
        job.c = c;
        job.part = p;
        job.node = state_.comm->node;
        job.nnodes = state_.comm->nNodes;
        job.send = kind == 1;
        job.conn = job.send ? &state_.send[p]->conn : &state_.recv[p]->conn;
        job.stop = &stop;
        job.deadline = deadline;
        std::string* out = &gpu_errors[2 * p + kind];
        gpu.emplace_back([job, out] { *out = runGpuSide(job); });
      }
    }

    // The proxy's progress thread.
    ProxyResult result;
    ncclProxyState* ps = state_.proxy_state;
    int idle_passes = 0;
    for (uint64_t spins = 0;; spins++) {
      bool busy = false;
      for (ncclProxyArgs* args : {send_args.get(), recv_args.get()}) {
        if (args->state == ncclProxyOpNone) continue;
        busy = true;
        const ncclResult_t rc = args->progress(ps, args);
        if (rc != ncclSuccess) {
          result = error(rc, std::string(args == send_args.get() ? "send" : "recv") +
                                 "ProxyProgress returned " + std::to_string(rc));
          break;
        }
      }
      if (!result.ok() || !busy) break;
      if ((spins & 255) == 0 && Clock::now() > deadline) {
        result = error(ncclInternalError, "deadline passed in the proxy progress loop");
        break;
      }
      // NCCL's progress thread yields when idle; after a while, nap (few cores in the tests).
      if (send_args->idle && recv_args->idle) {
        if (++idle_passes > 4096) {
          usleep(20);
        } else {
          sched_yield();
        }
      } else {
        idle_passes = 0;
      }
    }
    if (!result.ok()) {
      failed_ = true;
      stop = true;
    }
    for (std::thread& t : gpu) t.join();
    if (result.ok()) {
      for (const std::string& e : gpu_errors) {
        if (!e.empty()) return error(ncclInternalError, "GPU side: " + e);
      }
    }
    return result;
  }

  ProxyResult close() override {
    if (closed_) return {};
    closed_ = true;
    ProxyResult result;
    // NCCL's proxy frees its connection pool in the order the connections were made.
    for (ncclProxyConnection* connection : proxyWorld().connections) {
      const ncclResult_t rc = connection->tcomm->proxyFree(connection, state_.proxy_state);
      if (rc != ncclSuccess && result.ok()) {
        result = error(rc, std::string(connection->send ? "send" : "recv") + "ProxyFree returned " +
                               std::to_string(rc));
      }
    }
#if NCCL_VERSION_CODE >= 22600
    // ncclCommDestroy finalizes the net (and unloads the plugin with the last communicator).
    if (state_.comm != nullptr && state_.comm->ncclNet != nullptr) {
      const ncclResult_t rc = ncclNetFinalize(state_.comm);
      if (rc != ncclSuccess && result.ok()) {
        result = error(rc, "ncclNetFinalize returned " + std::to_string(rc));
      }
    }
#endif
    freeComm(&state_);
    if (result.ok() && liveHostAllocations() != 0) {
      result = error(ncclInternalError, std::to_string(liveHostAllocations()) +
                                            " pinned host allocations left after teardown");
    }
    return result;
  }

  ProxyCalls calls() const override { return spyCalls(); }

  std::string warnings() const override {
    std::string out;
    for (const std::string& line : capturedLog()) {
      if (line.rfind("WARN", 0) == 0) out += line + "\n";
    }
    return out;
  }

 private:
  ProxyRankOptions options_;
  CommState state_;
  uint64_t op_count_ = 0;
  bool failed_ = false;
  bool closed_ = false;
};

}  // namespace

ProxyResult ProxyRank::open(const ProxyRankOptions& options, std::unique_ptr<ProxyRank>* out) {
  auto rank = std::make_unique<ProxyRankImpl>(options);
  ProxyResult r = rank->init();
  if (!r.ok()) return r;
  *out = std::move(rank);
  return r;
}

int proxyNcclVersionCode() { return NCCL_VERSION_CODE; }

int proxyNumTypes() { return ncclNumTypes; }

size_t proxyTypeSize(int dtype) { return ncclTypeSize(static_cast<ncclDataType_t>(dtype)); }

}  // namespace tally::nccl_source
