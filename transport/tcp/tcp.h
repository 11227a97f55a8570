// SPDX-License-Identifier: Apache-2.0
// The TCP backend of transport.h.
//
// A Connection is `sockets` TCP streams between the same two processes. Messages are framed
// (tag, size) and, past `min_stripe` bytes, striped across the streams; each stream has its own
// send and receive helper threads, so one connection can fill a fast link.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/timeouts.h"
#include "transport/network.h"
#include "transport/transport.h"

namespace tally::transport::tcp {

// TcpConfig (transport/network.h: streams, stripe size, inline sends) with what the backend also
// needs.
struct TcpOptions : TcpConfig {
  int max_requests = 256;  // default in-flight requests per direction
  // connect_ms bounds connect retries and a listener's wait for a connection's hellos; io_ms: a
  // message part-way received, or a send the peer takes no bytes of, for this long fails the
  // connection. Idle time between messages is fine.
  Timeouts timeouts;
  // Sockets a listener holds that are not part of a complete connection yet (hello not in, or
  // streams of the connection missing). When a new socket would pass it the oldest is closed, so
  // a flood of silent sockets cannot starve the listener for the connect timeout.
  int max_pending_sockets = 1024;
};

// The interface choice is the network layer's (transport/network.h); these are its
// implementation.
using ::tally::transport::findInterfaces;
using ::tally::transport::Interface;
using ::tally::transport::linkSpeedMbps;

// One Device per interface. The device listens on its interface's address, ephemeral port.
Status createDevice(const Interface& iface, const TcpOptions& options,
                    std::shared_ptr<Device>* out);

// The TCP Network (transport/network.h): one Device per interface findInterfaces(ifname_spec)
// picks, and listenAt/connectTo below with `options`. Fails as findInterfaces does (kInvalidUsage
// naming the spec when nothing matches); *out is written only on success.
Status createNetwork(const std::string& ifname_spec, const TcpOptions& options,
                     std::shared_ptr<Network>* out);

// A listener on an explicit "host:port" (port 0 picks one; IPv6 as "[::1]:port"), used by
// tally-reducer. address() reports the bound port.
Status listenAt(const std::string& host_port, const TcpOptions& options,
                std::unique_ptr<Listener>* out);

// A connect to an explicit "host:port", as a PendingConnection (the same state machine devices
// use). A refused connect is retried until options.timeouts.connect_ms, so a peer that starts a
// moment later is found.
Status connectTo(const std::string& host_port, const TcpOptions& options,
                 const ConnectionOptions& conn_options, std::unique_ptr<PendingConnection>* out);

// Blocking helper over connectTo: steps the state machine until done or the connect timeout.
Status connectBlocking(const std::string& host_port, const TcpOptions& options,
                       const ConnectionOptions& conn_options, std::unique_ptr<Connection>* out);

}  // namespace tally::transport::tcp
