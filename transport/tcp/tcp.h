// The TCP backend of transport.h.
//
// A Connection is `sockets` TCP streams between the same two processes. Messages are framed
// (tag, size) and, past `min_stripe` bytes, striped across the streams; each stream has its own
// send and receive helper threads, so one connection can fill a fast link.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/network.h"
#include "transport/transport.h"

namespace tally::transport::tcp {

struct TcpOptions {
  int sockets = 2;                       // default streams per connection (TALLY_SOCKET_NSOCKS)
  uint64_t min_stripe = 64 * 1024;       // TALLY_SOCKET_MIN_STRIPE
  int max_requests = 256;                // default in-flight requests per direction
  int64_t connect_timeout_ms = 120000;   // TALLY_CONNECT_TIMEOUT_MS
  // TALLY_TIMEOUT_MS: a message part-way received, or a send the peer takes no bytes of, for this
  // long fails the connection (a stuck or slow-loris peer). Idle time between messages is fine.
  // 0: wait forever.
  int64_t io_timeout_ms = 300000;
  // Sockets a listener holds that are not part of a complete connection yet (hello not in, or
  // streams of the connection missing). When a new socket would pass it the oldest is closed, so
  // a flood of silent sockets cannot starve the listener for the connect timeout.
  int max_pending_sockets = 1024;
};

struct Interface {
  std::string name;     // "eth0"
  std::string address;  // numeric IPv4 or IPv6 address
  bool loopback = false;
};

// Interfaces that are up and have an address, chosen by `spec` (TALLY_SOCKET_IFNAME syntax:
// comma list of name prefixes, '^' excludes, '=' exact). Empty spec: every non-loopback
// interface, or loopback alone when there is no other. Fails with kInvalidUsage naming the spec
// when nothing matches.
Status findInterfaces(const std::string& spec, std::vector<Interface>* out);

// The speed the kernel reports for interface `name`, read from <sys_class_net>/<name>/speed, in
// Mb/s; 0 when it reports none (loopback, most virtual interfaces, no such interface).
int linkSpeedMbps(const std::string& name, const std::string& sys_class_net = "/sys/class/net");

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
// use). A refused connect is retried until options.connect_timeout_ms, so a peer that starts a
// moment later is found.
Status connectTo(const std::string& host_port, const TcpOptions& options,
                 const ConnectionOptions& conn_options, std::unique_ptr<PendingConnection>* out);

// Blocking helper over connectTo: steps the state machine until done or the connect timeout.
Status connectBlocking(const std::string& host_port, const TcpOptions& options,
                       const ConnectionOptions& conn_options, std::unique_ptr<Connection>* out);

// Lets the calling thread write a small (one-stripe) send to the socket itself when the
// connection has nothing queued, instead of waking the stream's send thread. Per thread, off by
// default. For threads with nothing else to do meanwhile (the reducer's engine and writer
// threads); a caller that polls many requests, such as a ring step, is better served by the send
// threads (measured: about 30% slower with inline sends).
void allowInlineSends(bool allow);

}  // namespace tally::transport::tcp
