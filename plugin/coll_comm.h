// SPDX-License-Identifier: Apache-2.0
// The CollNet objects behind NCCL's ncclCollNet table: plain C++ over worker_client::CollClient.
//
// Threads: every method may be called from any NCCL proxy thread; CollClient is thread-safe, the
// request pool has its own lock and the counters are atomic.
//
// At close a communicator logs one INFO line with what it did, e.g.
//   "CollNet comm 0x5c1f... rank 1/4 closed: 1234 all-reduces, 5.62 GiB, 12.3 s open,
//    2 reducers from CLUSTER_SPEC workerpool2, 0 errors"
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/types.h"
#include "plugin/abi/nccl_types.h"
#include "plugin/requests.h"
#include "worker_client/coll_client.h"

namespace tally::plugin {

static_assert(worker_client::kCollHandleBytes <= NCCL_NET_HANDLE_MAXSIZE,
              "CollNet handle fits NCCL's buffer");

inline constexpr uint32_t kCollListenMagic = 0x544c434c;   // 'TLCL'
inline constexpr uint32_t kCollCommMagic = 0x544c4343;     // 'TLCC'
inline constexpr uint32_t kCollMrMagic = 0x544c434d;       // 'TLCM'
inline constexpr uint32_t kCollRequestMagic = 0x544c4352;  // 'TLCR'

class CollComm;

// listen's comm: remembers the device and, when NCCL gave a context, the communicator's id (for
// the close summary); the handle bytes carry everything connect needs.
struct CollListenComm {
  uint32_t magic = kCollListenMagic;
  int dev = 0;
  bool has_comm_id = false;
  uint64_t comm_id = 0;
};

// What a communicator knows about itself for its log lines.
struct CollCommInfo {
  bool has_comm_id = false;  // v11 tables pass NCCL's communicator id through init's context
  uint64_t comm_id = 0;
  std::string reducer_origin;  // ReducerList::origin, e.g. "CLUSTER_SPEC workerpool2"
};

// Counters of one communicator, as of the moment they are read.
struct CollCommStats {
  uint64_t allreduces = 0;  // iallreduce calls that posted a request
  uint64_t allgathers = 0;      // iallgather calls that posted a request
  uint64_t reducescatters = 0;  // ireducescatter calls that posted a request
  uint64_t bytes = 0;       // bytes received by collectives that completed
  uint64_t errors = 0;      // non-ok Status returned by iallreduce or test
  double seconds_open = 0;  // from connect to now (or to close, once closed)
};

// Host registration: CollClient works on plain pointers, so this only records the range.
struct CollMr {
  uint32_t magic = kCollMrMagic;
  void* data = nullptr;
  size_t size = 0;
};

struct CollReq {
  uint32_t magic = 0;  // kCollRequestMagic while in use
  CollComm* owner = nullptr;
  worker_client::CollRequest request;  // a value: the pool slot holds it, nothing is allocated per call
  // What the call reads (its send buffer) and writes (its recv buffer) while in flight: spans
  // covering every byte it touches (a larger span is safe, a smaller one is not). Set by
  // CollComm::track once posted.
  MemRange reads;
  MemRange writes;
};

// The most CollNet requests NCCL holds on one communicator without testing them: NCCL_STEPS (8)
// per group of 8 channels, and at most 64 channels. NCCL's send proxy retries a NULL post before
// it tests the requests it holds, so a slot that stays taken until its test could never come
// back: the pool has at least this many, and the calls in flight are bounded by the client
// (TALLY_COLL_MAX_REQUESTS), whose calls complete without a test.
inline constexpr size_t kNcclUntestedRequests = 8 * (64 / 8);

class CollComm {
 public:
  // Blocks (bounded by the connect timeout) until the group has formed.
  static Status connect(const worker_client::CollOptions& options, int dev, const void* const* handles,
                        int nranks, int rank, CollCommInfo info, std::unique_ptr<CollComm>* out);

  // `reducers` is the number of reducers the client talks to, for the summary.
  CollComm(int dev, int max_requests, std::unique_ptr<worker_client::CollClient> client,
           CollCommInfo info = {}, size_t reducers = 0);
  // close(), then the request slots go.
  ~CollComm();
  CollComm(const CollComm&) = delete;
  CollComm& operator=(const CollComm&) = delete;

  bool valid() const { return magic_ == kCollCommMagic; }
  int dev() const { return dev_; }

  // Success with *out null: no room now; NCCL retries.
  Status iallreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                    CollReq** out);
  // Same contract; worker_client::CollClient's iallgather and ireducescatter say what they compute.
  Status iallgather(const void* send, void* recv, const worker_client::CollWindow& window,
                    CollReq** out);
  Status ireducescatter(const void* send, void* recv, const worker_client::CollWindow& window,
                        DataType type, ReduceOp op, CollReq** out);
  // When done, *bytes (if non-null) = the bytes received, and the slot is freed.
  Status test(CollReq* req, bool* done, size_t* bytes);
  bool ownsRequest(const CollReq* req) const;

  // NCCL's deregMr of [data, data+size): from here on NCCL may free that memory. When unfinished
  // calls (not done, or failed) read or write any of it, the communicator is aborted first
  // ("CollNet comm aborted: memory deregistered with N calls in flight", the sticky error their
  // tests then return) and this returns once no Tally thread can touch caller memory any more.
  // Returns the number of such calls (0: nothing to do).
  int releaseMemory(const void* data, size_t size);

  // Closes the client (stopping its threads) and logs summary() at INFO. Idempotent; the
  // destructor calls it.
  void close();
  CollCommStats stats() const;
  // "CollNet comm 0x... rank r/n closed: N all-reduces, X GiB, S s open, R reducers from O,
  // E errors" ("comm rank r/n" when NCCL gave no communicator id).
  std::string summary() const;

 private:
  using Clock = std::chrono::steady_clock;

  // A posted request's ranges, recorded for releaseMemory (every posting function calls it once
  // the call is posted, and test() drops it when done).
  void track(CollReq* req, MemRange reads, MemRange writes);
  void untrackAndRelease(CollReq* req);

  uint32_t magic_ = kCollCommMagic;
  int dev_;
  std::unique_ptr<worker_client::CollClient> client_;
  CollCommInfo info_;
  size_t reducers_;
  Clock::time_point opened_ = Clock::now();
  std::atomic<int64_t> closed_ns_{-1};  // time open, fixed by close(); -1 while open
  std::atomic<uint64_t> allreduces_{0};
  std::atomic<uint64_t> allgathers_{0};
  std::atomic<uint64_t> reducescatters_{0};
  // Takes a request slot and posts through `post` (a call of client_); counts it in `calls`.
  template <typename Post>
  Status postWith(std::atomic<uint64_t>* calls, MemRange reads, MemRange writes, CollReq** out,
                  Post post);
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> errors_{0};
  RequestPool<CollReq> requests_;
  // Posted requests not yet finished (tested done), with their ranges. Capacity is the pool's, so
  // tracking allocates nothing.
  std::mutex tracked_mu_;
  std::vector<CollReq*> tracked_;
};

}  // namespace tally::plugin
