// SPDX-License-Identifier: Apache-2.0
// The verbs Connection's calls: posting, testing, registering, closing. The helper thread's side
// is in datapath.cc; the design is in connection.h.
#include "transport/verbs/connection.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>

#include "common/log.h"
#include "transport/core_adapters.h"
#include "transport/verbs/core.h"

namespace tally::transport::verbs {
namespace {

std::shared_ptr<Op> newOp() { return std::allocate_shared<Op>(PoolAllocator<Op>()); }

using VerbsRequest = CoreRequest<Core, Op>;
using VerbsConnection = CoreConnection<Core>;

}  // namespace

VerbsMemoryRegion::VerbsMemoryRegion(RegistrationCache::Pin pin, MemoryType memory_type)
    : pin_(std::move(pin)) {
  type = memory_type;
  if (pin_) {
    base_ = pin_.base();
    length_ = pin_.length();
    lkey_ = pin_.lkey();
    rkey_ = pin_.rkey();
  }
}

VerbsMemoryRegion::VerbsMemoryRegion(std::shared_ptr<DeviceHandles> handles, ibv_mr* mr,
                                     uint64_t base, uint64_t length)
    : handles_(std::move(handles)), own_mr_(mr), base_(base), length_(length) {
  type = MemoryType::kCuda;
  lkey_ = mr->lkey;
  rkey_ = mr->rkey;
}

VerbsMemoryRegion::~VerbsMemoryRegion() {
  if (own_mr_ != nullptr) handles_->api->dereg_mr(own_mr_);
}

bool VerbsMemoryRegion::covers(const void* addr, size_t size) const {
  const uint64_t first = reinterpret_cast<uintptr_t>(addr);
  return length_ > 0 && first >= base_ && first + size <= base_ + length_;
}

Core::Core(std::unique_ptr<Endpoint> endpoint, std::unique_ptr<side::SideChannel> side,
           std::string peer, const VerbsOptions& options)
    : CoreBase(std::move(peer)),
      options_(options),
      device_(endpoint->deviceShared()),
      max_requests_(endpoint->maxRequests()),
      endpoint_(std::move(endpoint)),
      side_(std::move(side)) {
  recv_limit_ = std::min(max_requests_, endpoint_->peerMaxRequests());
  backlog_.resize(static_cast<size_t>(endpoint_->dataQps()) + 1);
  outstanding_.assign(static_cast<size_t>(endpoint_->dataQps()) + 1, 0);
  notice_slots_.assign(static_cast<size_t>(endpoint_->controlSendSlots()), false);
  for (int slot = endpoint_->controlSendSlots() - 1; slot >= 0; --slot) {
    free_control_.push_back(slot);
  }
}

Core::~Core() { close(); }

Status Core::start() {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return Status::fromErrno("eventfd", errno);
  try {
    thread_ = std::thread([this] { pollLoop(); });
  } catch (const std::system_error& e) {
    return Status::system(std::string("cannot start the verbs helper thread: ") + e.what());
  }
  return Status::ok();
}

Status Core::pin(const void* data, size_t size, MemoryRegion* mr, RegistrationCache::Pin* pin,
                 uint32_t* lkey, uint32_t* rkey) {
  auto* region = dynamic_cast<VerbsMemoryRegion*>(mr);
  if (region != nullptr && region->covers(data, size)) {
    // The caller keeps the region alive until the request is done (transport.h).
    *lkey = region->lkey();
    *rkey = region->rkey();
    return Status::ok();
  }
  // No region (or one that does not cover the buffer): host memory, through the cache.
  TALLY_RETURN_IF_ERROR(device_->cache().acquire(data, size, MemoryType::kHost, pin));
  *lkey = pin->lkey();
  *rkey = pin->rkey();
  return Status::ok();
}

Status Core::isend(const void* data, size_t size, int tag, MemoryRegion* mr,
                   std::unique_ptr<Request>* req) {
  if (data == nullptr && size > 0) return Status::internal("isend: null buffer");
  if (size > kMaxChunks * kMaxChunkBytes) {
    return Status::invalidUsage("isend of " + std::to_string(size) +
                                " bytes: the verbs transport sends at most 255 GiB at once");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_) return error_;
    if (sends_in_flight_ >= max_requests_) {
      *req = nullptr;
      return Status::ok();
    }
    ++sends_in_flight_;  // reserved while registering outside the lock
  }
  auto op = newOp();
  op->is_send = true;
  op->send_data = static_cast<const uint8_t*>(data);
  op->send_size = size;
  op->send_tag = tag;
  uint32_t unused = 0;
  Status status = size > 0 ? pin(data, size, mr, &op->pins[0], &op->lkey, &unused) : Status::ok();
  std::lock_guard<std::mutex> lock(mu_);
  if (!status.isOk() || failed_) {
    --sends_in_flight_;
    return status.isOk() ? error_ : status;
  }
  unmatched_.push_back(op);
  matchLocked();
  *req = std::make_unique<VerbsRequest>(shared_from_this(), std::move(op));
  return Status::ok();
}

