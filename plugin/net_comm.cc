// SPDX-License-Identifier: Apache-2.0
#include "plugin/net_comm.h"

#include <cstring>

#include "common/log.h"
#include "plugin/state.h"

namespace tally::plugin {

Status NetListenComm::accept(std::unique_ptr<NetComm>* out) {
  std::unique_ptr<transport::Connection> conn;
  TALLY_RETURN_IF_ERROR(listener_->accept(&conn));
  if (!conn) return Status::ok();
  TALLY_INFO(log::kNet, "dev %d: accepted a connection from peer %s", dev_,
             conn->peerName().c_str());
  *out = std::make_unique<NetComm>(NetComm::Kind::kRecv, dev_, ptr_support_, std::move(conn));
  return Status::ok();
}

int netPtrSupport(const transport::DeviceProperties& props) {
  return NCCL_PTR_HOST | (props.cuda_memory ? NCCL_PTR_CUDA : 0) |
         (props.dmabuf ? NCCL_PTR_DMABUF : 0);
}

NetComm::NetComm(Kind kind, int dev, int ptr_support, std::unique_ptr<transport::Connection> conn)
    : kind_(kind),
      dev_(dev),
      ptr_support_(ptr_support),
      conn_(std::move(conn)),
      requests_(kind == Kind::kSend ? kMaxSendRequests : kMaxNetRequests) {}

NetComm::~NetComm() {
  magic_ = 0;
  // Requests still pending must not outlive an open connection (transport.h): close first.
  if (conn_) conn_->close();
}

namespace {

// kInternal unless `type` is one NCCL_PTR_* bit that `ptr_support` advertises.
Status checkAdvertised(const char* fn, int type, int ptr_support) {
  const bool one_bit = type == NCCL_PTR_HOST || type == NCCL_PTR_CUDA || type == NCCL_PTR_DMABUF;
  if (one_bit && (type & ptr_support) != 0) return Status::ok();
  return Status::internal(std::string(fn) + ": memory type " + std::to_string(type) +
                          " was not advertised (ptrSupport is " + std::to_string(ptr_support) +
                          ")");
}

}  // namespace

Status NetComm::registerMemory(void* data, size_t size, int type, NetMr** out) {
  TALLY_RETURN_IF_ERROR(checkAdvertised("regMr", type, ptr_support_));
  if (type == NCCL_PTR_DMABUF) return Status::internal("regMr: NCCL_PTR_DMABUF needs regMrDmaBuf");
  auto mr = std::make_unique<NetMr>();
  const auto memory =
      type == NCCL_PTR_CUDA ? transport::MemoryType::kCuda : transport::MemoryType::kHost;
  TALLY_RETURN_IF_ERROR(conn_->registerMemory(data, size, memory, &mr->region));
  mr->range = MemRange::of(data, size);
  *out = mr.release();
  return Status::ok();
}

Status NetComm::registerDmaBuf(void* data, size_t size, int type, uint64_t offset, int fd,
                               NetMr** out) {
  TALLY_RETURN_IF_ERROR(checkAdvertised("regMrDmaBuf", NCCL_PTR_DMABUF, ptr_support_));
  // NCCL passes the buffer's own type (CUDA) with the dma-buf; host memory has no dma-buf.
  if (type != NCCL_PTR_CUDA) {
    return Status::internal("regMrDmaBuf: memory type " + std::to_string(type) +
                            " (only CUDA memory comes as a dma-buf)");
  }
  auto mr = std::make_unique<NetMr>();
  TALLY_RETURN_IF_ERROR(conn_->registerDmaBuf(data, size, fd, offset, &mr->region));
  mr->range = MemRange::of(data, size);
  *out = mr.release();
  return Status::ok();
}

Status NetComm::deregister(void* mhandle) {
  auto* mr = static_cast<NetMr*>(mhandle);
  if (mr->magic != kNetMrMagic) return Status::internal("deregMr: not a Tally memory handle");
  mr->magic = 0;
  delete mr;
  return Status::ok();
}

int NetComm::releaseMemory(const MemRange& range) {
  int in_flight = 0;
  requests_.forEachSlot([&](NetRequest* r) {
    if (r->magic != kNetRequestMagic || !r->span.overlaps(range)) return;
    bool done = false;
    // A request done but not yet tested touches nothing any more.
    if (r->request && r->request->test(&done, nullptr).isOk() && done) return;
    ++in_flight;
  });
  if (in_flight > 0) {
    TALLY_WARN("%s comm to peer %s aborted: memory deregistered with %d request%s in flight",
               kind_ == Kind::kSend ? "send" : "receive", conn_->peerName().c_str(), in_flight,
               in_flight == 1 ? "" : "s");
    conn_->close();
  }
  return in_flight;
}

namespace {

Status regionOf(void* mhandle, transport::MemoryRegion** out) {
  *out = nullptr;
  if (mhandle == nullptr) return Status::ok();
  auto* mr = static_cast<NetMr*>(mhandle);
  if (mr->magic != kNetMrMagic) return Status::internal("not a Tally memory handle");
  *out = mr->region.get();
  return Status::ok();
}

// A grouped call's (irecv, iflush) buffer count, and the regions of its n mhandles.
Status groupRegions(const char* call, int n, void* const* mhandles,
                    transport::MemoryRegion** out) {
  if (n < 1 || n > kMaxRecvs) {
    return Status::internal(std::string(call) + " of " + std::to_string(n) +
                            " buffers; maxRecvs is " + std::to_string(kMaxRecvs));
  }
  for (int i = 0; i < n; ++i) {
    TALLY_RETURN_IF_ERROR(regionOf(mhandles ? mhandles[i] : nullptr, &out[i]));
  }
  return Status::ok();
}

}  // namespace

Status NetComm::isend(const void* data, size_t size, int tag, void* mhandle, NetRequest** out) {
  *out = nullptr;
  if (kind_ != Kind::kSend) return Status::internal("isend on a receive comm");
  transport::MemoryRegion* region = nullptr;
  TALLY_RETURN_IF_ERROR(regionOf(mhandle, &region));
  NetRequest* slot = requests_.acquire();
  if (slot == nullptr) return Status::ok();
  Status st = conn_->isend(data, size, tag, region, &slot->request);
  if (!st || !slot->request) {
    requests_.release(slot);
    return st;
  }
  slot->span = MemRange::of(data, size);
  slot->magic = kNetRequestMagic;
  slot->owner = this;
  slot->n = 1;
  *out = slot;
  return Status::ok();
}

Status NetComm::irecv(int n, void* const* data, const size_t* sizes, const int* tags,
                      void* const* mhandles, NetRequest** out) {
  *out = nullptr;
  if (kind_ != Kind::kRecv) return Status::internal("irecv on a send comm");
  transport::MemoryRegion* regions[kMaxRecvs] = {};
  TALLY_RETURN_IF_ERROR(groupRegions("irecv", n, mhandles, regions));
  NetRequest* slot = requests_.acquire();
  if (slot == nullptr) return Status::ok();
  Status st = conn_->irecv(n, data, sizes, tags, regions, &slot->request);
  if (!st || !slot->request) {
    requests_.release(slot);
    return st;
  }
  for (int i = 0; i < n; ++i) slot->span = slot->span.with(MemRange::of(data[i], sizes[i]));
  slot->magic = kNetRequestMagic;
  slot->owner = this;
  slot->n = n;
  *out = slot;
  return Status::ok();
}

Status NetComm::iflush(int n, void* const* data, const int* sizes, void* const* mhandles,
                       NetRequest** out) {
  *out = nullptr;
  if (kind_ != Kind::kRecv) return Status::internal("iflush on a send comm");
  transport::MemoryRegion* regions[kMaxRecvs] = {};
  TALLY_RETURN_IF_ERROR(groupRegions("iflush", n, mhandles, regions));
  size_t lengths[kMaxRecvs] = {};
  bool any_cuda = false;
  for (int i = 0; i < n; ++i) {
    lengths[i] = sizes[i] > 0 ? static_cast<size_t>(sizes[i]) : 0;
    // The transport reads back every buffer given a region: only the CUDA ones need it.
    if (regions[i] != nullptr && regions[i]->type != transport::MemoryType::kCuda) {
      regions[i] = nullptr;
    }
    any_cuda |= regions[i] != nullptr;
  }
  if (!any_cuda) return Status::ok();  // host memory is coherent: nothing to flush
  std::unique_ptr<transport::Request> request;
  TALLY_RETURN_IF_ERROR(conn_->iflush(n, data, lengths, regions, &request));
  if (!request) return Status::ok();
  NetRequest* slot = requests_.acquire();
  if (slot == nullptr) {
    // iflush cannot answer "no room" (a NULL request means done): finish it here, bounded.
    return request->wait(kFlushWaitMs, nullptr);
  }
  slot->request = std::move(request);
  for (int i = 0; i < n; ++i) slot->span = slot->span.with(MemRange::of(data[i], lengths[i]));
  slot->magic = kNetRequestMagic;
  slot->owner = this;
  slot->n = 0;  // a flush reports no sizes
  *out = slot;
  return Status::ok();
}

bool NetComm::ownsRequest(const NetRequest* req) const {
  return requests_.owns(req) && req->magic == kNetRequestMagic && req->owner == this;
}

Status NetComm::test(NetRequest* req, bool* done, size_t* sizes) {
  size_t got[kMaxRecvs] = {};
  bool finished = false;
  TALLY_RETURN_IF_ERROR(req->request->test(&finished, got));
  *done = finished;
  if (!finished) return Status::ok();
  if (sizes != nullptr) {
    for (int i = 0; i < req->n; ++i) sizes[i] = got[i];
  }
  requests_.release(req);
  return Status::ok();
}

Status connectStep(transport::Device* device, const transport::ConnectionOptions& options,
                   PendingConnects* parked, int dev, void* handle, std::unique_ptr<NetComm>* out) {
  NetHandle h;
  std::memcpy(&h, handle, sizeof(h));
  std::unique_ptr<transport::PendingConnection> pending;
  if (h.progress_magic == kConnectProgressMagic) pending = parked->take(h.progress_id);
  if (!pending) TALLY_RETURN_IF_ERROR(device->connect(h.address, options, &pending));

  auto clearProgress = [&] {
    h.progress_magic = 0;
    h.progress_id = 0;
    std::memcpy(handle, &h, sizeof(h));
  };
  std::unique_ptr<transport::Connection> conn;
  Status st = pending->step(&conn);
  if (!st) {
    clearProgress();
    return st;
  }
  if (conn) {
    clearProgress();
    TALLY_INFO(log::kNet, "dev %d: connected to peer %s", dev, conn->peerName().c_str());
    *out = std::make_unique<NetComm>(NetComm::Kind::kSend, dev,
                                     netPtrSupport(device->properties()), std::move(conn));
    return Status::ok();
  }
  h.progress_magic = kConnectProgressMagic;
  h.progress_id = parked->park(std::move(pending));
  std::memcpy(handle, &h, sizeof(h));
  return Status::ok();
}

}  // namespace tally::plugin
