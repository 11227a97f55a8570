// SPDX-License-Identifier: Apache-2.0
// The verbs Connection: an Endpoint (queue pairs on the device) plus the side channel that
// watches the peer, and a helper thread that polls the completion queue.
//
// Why RDMA write with immediate, receiver-driven
//   transport.h lets a grouped receive take the next n messages by tag, in any order, and lets
//   sends come before receives. With send/receive verbs the device picks the receive buffer in
//   posting order, so a message could not land in the buffer its tag names: it would need a
//   bounce buffer and a copy on the receiving side (and a rendezvous anyway for large messages).
//   Instead each irecv sends the peer a small "clear to send" (CTS) naming its buffers (address,
//   rkey, capacity, tag); the sender matches its queued sends to CTS entries in order and writes
//   each message straight into its buffer with RDMA write with immediate. Zero copies at both
//   ends for every size, one control message per receive, and the immediate (wire.h) tells the
//   receiver which buffer completed. The cost is one trip of latency when the receive is posted
//   after the send; NCCL posts receives early, so it rarely pays it.
//
// Queue pairs, depths and flow control
//   Queue pair 0 carries CTS and mismatch notices (SEND into a ring of registered slots); the data
//   queue pairs carry the writes. A message of at least 2*min_stripe bytes is cut into up to one
//   chunk per data queue pair (more past 1 GiB per chunk), spread round robin. Receives in flight
//   are limited to the smaller max_requests of both sides, so the peer's control ring always has
//   room; data queue pairs post max_requests * kMaxRecvs bufferless receives. Anything beyond (a
//   multi-GiB message) waits in the device's receiver-not-ready retry, which is set to retry
//   forever; sends beyond a queue pair's depth wait in a backlog here.
//
// Threads and locks
//   One mutex per connection (Core::mu_) guards all state, including every ibv_post_send and
//   ibv_post_recv (user threads post from isend/irecv, the helper thread from completions).
//   The helper thread polls the completion queue, spinning briefly and then sleeping on the
//   completion channel; every 20 ms at the latest it also polls the side channel (peer gone or
//   said farewell) and checks the I/O timeout. Registration happens outside the lock.
//
// Ending
//   close() stops the helper thread, moves the queue pairs to ERROR and destroys them (no more
//   DMA into user memory), then sends a farewell on the side channel carrying how many data
//   chunks it delivered. A peer that sees the farewell waits (up to a second) until that many
//   chunks completed here, so a message sent just before close still arrives, then fails every
//   pending request with kRemote. A failure found here (a bad completion, garbage from the peer)
//   closes the side channel at once, so the peer learns of it within 20 ms.
//
// GPU memory
//   kCuda memory is registered like host memory (ibv_reg_mr through nvidia-peermem) or, given a
//   dma-buf fd, with ibv_reg_dmabuf_mr into a region of its own; both also allow remote read.
//   iflush reads a few bytes back from each kCuda buffer of a completed receive through a queue
//   pair connected to itself (FlushQp, flush.h), so the GPU sees the bytes before a kernel
//   reads them. DeviceProperties::cuda_memory and ::dmabuf say which ways work (context.h).
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "transport/side_channel.h"
#include "transport/transport.h"
#include "transport/verbs/context.h"
#include "transport/verbs/endpoint.h"
#include "transport/verbs/verbs.h"

namespace tally::transport::verbs {

// Builds a Connection over a brought-up Endpoint and its side channel, and starts the helper
// thread. On error both are closed and *out is untouched.
Status makeConnection(std::unique_ptr<Endpoint> endpoint, std::unique_ptr<side::SideChannel> side,
                      const std::string& peer, const VerbsOptions& options,
                      std::unique_ptr<Connection>* out);

// The MemoryRegion of the verbs backend: a pinned registration-cache entry (registerMemory), or
// a dma-buf registration of its own (registerDmaBuf), deregistered with the region. The data path
// uses either's keys the same way.
class VerbsMemoryRegion final : public MemoryRegion {
 public:
  VerbsMemoryRegion(RegistrationCache::Pin pin, MemoryType type);
  // Takes `mr`, which covers [base, base+length) in the device's addressing.
  VerbsMemoryRegion(std::shared_ptr<DeviceHandles> handles, ibv_mr* mr, uint64_t base,
                    uint64_t length);
  ~VerbsMemoryRegion() override;
  VerbsMemoryRegion(const VerbsMemoryRegion&) = delete;
  VerbsMemoryRegion& operator=(const VerbsMemoryRegion&) = delete;

  uint32_t lkey() const { return lkey_; }
  uint32_t rkey() const { return rkey_; }
  // Whether [addr, addr+size) lies inside the registration (never for an empty one).
  bool covers(const void* addr, size_t size) const;

 private:
  RegistrationCache::Pin pin_;
  std::shared_ptr<DeviceHandles> handles_;  // with own_mr_
  ibv_mr* own_mr_ = nullptr;
  uint64_t base_ = 0;
  uint64_t length_ = 0;
  uint32_t lkey_ = 0;
  uint32_t rkey_ = 0;
};

}  // namespace tally::transport::verbs
