// SPDX-License-Identifier: Apache-2.0
#include "tools/driver/net_driver.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "tools/driver/reference.h"

namespace tally::driver {
namespace {

using Clock = std::chrono::steady_clock;

std::string handleKey(const std::string& name, int receiver, int sender) {
  return name + "/handle/" + std::to_string(receiver) + "/" + std::to_string(sender);
}

void pause(int* idle) {
  if (++*idle < 64) {
    sched_yield();
  } else {
    ::usleep(20);
  }
}

}  // namespace

Status NetEndpoint::create(NetApi* api, const std::string& name, int rank,
                           const NetOptions& options, std::unique_ptr<NetEndpoint>* out) {
  std::unique_ptr<NetEndpoint> ep(new NetEndpoint(api, name, rank, options));
  uint64_t comm_id = options.comm_id != 0 ? options.comm_id : hashBytes(name.data(), name.size());
  TALLY_RETURN_IF_ERROR(ncclStatus(api->init(comm_id, &ep->ctx_), "net init"));
  if (ep->ctx_ == nullptr) return Status::internal("net init returned a NULL ctx");
  int ndev = 0;
  TALLY_RETURN_IF_ERROR(ncclStatus(api->devices(&ndev), "net devices"));
  if (options.dev >= ndev) {
    return Status::invalidUsage("net reports " + std::to_string(ndev) + " devices");
  }
  TALLY_RETURN_IF_ERROR(
      ncclStatus(api->getProperties(options.dev, &ep->props_), "net getProperties"));
  *out = std::move(ep);
  return Status::ok();
}

Status NetEndpoint::connectPeers(Store* store, const std::vector<int>& send_to,
                                 const std::vector<int>& recv_from) {
  // Listen for every sender first, so no sender waits on a listener that does not exist yet.
  std::map<int, void*> listeners;
  auto close_listeners = [&] {
    for (auto& [peer, lc] : listeners) (void)api_->closeListen(lc);
    listeners.clear();
  };
  for (int peer : recv_from) {
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* lc = nullptr;
    Status s = ncclStatus(api_->listen(ctx_, options_.dev, handle, &lc), "net listen");
    if (s.isOk() && lc == nullptr) s = Status::internal("net listen returned a NULL listenComm");
    if (s.isOk())
      s = store->set(handleKey(name_, rank_, peer), std::string_view(handle, sizeof(handle)));
    if (!s.isOk()) {
      if (lc != nullptr) (void)api_->closeListen(lc);
      close_listeners();
      return s;
    }
    listeners[peer] = lc;
  }
  std::map<int, std::string> peer_handles;
  // One deadline for the whole gather, not timeout_ms per peer.
  const auto gather_deadline = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  for (int peer : send_to) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(gather_deadline -
                                                                      Clock::now());
    Status s = store->get(handleKey(name_, peer, rank_), &peer_handles[peer],
                          std::max<int64_t>(0, left.count()));
    if (s.isOk() && peer_handles[peer].size() != NCCL_NET_HANDLE_MAXSIZE) {
      s = Status::internal("net handle from rank " + std::to_string(peer) + " has the wrong size");
    }
    if (!s.isOk()) {
      close_listeners();
      return s;
    }
  }

  // connect and accept return NULL until the connection is complete; call them again.
  auto deadline = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  int idle = 0;
  for (;;) {
    bool all = true;
    for (int peer : send_to) {
      if (send_comms_.count(peer)) continue;
      void* sc = nullptr;
      Status s = ncclStatus(api_->connect(ctx_, options_.dev, peer_handles[peer].data(), &sc),
                            "net connect");
      if (!s.isOk()) {
        close_listeners();
        return s;
      }
      if (sc != nullptr) {
        send_comms_[peer] = sc;
      } else {
        all = false;
      }
    }
    for (int peer : recv_from) {
      if (recv_comms_.count(peer)) continue;
      void* rc = nullptr;
      Status s = ncclStatus(api_->accept(listeners[peer], &rc), "net accept");
      if (!s.isOk()) {
        close_listeners();
        return s;
      }
      if (rc != nullptr) {
        recv_comms_[peer] = rc;
      } else {
        all = false;
      }
    }
    if (all) break;
    if (Clock::now() > deadline) {
      close_listeners();
      return Status::timeout("net connect/accept did not complete within " +
                             std::to_string(options_.timeout_ms) + " ms");
    }
    pause(&idle);
  }
  Status first;
  for (auto& [peer, lc] : listeners) {
    Status s = ncclStatus(api_->closeListen(lc), "net closeListen");
    if (first.isOk() && !s.isOk()) first = s;
  }
  listeners.clear();
  return first;
}

