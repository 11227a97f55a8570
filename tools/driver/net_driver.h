// SPDX-License-Identifier: Apache-2.0
// Point-to-point driving through a plugin's ncclNet table, as NCCL's net transport does it: the
// receiver listens, the handle travels through a Store, the sender connects and the receiver
// accepts, each called again until it returns a non-NULL comm; then regMr, isend/irecv, test;
// closeSend/closeRecv/closeListen; finalize.
//
// NetEndpoint owns one rank's connections: at most one send comm per peer and one receive comm
// per peer. Not thread-safe: one thread drives an endpoint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/store.h"
#include "tools/driver/plugin_library.h"

namespace tally::driver {

struct NetOptions {
  int dev = 0;
  int64_t timeout_ms = 60000;  // store waits, connect/accept loops, waits on requests
  uint64_t comm_id = 0;        // v11 init commId; 0 picks one from the name
};

class NetEndpoint {
 public:
  // init (v11: per endpoint), devices, getProperties.
  static Status create(NetApi* api, const std::string& name, int rank, const NetOptions& options,
                       std::unique_ptr<NetEndpoint>* out);
  ~NetEndpoint();
  NetEndpoint(const NetEndpoint&) = delete;
  NetEndpoint& operator=(const NetEndpoint&) = delete;

  // Connects this rank's sends to each rank in send_to and its receives from each rank in
  // recv_from. Every pair (a -> b) must appear as send_to on a and recv_from on b. Store keys:
  // "<name>/handle/<receiver>/<sender>". Listens for every recv_from peer first, then drives all
  // connects and accepts round-robin until each returns a comm, then closes the listeners.
  Status connectPeers(Store* store, const std::vector<int>& send_to,
                      const std::vector<int>& recv_from);

  void* sendComm(int peer) const;
  void* recvComm(int peer) const;

  // Registers [data, data + bytes) with the comm and remembers it for close().
  Status regMr(void* comm, void* data, size_t bytes, void** mhandle);
  Status deregMr(void* comm, void* mhandle);

  // Posts, retrying while the plugin returns a NULL request, until timeout_ms.
  Status isend(int peer, void* data, size_t bytes, int tag, void* mhandle, void** request);
  Status irecv(int peer, int n, void** data, const size_t* sizes, int* tags, void** mhandles,
               void** request);
  // One test call.
  Status test(void* request, bool* done, int* sizes);
  // Tests until done or timeout_ms.
  Status wait(void* request, int* sizes);

  NetApi* api() const { return api_; }
  const NetProperties& properties() const { return props_; }
  const NetOptions& options() const { return options_; }

  // deregMr what is still registered, close every comm, finalize. Idempotent.
  Status close();

 private:
  NetEndpoint(NetApi* api, std::string name, int rank, const NetOptions& options)
      : api_(api), name_(std::move(name)), rank_(rank), options_(options) {}

  NetApi* api_;
  std::string name_;
  int rank_;
  NetOptions options_;
  NetProperties props_;
  void* ctx_ = nullptr;
  std::map<int, void*> send_comms_;
  std::map<int, void*> recv_comms_;
  std::vector<std::pair<void*, void*>> registrations_;  // (comm, mhandle)
  bool closed_ = false;
};

}  // namespace tally::driver
