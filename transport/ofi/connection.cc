// SPDX-License-Identifier: Apache-2.0
// The ofi Connection as callers see it: requests, registration, close. The helper thread is in
// progress.cc; core.h describes both.
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "common/log.h"
#include "common/small_pool.h"
#include "transport/core_adapters.h"
#include "transport/ofi/core.h"
#include "transport/ofi/internal.h"

namespace tally::transport::ofi {
namespace {

// How long close() gives the farewell to reach the side channel's socket.
constexpr int64_t kFarewellSendMs = 1000;

using OfiRequest = CoreRequest<Core, Op>;
using OfiConnection = CoreConnection<Core>;

std::shared_ptr<Op> newOp() { return std::allocate_shared<Op>(PoolAllocator<Op>()); }

}  // namespace

Core::Core(std::unique_ptr<Endpoint> endpoint, std::unique_ptr<side::SideChannel> side,
           const CoreParams& params)
    : CoreBase(params.peer),
      endpoint_(std::move(endpoint)),
      side_(std::move(side)),
      params_(params) {}

Core::~Core() { close(); }

Status Core::start() {
  const Domain& domain = *endpoint_->domain();
  control_slots_ = static_cast<size_t>(std::clamp(params_.max_requests, 8, kMaxControlSlots));
  const auto send_slots = static_cast<size_t>(params_.max_requests);
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) return Status::fromErrno("eventfd for an ofi connection", errno);
  recv_arena_ = std::make_unique<uint8_t[]>(control_slots_ * params_.slot_bytes);
  send_arena_ = std::make_unique<uint8_t[]>(send_slots * params_.slot_bytes);
  if (domain.needsLocalRegistration()) {
    TALLY_RETURN_IF_ERROR(
        domain.registerMemory(recv_arena_.get(), control_slots_ * params_.slot_bytes,
                              MemoryType::kHost, endpoint_->ep(), &recv_arena_mr_));
    TALLY_RETURN_IF_ERROR(domain.registerMemory(send_arena_.get(), send_slots * params_.slot_bytes,
                                                MemoryType::kHost, endpoint_->ep(),
                                                &send_arena_mr_));
    recv_arena_desc_ = fi_mr_desc(recv_arena_mr_.get());
    send_arena_desc_ = fi_mr_desc(send_arena_mr_.get());
    if (domain.rma_read) {
      TALLY_RETURN_IF_ERROR(domain.registerMemory(flush_scratch_, sizeof(flush_scratch_),
                                                  MemoryType::kHost, endpoint_->ep(),
                                                  &flush_scratch_mr_));
      flush_scratch_desc_ = fi_mr_desc(flush_scratch_mr_.get());
    }
  }
  recv_pieces_ = std::make_unique<Piece[]>(control_slots_);
  arrived_length_.assign(control_slots_, SIZE_MAX);
  send_pieces_ = std::make_unique<Piece[]>(send_slots);
  for (size_t i = send_slots; i > 0; --i) free_send_slots_.push_back(static_cast<uint32_t>(i - 1));
  for (uint64_t seq = 0; seq < control_slots_; ++seq) postControlRecv(seq);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error& e) {
    return Status::system(std::string("cannot start the ofi helper thread: ") + e.what());
  }
  return Status::ok();
}

Status Core::describe(void* data, size_t size, MemoryRegion* mr, Op* op, int index) {
  op->desc[index] = nullptr;
  if (size == 0) return Status::ok();
  const Domain& domain = *endpoint_->domain();
  const auto* region = dynamic_cast<const OfiMemoryRegion*>(mr);
  if (region != nullptr && region->domain.get() == &domain && region->covers(data, size) &&
      ((domain.mr_mode & FI_MR_ENDPOINT) == 0 || region->ep == endpoint_->ep())) {
    op->desc[index] = region->desc;
    return Status::ok();
  }
  if (!domain.needsLocalRegistration()) return Status::ok();
  // No usable registration: register this buffer for the life of the request.
  TALLY_RETURN_IF_ERROR(
      domain.registerMemory(data, size, MemoryType::kHost, endpoint_->ep(), &op->owned_mr[index]));
  op->desc[index] = fi_mr_desc(op->owned_mr[index].get());
  return Status::ok();
}

