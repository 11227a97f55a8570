// SPDX-License-Identifier: Apache-2.0
// Worker-side helpers for fuzz_reducer_session: a transport connection whose every wait has a
// deadline, a raw-socket writer, and the health check (a small, checked all-reduce).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/auth.h"
#include "common/status.h"
#include "transport/transport.h"

namespace tally::fuzz::session {

// One connection to the reducer. After any failure or timeout the connection is closed (so no
// request or buffer is still in use by the transport) and every later call fails at once.
class Client {
 public:
  ~Client() { close(); }
  Status connect(const std::string& address);
  // Sends one message and waits until the transport is done with `data`.
  Status send(const void* data, size_t size, int tag, int64_t timeout_ms);
  // Receives one message of at most `capacity` bytes with `tag`.
  Status recv(void* data, size_t capacity, int tag, int64_t timeout_ms, size_t* got);
  bool connected() const { return conn_ != nullptr && !dead_; }
  void close();

 private:
  Status finish(transport::Request* req, int64_t timeout_ms, size_t* got);

  std::unique_ptr<transport::Connection> conn_;
  bool dead_ = false;
};

// Writes `data` to a plain TCP socket connected to `address`, closes the sending side, reads
// whatever comes back for a moment, and closes. Errors are the peer's business, not a failure.
void sendRaw(const std::string& address, const uint8_t* data, size_t size);

// Two fresh connections go through the opening as workers holding `token` (empty: none), join a
// 2-rank communicator (id {hi, lo}), all-reduce (sum) a float32 call of several slices, check
// every element, acknowledge the call and get its Commit, Ping and Relay once, and leave with
// Bye. Fails with a message saying which step went wrong.
Status healthCheck(const std::string& address, const auth::JobToken& token, uint64_t comm_hi,
                   uint64_t comm_lo);

}  // namespace tally::fuzz::session
