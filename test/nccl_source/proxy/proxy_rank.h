// SPDX-License-Identifier: Apache-2.0
// One rank of the proxy tests: NCCL's own CollNet proxy (coll_net.cc, compiled from NCCL's
// source) connected to Tally through NCCL's own plugin loader, with CPU threads in the place of
// the GPU kernel. No NCCL type appears here: the NCCL side (proxy_driver.cc and its neighbours)
// is compiled as C++17 against NCCL's headers, the tests as C++20 against Tally's.
//
// A ProxyRank lives in one forked rank process (one node of the CollNet group, one GPU per node)
// and is used from one thread. Every wait inside it is bounded by the deadline it was given; a
// wait that runs out ends the call with an error, never a hang.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace tally::nccl_source {

// Gathers `bytes` bytes from every rank into `all` (rank r's at all + r * bytes), as NCCL's
// bootstrap all-gather does. Returns "" or why it failed.
using AllGatherFn = std::function<std::string(const void* mine, size_t bytes, void* all)>;

struct ProxyRankOptions {
  int rank = 0;
  int nranks = 1;
  int channels = 1;        // CollNet channels connected (each a send and a receive connector)
  uint64_t comm_hash = 0;  // NCCL's commHash: the same on every rank of the communicator
  AllGatherFn all_gather;
  int64_t timeout_ms = 60000;  // bound on each setup step and each collective
};

// The collectives NCCL runs through the CollNet proxy with one GPU per node: CollNetChain
// all-reduce, CollNetDirect all-gather and reduce-scatter.
enum class ProxyColl { kAllReduce, kAllGather, kReduceScatter };

// A user-created op (NCCL numbers them from ncclNumOps, 5, on): PreMulSum with this scalar. The
// GPU multiplies each input by it and the network sums; 2 keeps every result exact in the types
// the tests use it with (float32, float64, int32, int64).
inline constexpr int kPreMulSumOp = 5;
inline constexpr int kPreMulSumScalar = 2;

// One collective as NCCL's enqueue hands it to the proxy and the kernel.
struct ProxyCollective {
  ProxyColl coll = ProxyColl::kAllReduce;
  int dtype = 7;  // ncclDataType_t (7: float32)
  // The user's ncclRedOp_t: 0 sum, 1 prod, 2 max, 3 min, 4 avg, and kPreMulSumOp for an op the
  // user made with ncclRedOpCreatePreMulSum (scalar kPreMulSumScalar).
  int op = 0;
  size_t count = 0;  // all-reduce: elements; all-gather and reduce-scatter: elements per rank
  int chunk_bytes = 128 << 10;     // NCCL's chunkSize for this collective
  int channels = 1;                // channels it runs on (at most ProxyRankOptions::channels)
  const void* sendbuff = nullptr;  // the user's buffers, host memory here
  void* recvbuff = nullptr;
};

// What the spy between NCCL's proxy and Tally's CollNet table saw, counted since open().
struct ProxyCalls {
  int listen = 0, connect = 0, close_listen = 0, close_coll = 0;
  int reg_mr = 0, dereg_mr = 0;
  int live_mhandles_at_close = -1;  // registrations not yet deregistered when closeColl came
  int calls = 0;                    // iallreduce + iallgather + ireducescatter
  int null_requests = 0;            // calls that returned success with a NULL request
  int tests = 0;
  int last_red_op = -1;  // ncclRedOp_t of the last iallreduce/ireducescatter
  int last_dtype = -1;
  std::string first_error;  // the first non-success a Tally function returned, "fn rc=N"
};

struct ProxyResult {
  int nccl_rc = 0;  // ncclResult_t of the NCCL function that failed (0: success)
  std::string error;
  bool ok() const { return nccl_rc == 0 && error.empty(); }
};

class ProxyRank {
 public:
  // Loads Tally through NCCL's ncclNetInit (NCCL_NET_PLUGIN must name the plugin), then for each
  // channel runs NCCL's receive setup (listen), the handle all-gather, the receive connect
  // (CollNet connect on the first, then regMr) and the send setup and connect, the order
  // ncclTransportCollNetSetup keeps. On error *out stays empty.
  static ProxyResult open(const ProxyRankOptions& options, std::unique_ptr<ProxyRank>* out);
  virtual ~ProxyRank() = default;

  // Runs one collective: the proxy's send and receive progress functions on this thread, one
  // CPU thread per connection in the kernel's place. A non-success from proxyProgress ends the
  // call with that code; then the collective's GPU-side threads are stopped and the rank can
  // only close().
  virtual ProxyResult run(const ProxyCollective& c) = 0;

  // NCCL's teardown: proxyFree of every connection in the order they were made (deregMr, and
  // closeColl when the last one goes), then ncclNetFinalize. Checks that every pinned host
  // allocation NCCL made is freed.
  virtual ProxyResult close() = 0;

  virtual ProxyCalls calls() const = 0;
  // Lines NCCL (and Tally through NCCL's logger) logged at WARN.
  virtual std::string warnings() const = 0;
};

// NCCL_VERSION_CODE of the NCCL the proxy side was compiled from.
int proxyNcclVersionCode();

// ncclNumTypes: 12 with float8 (2.24 on), 10 before.
int proxyNumTypes();

// ncclTypeSize of an ncclDataType_t.
size_t proxyTypeSize(int dtype);

}  // namespace tally::nccl_source