Status Core::irecv(int n, void* const* data, const size_t* sizes, const int* tags,
                   MemoryRegion* const* mrs, std::unique_ptr<Request>* req) {
  TALLY_RETURN_IF_ERROR(checkRecvArgs(n, data, sizes));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_) return error_;
    if (recvs_in_flight_ >= recv_limit_) {
      *req = nullptr;
      return Status::ok();
    }
    ++recvs_in_flight_;
  }
  auto op = newOp();
  fillRecvBuffers(op.get(), n, data, sizes, tags);
  Status status;
  for (int i = 0; i < n && status.isOk(); ++i) {
    uint32_t unused = 0;
    if (sizes[i] > 0) {
      status = pin(data[i], sizes[i], mrs != nullptr ? mrs[i] : nullptr, &op->pins[i], &unused,
                   &op->rkeys[i]);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!status.isOk() || failed_) {
    --recvs_in_flight_;
    return status.isOk() ? error_ : status;
  }
  op->seq = next_seq_;
  next_seq_ = (next_seq_ + 1) & kSeqMask;
  window_.push_back(op);
  ClearToSend cts;
  cts.seq = op->seq;
  cts.n = n;
  for (int i = 0; i < n; ++i) {
    cts.entries[i] = {op->tags[i], op->rkeys[i], reinterpret_cast<uintptr_t>(op->data[i]),
                      op->capacity[i]};
  }
  uint8_t bytes[kControlBytes];
  sendControlLocked(bytes, encodeClearToSend(cts, bytes));
  *req = std::make_unique<VerbsRequest>(shared_from_this(), std::move(op));
  return Status::ok();
}

Status Core::registerMemory(void* data, size_t size, MemoryType type,
                            std::unique_ptr<MemoryRegion>* mr) {
  RegistrationCache::Pin pin;
  if (size > 0) TALLY_RETURN_IF_ERROR(device_->cache().acquire(data, size, type, &pin));
  *mr = std::make_unique<VerbsMemoryRegion>(std::move(pin), type);
  return Status::ok();
}

Status Core::registerDmaBuf(void* data, size_t size, int fd, uint64_t offset,
                            std::unique_ptr<MemoryRegion>* mr) {
  const DeviceProperties& properties = device_->properties();
  if (!properties.dmabuf) {
    return Status::invalidUsage(
        "registerDmaBuf of " + std::to_string(size) + " bytes (fd " + std::to_string(fd) +
        ") on peer " + peer_ + ": RDMA device " + properties.name +
        " cannot register dma-buf memory (" +
        (device_->api().reg_dmabuf_mr == nullptr
             ? "libibverbs has no ibv_reg_dmabuf_mr, rdma-core 34+ has"
             : "the provider or the kernel does not support ibv_reg_dmabuf_mr") +
        "); use registerMemory with nvidia-peermem loaded");
  }
  if (size == 0) {
    *mr = std::make_unique<VerbsMemoryRegion>(RegistrationCache::Pin(), MemoryType::kCuda);
    return Status::ok();
  }
  // The device addresses the region by the buffer's own pointer, as the data path names it.
  const uint64_t iova = reinterpret_cast<uintptr_t>(data);
  ibv_mr* raw = nullptr;
  TALLY_RETURN_IF_ERROR(registerDmaBufRange(*device_->handles(), iova, size, fd, offset, &raw));
  *mr = std::make_unique<VerbsMemoryRegion>(device_->handles(), raw, iova, size);
  return Status::ok();
}

