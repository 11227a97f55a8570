// The Request and Connection the RDMA backends hand out: thin forwards to the backend's Core,
// which owns every piece of state. A Request holds the Core by shared_ptr, so one that outlives
// its Connection (allowed after close, transport.h) stays safe.
//
// Core needs: test(const Op&, bool*, size_t*), wait(const Op&, int64_t, size_t*), isend,
// irecv and registerMemory with Connection's signatures, close() and peer().
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "common/small_pool.h"
#include "transport/transport.h"

namespace tally::transport {

template <class Core, class Op>
class CoreRequest final : public Request {
 public:
  TALLY_POOLED_NEW(CoreRequest);

  CoreRequest(std::shared_ptr<Core> core, std::shared_ptr<Op> op)
      : core_(std::move(core)), op_(std::move(op)) {}
  Status test(bool* done, size_t* sizes) override { return core_->test(*op_, done, sizes); }
  Status wait(int64_t timeout_ms, size_t* sizes) override {
    return core_->wait(*op_, timeout_ms, sizes);
  }

 private:
  std::shared_ptr<Core> core_;
  std::shared_ptr<Op> op_;
};

template <class Core>
class CoreConnection final : public Connection {
 public:
  explicit CoreConnection(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  ~CoreConnection() override { core_->close(); }

  Status isend(const void* data, size_t size, int tag, MemoryRegion* mr,
               std::unique_ptr<Request>* req) override {
    return core_->isend(data, size, tag, mr, req);
  }
  Status irecv(int n, void* const* data, const size_t* sizes, const int* tags,
               MemoryRegion* const* mrs, std::unique_ptr<Request>* req) override {
    return core_->irecv(n, data, sizes, tags, mrs, req);
  }
  Status registerMemory(void* data, size_t size, MemoryType type,
                        std::unique_ptr<MemoryRegion>* mr) override {
    return core_->registerMemory(data, size, type, mr);
  }
  void close() override { core_->close(); }
  std::string peerName() const override { return core_->peer(); }

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace tally::transport
