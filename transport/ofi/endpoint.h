// SPDX-License-Identifier: Apache-2.0
// One connection's libfabric objects: an RDM endpoint with its own completion queue and a
// one-entry address vector (the peer), in the device's shared domain.
//
// Why one endpoint per connection rather than one per device: close() can then keep the promise
// of transport.h that no I/O touches a request's buffers once it returns, even for a send the
// peer has not received yet: closing the endpoint ends every operation on it, where a shared
// endpoint could only cancel receives (a rendezvous send cannot be taken back). It also gives
// each connection's helper thread its queue alone and the tag space to itself. The cost is one
// provider endpoint per connection: tcp;ofi_rxm preallocates about 70 MB of bounce buffers per
// endpoint (measured with libfabric 1.17) and takes a noticeable time to open one, so a process
// with hundreds of ofi connections needs the shared-endpoint design (docs/transports.md).
#pragma once

#include <rdma/fi_endpoint.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/ofi/fabric.h"

namespace tally::transport::ofi {

class Endpoint {
 public:
  // Opens the completion queue (FI_WAIT_FD when the provider has it, so the helper thread can
  // sleep), the address vector and the endpoint, binds and enables them, and reads the
  // endpoint's name. `queue_depth` sizes the completion queue and caps the transmit and receive
  // queues.
  static Status open(std::shared_ptr<Domain> domain, size_t queue_depth,
                     std::unique_ptr<Endpoint>* out);
  ~Endpoint() { close(); }

  // Adds the peer's endpoint name; sends and receives then go to and from it.
  Status insertPeer(const std::vector<uint8_t>& name);
  // Closes the endpoint, then its queue and address vector. The provider is done with every
  // buffer once this returns. Idempotent.
  void close();

  const std::shared_ptr<Domain>& domain() const { return domain_; }
  fid_ep* ep() const { return ep_.get(); }
  fid_cq* cq() const { return cq_.get(); }
  // The queue's file descriptor to poll() on, -1 when the provider has none.
  int waitFd() const { return wait_fd_; }
  fi_addr_t peer() const { return peer_; }
  // This endpoint's own address, for RMA reads of local memory; FI_ADDR_UNSPEC without
  // Domain::rma_read.
  fi_addr_t self() const { return self_; }
  const std::vector<uint8_t>& name() const { return name_; }
  // The largest payload chunk this end sends or receives: the domain's, and over ofi_rxm no
  // more than rxm sends eagerly.
  uint64_t maxChunk() const { return max_chunk_; }

 private:
  std::shared_ptr<Domain> domain_;
  FidPtr<fid_av> av_;
  FidPtr<fid_cq> cq_;
  FidPtr<fid_ep> ep_;  // declared last: closed first
  int wait_fd_ = -1;
  fi_addr_t peer_ = FI_ADDR_UNSPEC;
  fi_addr_t self_ = FI_ADDR_UNSPEC;
  std::vector<uint8_t> name_;
  uint64_t max_chunk_ = 0;
};

}  // namespace tally::transport::ofi