Status Core::iflush(int n, void* const* data, const size_t* sizes, MemoryRegion* const* mrs,
                    std::unique_ptr<Request>* req) {
  TALLY_RETURN_IF_ERROR(checkBufferCount("iflush", n));
  FlushRead reads[kMaxRecvs];
  int count = 0;
  for (int i = 0; i < n && mrs != nullptr; ++i) {
    const auto* region = dynamic_cast<const VerbsMemoryRegion*>(mrs[i]);
    if (region == nullptr || region->type != MemoryType::kCuda || sizes[i] == 0) continue;
    const auto length = static_cast<uint32_t>(std::min<size_t>(sizes[i], kFlushReadBytes));
    if (!region->covers(data[i], length)) {
      return Status::internal("iflush: buffer " + std::to_string(i) +
                              " lies outside the region it was received with");
    }
    reads[count++] = {reinterpret_cast<uintptr_t>(data[i]), region->rkey(), length};
  }
  if (count == 0) {
    *req = nullptr;
    return Status::ok();
  }
  std::shared_ptr<FlushQp> flush;
  {
    std::lock_guard<std::mutex> flush_lock(flush_mu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failed_) return error_;  // closed, too
    }
    if (!flush_) {
      TALLY_RETURN_IF_ERROR(FlushQp::create(device_, max_requests_ * kMaxRecvs,
                                            options_.timeouts.io_ms, peer_, &flush_));
    }
    flush = flush_;
  }
  return flush->post(count, reads, req);
}

void Core::close() {
  std::lock_guard<std::mutex> close_lock(close_mu_);
  if (closed_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    failLocked(Status::remote("connection to peer " + peer_ + " was closed"));
  }
  stop_ = true;
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t written = ::write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  uint64_t delivered = 0;
  std::unique_ptr<Endpoint> endpoint;
  {
    std::lock_guard<std::mutex> lock(mu_);
    delivered = chunks_delivered_;
    endpoint = std::move(endpoint_);
  }
  // Queue pairs go first: once they are destroyed the device writes no user memory.
  if (endpoint) endpoint->toError();
  endpoint.reset();
  {
    std::lock_guard<std::mutex> flush_lock(flush_mu_);
    if (flush_) flush_->close();
  }
  if (side_) {
    std::vector<uint8_t> farewell(8);
    for (int i = 0; i < 8; ++i) farewell[i] = static_cast<uint8_t>(delivered >> (8 * i));
    side_->close(farewell, 1000);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto unpin = [](Op& op) {
      for (auto& p : op.pins) p.reset();
    };
    for (auto& op : unmatched_) unpin(*op);
    for (auto& op : writing_) unpin(*op);
    for (auto& op : window_) unpin(*op);
    unmatched_.clear();
    writing_.clear();
    window_.clear();
    for (auto& queue : backlog_) queue.clear();
    peer_cts_.clear();
    control_backlog_.clear();
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
  wake_fd_ = -1;
  closed_ = true;
}

Status makeConnection(std::unique_ptr<Endpoint> endpoint, std::unique_ptr<side::SideChannel> side,
                      const std::string& peer, const VerbsOptions& options,
                      std::unique_ptr<Connection>* out) {
  const int data_qps = endpoint->dataQps();
  auto core = std::make_shared<Core>(std::move(endpoint), std::move(side), peer, options);
  Status status = core->start();
  if (!status.isOk()) {
    core->close();
    return status;
  }
  TALLY_INFO(log::kNet, "verbs: connection to peer %s over %d data queue pair(s)", peer.c_str(),
             data_qps);
  *out = std::make_unique<VerbsConnection>(std::move(core));
  return Status::ok();
}

}  // namespace tally::transport::verbs
