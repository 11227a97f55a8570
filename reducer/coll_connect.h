// The worker's side of connecting to reducers (coll_client.cc's connect): the transport
// connect with retries, the opening (reducer/opening.h) and the Hello/Ready exchange, each bounded
// by the connect deadline. Not a public interface.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "reducer/opening.h"
#include "reducer/wire.h"
#include "transport/network.h"
#include "transport/transport.h"

namespace tally::reducer::client {

using Clock = std::chrono::steady_clock;
using HeaderBuf = std::array<uint8_t, wire::kMaxHeaderBytes>;

// Milliseconds until the deadline, at least 0.
int64_t msLeft(Clock::time_point deadline);

// Connects to one reducer over `network` (null: TCP with default options), retrying until the
// deadline (it may not be up yet). A malformed address fails at once with kInvalidUsage; running
// out of time is kTimeout naming the address and the last error.
Status connectReducer(transport::Network* network, const std::string& address,
                      Clock::time_point deadline, std::unique_ptr<transport::Connection>* out);

// Sends one header message and waits for it to leave, until the deadline.
Status sendHeader(transport::Connection* conn, const wire::Frame& frame, Clock::time_point deadline,
                  const std::string& what);

// The opening, up to Hello: takes the reducer's Challenge and answers it when it requires the
// job token; refuses a reducer that cannot prove a token this worker has (telling it why).
Status openReducer(transport::Connection* conn, const std::string& address,
                   Clock::time_point deadline, opening::WorkerSide* side);

// When the reducer owes a Proof (it required the job token), receives and checks it: nothing
// else, not even Hello, goes to a reducer before it proved the token. A Reject (the worker's
// Answer was refused): kInvalidUsage with its reason.
Status awaitProof(transport::Connection* conn, const std::string& address, int rank,
                  Clock::time_point deadline, const opening::WorkerSide& side);

// Receives the reducer's answer to Hello: Ready (its window into *window); or Reject
// (kInvalidUsage with the reason) or Error (kRemote).
Status awaitReady(transport::Connection* conn, const std::string& address, int rank,
                  Clock::time_point deadline, int* window);

}  // namespace tally::reducer::client