Status Core::isend(const void* data, size_t size, int tag, MemoryRegion* mr,
                   std::unique_ptr<Request>* req) {
  if (data == nullptr && size > 0) return Status::internal("isend: null buffer");
  if (chunkCount(size, params_.chunk_bytes) > kMaxChunks) {
    return Status::invalidUsage("isend of " + std::to_string(size) + " bytes exceeds the ofi " +
                                "transport's limit of " + std::to_string(kMaxChunks) + " chunks");
  }
  auto op = newOp();
  op->is_send = true;
  op->tag = tag;
  op->size = size;
  op->send_data = static_cast<const uint8_t*>(data);
  // An inline payload is copied into a registered control slot; a larger one needs a descriptor.
  if (size > params_.inline_bytes) {
    TALLY_RETURN_IF_ERROR(describe(const_cast<void*>(data), size, mr, op.get(), 0));
  }
  return submit(std::move(op), req);
}

Status Core::irecv(int n, void* const* data, const size_t* sizes, const int* tags,
                   MemoryRegion* const* mrs, std::unique_ptr<Request>* req) {
  TALLY_RETURN_IF_ERROR(checkRecvArgs(n, data, sizes));
  auto op = newOp();
  fillRecvBuffers(op.get(), n, data, sizes, tags);
  for (int i = 0; i < n; ++i) {
    // Payloads up to inline_bytes are copied out of a control slot and need no descriptor.
    if (sizes[i] > params_.inline_bytes) {
      TALLY_RETURN_IF_ERROR(
          describe(data[i], sizes[i], mrs != nullptr ? mrs[i] : nullptr, op.get(), i));
    }
  }
  return submit(std::move(op), req);
}

Status Core::iflush(int n, void* const* data, const size_t* sizes, MemoryRegion* const* mrs,
                    std::unique_ptr<Request>* req) {
  *req = nullptr;
  const Domain& domain = *endpoint_->domain();
  TALLY_RETURN_IF_ERROR(checkBufferCount("iflush", n));
  if (!domain.rma_read || mrs == nullptr) return Status::ok();
  auto op = newOp();
  op->is_flush = true;
  auto pieces = std::make_unique<Piece[]>(static_cast<size_t>(n));
  int count = 0;
  for (int i = 0; i < n; ++i) {
    const auto* region = dynamic_cast<const OfiMemoryRegion*>(mrs[i]);
    if (mrs[i] == nullptr || sizes[i] == 0) continue;
    const auto* bytes = static_cast<const uint8_t*>(data[i]);
    if (region == nullptr || region->mr == nullptr || region->domain.get() != &domain ||
        !region->covers(bytes, 1)) {
      return Status::internal("iflush: buffer " + std::to_string(i) +
                              " is not inside the ofi registration given with it");
    }
    const size_t length =
        std::min<size_t>({sizes[i], kFlushReadBytes, region->size - (bytes - region->base)});
    Piece& piece = pieces[count++];
    piece.kind = Piece::kFlushRead;
    piece.op = op.get();
    piece.buffer = flush_scratch_ + kFlushReadBytes * i;
    piece.length = length;
    piece.desc = flush_scratch_desc_;
    piece.remote_addr = (domain.mr_mode & FI_MR_VIRT_ADDR) != 0
                            ? reinterpret_cast<uintptr_t>(bytes)
                            : static_cast<uint64_t>(bytes - region->base);
    piece.key = fi_mr_key(region->mr.get());
  }
  if (count == 0) return Status::ok();
  op->n = count;
  op->matched = count;  // a flush has nothing to match: done when its reads are
  op->chunks[0] = std::move(pieces);
  return submit(std::move(op), req);
}

Status Core::registerDmaBuf(void* /*data*/, size_t size, int fd, uint64_t /*offset*/,
                            std::unique_ptr<MemoryRegion>* /*mr*/) {
  return Status::invalidUsage("ofi provider " + endpoint_->domain()->provider +
                              " connection to peer " + peer_ + ": registering " +
                              std::to_string(size) + " bytes of dma-buf fd " + std::to_string(fd) +
                              " is not supported by Tally's ofi transport (use regMr)");
}

Status Core::submit(std::shared_ptr<Op> op, std::unique_ptr<Request>* req) {
  auto request = std::make_unique<OfiRequest>(shared_from_this(), op);
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_) return error_;
  if (op->is_flush) {
    new_ops_.push_back(std::move(op));
    wake();
    *req = std::move(request);
    return Status::ok();
  }
  int& in_flight = op->is_send ? sends_in_flight_ : recvs_in_flight_;
  if (in_flight >= params_.max_requests) {
    *req = nullptr;
    return Status::ok();
  }
  ++in_flight;
  if (op->is_send) op->seq = next_send_seq_++;
  new_ops_.push_back(std::move(op));
  wake();
  *req = std::move(request);
  return Status::ok();
}

