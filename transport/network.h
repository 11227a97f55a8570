// A Network is one transport backend as a whole, chosen at run time (TALLY_TRANSPORT): the
// Devices the point-to-point net offers NCCL, and the "host:port" listen and connect that workers
// and tally-reducer use to reach each other. Each backend makes one (tcp::createNetwork,
// ofi::createNetwork, verbs::createNetwork); transport/select.h picks among them.
//
// Backends other than TCP set up their connections over a TCP side channel to the same
// host:port: the address a reducer listens on is the same whatever the transport.
//
// Threads: every method may be called from any thread. A Network outlives nothing it made:
// listeners and connections keep what they need alive themselves.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/transport.h"

namespace tally::transport {

class Network {
 public:
  virtual ~Network() = default;
  // "tcp", "ofi" or "verbs".
  virtual const char* name() const = 0;
  // One line for logs: what this backend runs on, e.g. "ofi provider tcp;ofi_rxm, domain lo".
  virtual std::string description() const = 0;
  // The libfabric provider this network runs on, as fi_info reports it ("efa", "tcp;ofi_rxm");
  // empty for backends that are not libfabric. TALLY_TRANSPORT=auto uses ofi only when this
  // names a high-speed provider (transport/select.h), so the ofi backend must override it.
  virtual std::string provider() const { return std::string(); }
  // The devices NCCL's point-to-point net sees, in a stable order. At least one.
  virtual const std::vector<std::shared_ptr<Device>>& devices() const = 0;
  // Listens on "host:port" (port 0 picks one; IPv6 as "[::1]:port"); Listener::address()
  // reports the bound port. Errors: kInvalidUsage for a malformed address, kSystem when it
  // cannot be bound.
  virtual Status listenAt(const std::string& host_port, std::unique_ptr<Listener>* out) = 0;
  // Resumable connect to a listenAt address. A refused connect is retried until the backend's
  // connect timeout, so a peer that starts a moment later is found. Never blocks; a malformed
  // address fails here with kInvalidUsage, everything else from PendingConnection::step.
  virtual Status connectTo(const std::string& host_port, const ConnectionOptions& options,
                           std::unique_ptr<PendingConnection>* out) = 0;
};

// Steps `pending` until it yields a connection (then *out is set), fails (its Status, final), or
// timeout_ms passes (kTimeout; `pending` may be stepped again or destroyed). timeout_ms < 0 waits
// as long as the backend's own connect timeout allows. Sleeps briefly between steps.
Status finishConnect(PendingConnection* pending, int64_t timeout_ms,
                     std::unique_ptr<Connection>* out);

}  // namespace tally::transport
