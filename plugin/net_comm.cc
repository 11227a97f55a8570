#include "plugin/net_comm.h"

#include <cstring>

#include "common/log.h"
#include "plugin/state.h"

namespace tally::plugin {

uint64_t PendingConnects::park(std::unique_ptr<transport::PendingConnection> pending) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  pending_.emplace(id, std::move(pending));
  return id;
}

std::unique_ptr<transport::PendingConnection> PendingConnects::take(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(id);
  if (it == pending_.end()) return nullptr;
  std::unique_ptr<transport::PendingConnection> out = std::move(it->second);
  pending_.erase(it);
  return out;
}

size_t PendingConnects::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

PendingConnects& PendingConnects::instance() {
  static PendingConnects registry;
  return registry;
}

Status NetListenComm::accept(std::unique_ptr<NetComm>* out) {
  std::unique_ptr<transport::Connection> conn;
  TALLY_RETURN_IF_ERROR(listener_->accept(&conn));
  if (!conn) return Status::ok();
  TALLY_INFO(log::kNet, "dev %d: accepted a connection from peer %s", dev_,
             conn->peerName().c_str());
  *out = std::make_unique<NetComm>(NetComm::Kind::kRecv, dev_, std::move(conn));
  return Status::ok();
}

NetComm::NetComm(Kind kind, int dev, std::unique_ptr<transport::Connection> conn)
    : kind_(kind),
      dev_(dev),
      conn_(std::move(conn)),
      requests_(kind == Kind::kSend ? kMaxSendRequests : kMaxNetRequests) {}

NetComm::~NetComm() {
  magic_ = 0;
  // Requests still pending must not outlive an open connection (transport.h): close first.
  if (conn_) conn_->close();
}

Status NetComm::registerMemory(void* data, size_t size, int type, NetMr** out) {
  if (type != NCCL_PTR_HOST) {
    return Status::internal("regMr: memory type " + std::to_string(type) +
                            " was not advertised (ptrSupport is NCCL_PTR_HOST)");
  }
  auto mr = std::make_unique<NetMr>();
  TALLY_RETURN_IF_ERROR(
      conn_->registerMemory(data, size, transport::MemoryType::kHost, &mr->region));
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

namespace {

Status regionOf(void* mhandle, transport::MemoryRegion** out) {
  *out = nullptr;
  if (mhandle == nullptr) return Status::ok();
  auto* mr = static_cast<NetMr*>(mhandle);
  if (mr->magic != kNetMrMagic) return Status::internal("not a Tally memory handle");
  *out = mr->region.get();
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
  if (n < 1 || n > kMaxRecvs) {
    return Status::internal("irecv of " + std::to_string(n) + " buffers; maxRecvs is " +
                            std::to_string(kMaxRecvs));
  }
  transport::MemoryRegion* regions[kMaxRecvs] = {};
  for (int i = 0; i < n; ++i) {
    TALLY_RETURN_IF_ERROR(regionOf(mhandles ? mhandles[i] : nullptr, &regions[i]));
  }
  NetRequest* slot = requests_.acquire();
  if (slot == nullptr) return Status::ok();
  Status st = conn_->irecv(n, data, sizes, tags, regions, &slot->request);
  if (!st || !slot->request) {
    requests_.release(slot);
    return st;
  }
  slot->magic = kNetRequestMagic;
  slot->owner = this;
  slot->n = n;
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

Status connectStep(transport::Device* device, const transport::ConnectionOptions& options, int dev,
                   void* handle, std::unique_ptr<NetComm>* out) {
  NetHandle h;
  std::memcpy(&h, handle, sizeof(h));
  PendingConnects& registry = PendingConnects::instance();
  std::unique_ptr<transport::PendingConnection> pending;
  if (h.progress_magic == kConnectProgressMagic) pending = registry.take(h.progress_id);
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
    *out = std::make_unique<NetComm>(NetComm::Kind::kSend, dev, std::move(conn));
    return Status::ok();
  }
  h.progress_magic = kConnectProgressMagic;
  h.progress_id = registry.park(std::move(pending));
  std::memcpy(handle, &h, sizeof(h));
  return Status::ok();
}

}  // namespace tally::plugin
