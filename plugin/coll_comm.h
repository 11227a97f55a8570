// The CollNet objects behind NCCL's ncclCollNet table: plain C++ over reducer::CollClient.
//
// Threads: every method may be called from any NCCL proxy thread; CollClient is thread-safe and
// the request pool has its own lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/status.h"
#include "common/types.h"
#include "plugin/abi/nccl_types.h"
#include "plugin/request_pool.h"
#include "reducer/coll_client.h"

namespace tally::plugin {

static_assert(reducer::kCollHandleBytes <= NCCL_NET_HANDLE_MAXSIZE,
              "CollNet handle fits NCCL's buffer");

inline constexpr uint32_t kCollListenMagic = 0x544c434c;   // 'TLCL'
inline constexpr uint32_t kCollCommMagic = 0x544c4343;     // 'TLCC'
inline constexpr uint32_t kCollMrMagic = 0x544c434d;       // 'TLCM'
inline constexpr uint32_t kCollRequestMagic = 0x544c4352;  // 'TLCR'

class CollComm;

// listen's comm: only remembers the device; the handle bytes carry everything connect needs.
struct CollListenComm {
  uint32_t magic = kCollListenMagic;
  int dev = 0;
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
  std::unique_ptr<reducer::CollRequest> request;
};

class CollComm {
 public:
  // Blocks (bounded by the connect timeout) until the group has formed.
  static Status connect(const reducer::CollOptions& options, int dev, const void* const* handles,
                        int nranks, int rank, std::unique_ptr<CollComm>* out);

  CollComm(int dev, int max_requests, std::unique_ptr<reducer::CollClient> client);
  // Closes the client (stopping its threads) before the request slots go.
  ~CollComm();
  CollComm(const CollComm&) = delete;
  CollComm& operator=(const CollComm&) = delete;

  bool valid() const { return magic_ == kCollCommMagic; }
  int dev() const { return dev_; }

  // Success with *out null: no room now; NCCL retries.
  Status iallreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                    CollReq** out);
  // When done, *bytes (if non-null) = count x element size, and the slot is freed.
  Status test(CollReq* req, bool* done, size_t* bytes);
  bool ownsRequest(const CollReq* req) const;

 private:
  uint32_t magic_ = kCollCommMagic;
  int dev_;
  std::unique_ptr<reducer::CollClient> client_;
  RequestPool<CollReq> requests_;
};

}  // namespace tally::plugin
