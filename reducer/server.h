// SPDX-License-Identifier: Apache-2.0
// The reduction server behind tally-reducer.
//
// A ReducerServer listens on one "host:port" of a transport::Network (TCP, or an RDMA backend
// whose connections are set up over TCP to that address) and serves any number of communicators
// (jobs) at once. A communicator is the set of connections whose Hello carries the same 128-bit
// id; it forms when all nranks members joined, and gets a Ready on each connection. Then for
// every slice the server receives one input per rank, reduces them in rank order and returns the
// same bytes to every rank. See protocol/wire.h for the messages, docs/security.md for the job
// token and TALLY_CHECKSUM.
//
// Threads: an accept thread and `threads` event loops (reducer/loop.h), each serving many TCP
// connections of one socket (what workers open): it reads a connection's slices and, on the
// input that completes a slice, reduces it and writes the result to every rank, with no hand-off
// to another thread. Connections over other transports (and TCP ones of several sockets) get a
// reader and a writer thread each, which reduce and answer the same way.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/auth.h"
#include "common/params.h"
#include "common/status.h"
#include "common/timeouts.h"
#include "reducer/observer.h"
#include "transport/network.h"
#include "transport/raw_stream.h"

namespace tally::reducer {

struct ServerOptions {
  std::string listen = "127.0.0.1:0";  // "host:port"; port 0 picks a free port
  int threads = 4;                     // event-loop threads (and engine shards), >= 1
  int window = kDefaultReducerWindow;  // slices buffered per connection before reading stops
  // The transport to listen on (transport/network.h opens it from TALLY_TRANSPORT). Null: the
  // network layer's default (openDefaultNetwork) with `timeouts`, and inline sends.
  std::shared_ptr<transport::Network> network;
  // connect_ms: for the default network, how long a connection's transport hellos may take (a
  // network given brings its own). io_ms: a connection served by an event loop that is part-way
  // through a message and sends nothing more for this long is closed. tally-reducer sets both
  // from TALLY_CONNECT_TIMEOUT_MS and TALLY_TIMEOUT_MS.
  Timeouts timeouts;
  size_t pool_cache_bytes = 256ull << 20;  // free buffers kept for reuse, over all shards
  // Limits, so one job or one bad peer cannot take the whole reducer (docs/reliability.md). A
  // communicator reserves (nranks + 1) x (window + 1) x slice bytes when it forms (inputs and
  // results); a Hello that would pass a limit is refused with the reason.
  // Members of communicators at once; a Hello past it is refused ("reducer full").
  size_t max_connections = 1024;
  // Connections that have not joined yet (no Hello, or the job token not proven): a budget of
  // their own, so that peers that connect and say nothing cannot take members' places. When it
  // is full, a new connection evicts the oldest opening one (closed, counted as `limit`).
  // 0: max(16, max_connections / 4). tally-reducer --max-opening-connections.
  size_t max_opening_connections = 0;
  uint64_t max_connection_bytes = 1ull << 30;  // (window + 1) x slice bytes of one connection
  uint64_t max_communicator_bytes = 16ull << 30;
  uint64_t max_memory_bytes = 64ull << 30;     // all communicators' reservations together
  // A connection that has not joined a communicator (opening and Hello) by then is closed, and
  // a communicator whose ranks have not all joined by then (from its first Hello) fails.
  int64_t join_timeout_ms = kDefaultConnectTimeoutMs;
  // With a job token: a connection that has not answered the Challenge by then is closed. A
  // worker answers at once, so this is short: connections that never prove the token cannot
  // hold slots for the join timeout.
  int64_t auth_timeout_ms = 10000;
  // The job secret (common/auth.h). Set: every connection must prove it before its Hello is
  // read, and the server proves it back. Empty: workers without a token are served, and a
  // worker with one refuses this server.
  auth::JobToken job_token;
  // How results go out on the event loops' TCP sockets (transport/raw_stream.h): off, or with
  // MSG_ZEROCOPY (on, always). tally-reducer --zerocopy.
  transport::ZerocopyMode zerocopy = transport::ZerocopyMode::kOff;
  uint64_t zerocopy_min_bytes = transport::kZerocopyMinBytes;  // smaller writes are copied
  // Told about connections, communicators, slices and errors (reducer/observer.h). Borrowed:
  // must outlive the server. Null: none.
  ServerObserver* observer = nullptr;
};

class ReducerServer {
 public:
  // Listens and starts the threads. On failure nothing keeps running and *out is untouched
  // (kInvalidUsage for bad options, the transport's Status for a failed listen).
  static Status start(const ServerOptions& options, std::unique_ptr<ReducerServer>* out);

  virtual ~ReducerServer() = default;
  // The bound address, "127.0.0.1:40123" (the real port when 0 was asked for).
  virtual std::string address() const = 0;
  // Closes every connection and joins every thread. Idempotent; the destructor calls it.
  // Any thread except the server's own may call it.
  virtual void stop() = 0;
};

}  // namespace tally::reducer
