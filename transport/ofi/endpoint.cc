// SPDX-License-Identifier: Apache-2.0
#include "transport/ofi/endpoint.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <mutex>

#include "common/log.h"

namespace tally::transport::ofi {
namespace {

// Largest endpoint name Tally carries in its setup (efa's is 32 bytes, sockaddr_in6 28).
constexpr size_t kMaxNameBytes = 256;

Status openQueue(const Domain& domain, size_t size, fi_wait_obj wait, FidPtr<fid_cq>* out) {
  fi_cq_attr attr{};
  attr.format = FI_CQ_FORMAT_TAGGED;
  attr.size = size;
  attr.wait_obj = wait;
  fid_cq* cq = nullptr;
  const int ret = fi_cq_open(domain.domain.get(), &attr, &cq, nullptr);
  if (ret != 0) return Status::internal(domain.errorText("fi_cq_open", ret));
  out->reset(cq);
  return Status::ok();
}

// rxm's eager size when the endpoint does not report it: its default buffer size less the
// 64-byte header that libfabric before about 1.12 counted inside it.
constexpr uint64_t kRxmFallbackEagerBytes = 16384 - 64;

// Whether the provider is layered on ofi_rxm ("tcp;ofi_rxm", "verbs;ofi_rxm").
bool layeredOnRxm(const std::string& provider) {
  return provider.find("ofi_rxm") != std::string::npos;
}

// The largest message rxm sends eagerly from `ep` (enabled): its buffered limit
// (FI_OFI_RXM_BUFFER_SIZE, 16 KiB by default), or kRxmFallbackEagerBytes when it says nothing.
uint64_t rxmEagerBytes(fid_ep* ep) {
  size_t limit = 0;
  size_t len = sizeof(limit);
  const int ret = fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_LIMIT, &limit, &len);
  if (ret != 0 || len != sizeof(limit) || limit < 4096) return kRxmFallbackEagerBytes;
  return limit;
}

}  // namespace

Status Endpoint::open(std::shared_ptr<Domain> domain, size_t queue_depth,
                      std::unique_ptr<Endpoint>* out) {
  auto endpoint = std::make_unique<Endpoint>();
  endpoint->domain_ = std::move(domain);
  const Domain& d = *endpoint->domain_;

  // A waitable queue lets the helper thread sleep in poll(); providers without one are polled.
  if (!openQueue(d, queue_depth, FI_WAIT_FD, &endpoint->cq_).isOk()) {
    TALLY_RETURN_IF_ERROR(openQueue(d, queue_depth, FI_WAIT_NONE, &endpoint->cq_));
  } else {
    int fd = -1;
    if (fi_control(&endpoint->cq_->fid, FI_GETWAIT, &fd) == 0) endpoint->wait_fd_ = fd;
  }

  fi_av_attr av_attr{};
  av_attr.type =
      d.info->domain_attr->av_type != FI_AV_UNSPEC ? d.info->domain_attr->av_type : FI_AV_TABLE;
  av_attr.count = 2;  // the peer, and this endpoint itself for iflush's read-back
  fid_av* av = nullptr;
  int ret = fi_av_open(d.domain.get(), &av_attr, &av, nullptr);
  if (ret != 0) return Status::internal(d.errorText("fi_av_open", ret));
  endpoint->av_.reset(av);

  // The queues a connection needs (its control receives, a send and a chunk per request), not
  // the provider's default depth: some providers size their bounce-buffer pools by it.
  InfoPtr info(d.api->dupinfo(d.info.get()), InfoDeleter{d.api});
  if (!info) return Status::internal("fi_dupinfo could not copy the domain's info");
  if (info->tx_attr->size > queue_depth) info->tx_attr->size = queue_depth;
  if (info->rx_attr->size > queue_depth) info->rx_attr->size = queue_depth;
  fid_ep* ep = nullptr;
  ret = fi_endpoint(d.domain.get(), info.get(), &ep, nullptr);
  if (ret != 0) return Status::system(d.errorText("fi_endpoint", ret));
  endpoint->ep_.reset(ep);
  ret = fi_ep_bind(ep, &av->fid, 0);
  if (ret == 0) ret = fi_ep_bind(ep, &endpoint->cq_->fid, FI_TRANSMIT | FI_RECV);
  if (ret != 0) return Status::internal(d.errorText("fi_ep_bind", ret));
  ret = fi_enable(ep);
  if (ret != 0) return Status::system(d.errorText("fi_enable", ret));
  endpoint->max_chunk_ = d.max_chunk;
  if (layeredOnRxm(d.provider) && !d.rxm_rendezvous) {
    // Every payload chunk goes eagerly. A larger message that arrives before its receive is
    // posted (chunk receives are posted when their header is read, so most do) waits in rxm
    // holding only its sender's connection index, and libfabric 1.17 looks that index up
    // unchecked when the receive comes: after the sender closed, in freed memory, and the
    // process dies (docs/transports.md, "rxm's rendezvous"). An eager message is copied whole
    // into rxm's buffers on arrival and never looks its connection up again.
    endpoint->max_chunk_ = std::min(endpoint->max_chunk_, rxmEagerBytes(ep));
    std::call_once(d.chunk_logged, [&] {
      TALLY_INFO(log::kNet | log::kInit,
                 "ofi: payload chunks of at most %llu bytes over %s (rxm's eager size)",
                 static_cast<unsigned long long>(endpoint->max_chunk_), d.provider.c_str());
    });
  }

  size_t length = kMaxNameBytes;
  endpoint->name_.resize(length);
  ret = fi_getname(&ep->fid, endpoint->name_.data(), &length);
  if (ret != 0) return Status::internal(d.errorText("fi_getname", ret));
  endpoint->name_.resize(length);
  if (d.rma_read) {
    ret = fi_av_insert(av, endpoint->name_.data(), 1, &endpoint->self_, 0, nullptr);
    if (ret != 1) {
      return Status::internal(d.errorText("fi_av_insert", ret < 0 ? ret : -FI_EINVAL) +
                              " of the endpoint's own name");
    }
  }
  *out = std::move(endpoint);
  return Status::ok();
}

Status Endpoint::insertPeer(const std::vector<uint8_t>& name) {
  if (name.empty()) return Status::remote("peer sent an empty endpoint name");
  fi_addr_t addr = FI_ADDR_UNSPEC;
  const int ret = fi_av_insert(av_.get(), name.data(), 1, &addr, 0, nullptr);
  if (ret != 1) {
    return Status::remote(domain_->errorText("fi_av_insert", ret < 0 ? ret : -FI_EINVAL) +
                          ": the peer's endpoint name is not an address of this fabric");
  }
  peer_ = addr;
  return Status::ok();
}

void Endpoint::close() {
  ep_.reset();
  cq_.reset();
  av_.reset();
  wait_fd_ = -1;
}

}  // namespace tally::transport::ofi