Status Core::registerMemory(void* data, size_t size, MemoryType type,
                            std::unique_ptr<MemoryRegion>* mr) {
  auto region = std::make_unique<OfiMemoryRegion>();
  region->domain = endpoint_->domain();
  region->base = static_cast<const uint8_t*>(data);
  region->size = size;
  region->ep = endpoint_->ep();
  region->type = type;
  if (size > 0) {
    TALLY_RETURN_IF_ERROR(
        region->domain->registerMemory(data, size, type, endpoint_->ep(), &region->mr));
    region->desc = fi_mr_desc(region->mr.get());
  }
  *mr = std::move(region);
  return Status::ok();
}

void Core::wake() {
  // Under mu_. The helper sets sleeping_ under mu_ before it polls, so a write cannot be lost.
  if (!sleeping_ || event_fd_ < 0) return;
  const uint64_t one = 1;
  ssize_t written = ::write(event_fd_, &one, sizeof(one));
  (void)written;  // a full counter (EAGAIN) still wakes the poll
}

void Core::fail(Status status, bool quiet) {
  bool idle = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_) return;
    failed_ = true;
    error_ = status;
    idle = sends_in_flight_ == 0;
    done_cv_.notify_all();
  }
  // Dropping the side channel is how the peer learns: its connection fails at once too.
  side_->close();
  if (quiet && idle) {
    TALLY_INFO(log::kNet, "ofi: connection to peer %s ended: %s", peer_.c_str(),
               status.toString().c_str());
  } else {
    TALLY_WARN("ofi: connection to peer %s failed: %s", peer_.c_str(), status.toString().c_str());
  }
}

void Core::close() {
  std::lock_guard<std::mutex> close_lock(close_mu_);
  if (closed_) return;
  closed_ = true;
  uint64_t sent = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    sent = next_send_seq_;
    if (event_fd_ >= 0) {
      const uint64_t one = 1;
      ssize_t written = ::write(event_fd_, &one, sizeof(one));
      (void)written;
    }
  }
  if (thread_.joinable()) thread_.join();
  // The farewell tells the peer how many messages to wait for; after a failure the side
  // channel is already closed and this does nothing.
  side_->close(encodeFarewell(sent), kFarewellSendMs);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_) {
      failed_ = true;
      error_ = Status::remote("connection to peer " + peer_ + " was closed");
    }
    new_ops_.clear();
    done_cv_.notify_all();
  }
  // Closing the endpoint ends every operation; only then are buffers and registrations free.
  endpoint_->close();
  for (const std::shared_ptr<Op>& op : active_) {
    for (FidPtr<fid_mr>& mr : op->owned_mr) mr.reset();
  }
  active_.clear();
  posted_recvs_.clear();
  to_post_.clear();
  ready_headers_.clear();
  recv_arena_mr_.reset();
  send_arena_mr_.reset();
  if (event_fd_ >= 0) ::close(event_fd_);
  event_fd_ = -1;
}

Status makeConnection(std::unique_ptr<Endpoint> endpoint, std::unique_ptr<side::SideChannel> side,
                      const SetupMessage& peer, int max_requests, int64_t io_timeout_ms,
                      std::unique_ptr<Connection>* out) {
  TALLY_RETURN_IF_ERROR(endpoint->insertPeer(peer.endpoint));
  const Domain& domain = *endpoint->domain();
  CoreParams params;
  params.peer = side->peerName();
  params.max_requests = max_requests > 0 ? max_requests : 1;
  params.io_timeout_ms = io_timeout_ms;
  params.chunk_bytes = std::min<uint64_t>(endpoint->maxChunk(), peer.max_chunk);
  params.slot_bytes = kSlotBytes;
  // A payload inline in the control message is copied by the helper thread, which CUDA memory
  // does not allow: none where either side's buffers may be CUDA memory.
  params.inline_bytes = domain.no_inline || peer.no_inline
                            ? 0
                            : std::min<size_t>(kSlotBytes, peer.slot_bytes) - kHeaderBytes;
  auto core = std::make_shared<Core>(std::move(endpoint), std::move(side), params);
  Status status = core->start();
  if (!status.isOk()) {
    core->close();
    return status;
  }
  TALLY_INFO(
      log::kNet, "ofi: connection to peer %s on %s domain %s (payloads inline up to %zu bytes)",
      params.peer.c_str(), domain.provider.c_str(), domain.name.c_str(), params.inline_bytes);
  *out = std::make_unique<OfiConnection>(std::move(core));
  return Status::ok();
}

}  // namespace tally::transport::ofi
