// SPDX-License-Identifier: Apache-2.0
// The worker's side of connecting to reducers (coll_client.cc's connect): the transport
// connect with retries, the opening (protocol/opening.h) and the Hello/Ready exchange, each bounded
// by the connect deadline. Not a public interface.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "common/auth.h"
#include "common/fd.h"
#include "common/status.h"
#include "protocol/opening.h"
#include "protocol/wire.h"
#include "transport/network.h"
#include "transport/transport.h"

namespace tally::worker_client {
namespace wire = protocol::wire;
namespace opening = protocol::opening;

using Clock = std::chrono::steady_clock;
using HeaderBuf = std::array<uint8_t, wire::kMaxHeaderBytes>;
// Set by another thread to make a connect or an opening give up early (null: never).
using Cancel = std::atomic<bool>;

// Milliseconds until the deadline, at least 0.
int64_t msLeft(Clock::time_point deadline);

// One header message at a time over a reducer connection during the opening: through a
// transport::Connection (ConnHeaderChannel), or over a raw TCP socket taken from one in the TCP
// backend's framing (FdHeaderChannel), so the same opening code runs on either. Errors: running
// past the deadline is kTimeout with `what`; a lost connection is the transport's error. A
// channel given a cancel flag gives up a wait soon after the flag is set (kTimeout, "given up").
class HeaderChannel {
 public:
  virtual ~HeaderChannel() = default;
  // Sends one header message and waits for it to leave, until the deadline.
  virtual Status send(const wire::Frame& frame, Clock::time_point deadline,
                      const std::string& what) = 0;
  // Receives one header message into *buf (*got: its length), until the deadline.
  virtual Status recv(Clock::time_point deadline, HeaderBuf* buf, size_t* got,
                      const std::string& what) = 0;
};

// Over a Connection. A receive that fails closes it (the pending receive must not outlive an open
// connection).
class ConnHeaderChannel final : public HeaderChannel {
 public:
  explicit ConnHeaderChannel(transport::Connection* conn, const Cancel* cancel = nullptr)
      : conn_(conn), cancel_(cancel) {}
  Status send(const wire::Frame& frame, Clock::time_point deadline,
              const std::string& what) override;
  Status recv(Clock::time_point deadline, HeaderBuf* buf, size_t* got,
              const std::string& what) override;

 private:
  transport::Connection* conn_;
  const Cancel* cancel_;
};

// Over a socket the caller owns (Connection::takeSocket), with blocking-with-timeout I/O. Reads
// exactly one message per recv, so a FrameReader can take the socket over afterwards.
class FdHeaderChannel final : public HeaderChannel {
 public:
  FdHeaderChannel(int fd, std::string peer, const Cancel* cancel = nullptr)
      : fd_(fd), peer_(std::move(peer)), cancel_(cancel) {}
  Status send(const wire::Frame& frame, Clock::time_point deadline,
              const std::string& what) override;
  Status recv(Clock::time_point deadline, HeaderBuf* buf, size_t* got,
              const std::string& what) override;

 private:
  int fd_;
  std::string peer_;
  const Cancel* cancel_;
};

// Connects to one reducer over `network` (null: the default network, TCP), retrying until the
// deadline (it may not be up yet). A malformed address fails at once with kInvalidUsage; running
// out of time is kTimeout naming the address and the last error; `cancel` set is kTimeout
// "given up".
// `options` go to the transport (sockets = 1 lets the caller take the socket over on TCP).
Status connectReducer(transport::Network* network, const std::string& address,
                      Clock::time_point deadline, const transport::ConnectionOptions& options,
                      std::unique_ptr<transport::Connection>* out, const Cancel* cancel = nullptr);

// Whether reducer connections over `network` (null: the default, TCP) are TCP, whose sockets can be taken over.
bool isTcpNetwork(const transport::Network* network);

// The opening, up to Hello: takes the reducer's Challenge and answers it when it requires the
// job token; refuses a reducer that cannot prove a token this worker has (telling it why).
Status openReducer(HeaderChannel* chan, const std::string& address, Clock::time_point deadline,
                   opening::WorkerSide* side);

// When the reducer owes a Proof (it required the job token), receives and checks it: nothing
// else, not even Hello, goes to a reducer before it proved the token. A Reject (the worker's
// Answer was refused): kInvalidUsage with its reason.
Status awaitProof(HeaderChannel* chan, const std::string& address, int rank,
                  Clock::time_point deadline, const opening::WorkerSide& side);

// Receives the reducer's answer to Hello: Ready (its window into *window); or Reject
// (kInvalidUsage with the reason) or Error (kRemote).
Status awaitReady(HeaderChannel* chan, const std::string& address, int rank,
                  Clock::time_point deadline, int* window);

}  // namespace tally::worker_client

namespace tally::worker_client {

// What joining one reducer needs (connect's per-reducer steps for one reducer, for a reducer
// taken into a running communicator: docs/failover.md, "Join").
struct JoinRequest {
  transport::Network* network = nullptr;
  std::string address;
  bool raw = false;  // take the socket over (TCP with TALLY_COLL_PROGRESS thread or poll)
  const auth::JobToken* token = nullptr;
  wire::Hello hello;  // reducer_index is the slot, epoch the Join's
  Clock::time_point deadline;
  const Cancel* cancel = nullptr;  // set: give up soon (kTimeout)
};

// Connects, runs the opening and Hello, and waits for Ready (every rank joined). On success
// either *conn (threaded links) or *fd (raw) holds the connection, and *window the reducer's
// window. The rank's name for errors is hello.rank.
Status joinReducer(const JoinRequest& req, std::unique_ptr<transport::Connection>* conn, Fd* fd,
                   int* window);

// Whether something accepts TCP connections at `address` ("host:port") within timeout_ms: how
// rank 0 looks for a reducer to take an empty slot, without opening a connection the reducer
// would have to time out.
bool acceptsConnections(const std::string& address, int timeout_ms);

}  // namespace tally::worker_client
