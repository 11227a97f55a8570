// SPDX-License-Identifier: Apache-2.0
// The defaults of transport.h's optional Connection methods, for backends (TCP) that carry
// host memory only.
#include "transport/transport.h"

namespace tally::transport {

Status Connection::registerDmaBuf(void* /*data*/, size_t size, int fd, uint64_t /*offset*/,
                                  std::unique_ptr<MemoryRegion>* /*mr*/) {
  return Status::invalidUsage("registerDmaBuf of " + std::to_string(size) + " bytes (fd " +
                              std::to_string(fd) + ") on peer " + peerName() +
                              ": this transport cannot register dma-buf memory");
}

Status Connection::iflush(int /*n*/, void* const* /*data*/, const size_t* /*sizes*/,
                          MemoryRegion* const* /*mrs*/, std::unique_ptr<Request>* req) {
  *req = nullptr;
  return Status::ok();
}

}  // namespace tally::transport