void* NetEndpoint::sendComm(int peer) const {
  auto it = send_comms_.find(peer);
  return it == send_comms_.end() ? nullptr : it->second;
}

void* NetEndpoint::recvComm(int peer) const {
  auto it = recv_comms_.find(peer);
  return it == recv_comms_.end() ? nullptr : it->second;
}

Status NetEndpoint::regMr(void* comm, void* data, size_t bytes, void** mhandle) {
  void* mh = nullptr;
  TALLY_RETURN_IF_ERROR(
      ncclStatus(api_->regMr(comm, data, bytes, NCCL_PTR_HOST, &mh), "net regMr"));
  registrations_.emplace_back(comm, mh);
  *mhandle = mh;
  return Status::ok();
}

Status NetEndpoint::deregMr(void* comm, void* mhandle) {
  auto it = std::find(registrations_.begin(), registrations_.end(), std::make_pair(comm, mhandle));
  if (it != registrations_.end()) registrations_.erase(it);
  return ncclStatus(api_->deregMr(comm, mhandle), "net deregMr");
}

Status NetEndpoint::isend(int peer, void* data, size_t bytes, int tag, void* mhandle,
                          void** request) {
  void* comm = sendComm(peer);
  if (comm == nullptr) return Status::internal("no send comm to rank " + std::to_string(peer));
  auto deadline = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  int idle = 0;
  for (;;) {
    void* req = nullptr;
    TALLY_RETURN_IF_ERROR(
        ncclStatus(api_->isend(comm, data, bytes, tag, mhandle, &req), "net isend"));
    if (req != nullptr) {
      *request = req;
      return Status::ok();
    }
    if (Clock::now() > deadline) return Status::timeout("net isend never accepted the request");
    pause(&idle);
  }
}

Status NetEndpoint::irecv(int peer, int n, void** data, const size_t* sizes, int* tags,
                          void** mhandles, void** request) {
  void* comm = recvComm(peer);
  if (comm == nullptr) return Status::internal("no receive comm from rank " + std::to_string(peer));
  auto deadline = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  int idle = 0;
  for (;;) {
    void* req = nullptr;
    TALLY_RETURN_IF_ERROR(
        ncclStatus(api_->irecv(comm, n, data, sizes, tags, mhandles, &req), "net irecv"));
    if (req != nullptr) {
      *request = req;
      return Status::ok();
    }
    if (Clock::now() > deadline) return Status::timeout("net irecv never accepted the request");
    pause(&idle);
  }
}

Status NetEndpoint::test(void* request, bool* done, int* sizes) {
  int d = 0;
  TALLY_RETURN_IF_ERROR(ncclStatus(api_->test(request, &d, sizes), "net test"));
  *done = d != 0;
  return Status::ok();
}

Status NetEndpoint::wait(void* request, int* sizes) {
  auto deadline = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  int idle = 0;
  for (;;) {
    bool done = false;
    TALLY_RETURN_IF_ERROR(test(request, &done, sizes));
    if (done) return Status::ok();
    if (Clock::now() > deadline) return Status::timeout("net request did not complete in time");
    pause(&idle);
  }
}

Status NetEndpoint::close() {
  if (closed_) return Status::ok();
  closed_ = true;
  Status first;
  auto keep = [&](Status s) {
    if (first.isOk() && !s.isOk()) first = std::move(s);
  };
  for (auto& [comm, mh] : registrations_) keep(ncclStatus(api_->deregMr(comm, mh), "net deregMr"));
  registrations_.clear();
  for (auto& [peer, sc] : send_comms_) keep(ncclStatus(api_->closeSend(sc), "net closeSend"));
  send_comms_.clear();
  for (auto& [peer, rc] : recv_comms_) keep(ncclStatus(api_->closeRecv(rc), "net closeRecv"));
  recv_comms_.clear();
  if (ctx_ != nullptr) {
    keep(ncclStatus(api_->finalize(ctx_), "net finalize"));
    ctx_ = nullptr;
  }
  return first;
}

NetEndpoint::~NetEndpoint() { (void)close(); }

}  // namespace tally::driver
