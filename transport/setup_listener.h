// SPDX-License-Identifier: Apache-2.0
// The Listener of the backends that set their connections up over a side channel (ofi, verbs):
// it accepts TCP connections on a side::SideListener, hands each to the backend's setup, and
// steps every setup under way without blocking until it yields a Connection. A setup that fails
// is logged and dropped; the listener carries on.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/side_channel.h"
#include "transport/transport.h"

namespace tally::transport {

// One accepted peer's setup, as a backend runs it.
class AcceptedSetup {
 public:
  virtual ~AcceptedSetup() = default;
  // One non-blocking step. Success with *conn null: not finished. An error is final.
  virtual Status step(std::unique_ptr<Connection>* conn) = 0;
  virtual std::string peerName() const = 0;
};

// Starts the setup of a TCP connection just accepted. An error fails the accept() that took it.
using AdmitSetup =
    std::function<Status(std::unique_ptr<Connection> tcp, std::unique_ptr<AcceptedSetup>* out)>;

class SetupListener final : public Listener {
 public:
  // `backend` names log lines ("ofi", "verbs").
  SetupListener(std::string backend, std::unique_ptr<side::SideListener> side,
                const ConnectHandle& handle, AdmitSetup admit);

  const ConnectHandle& handle() const override { return handle_; }
  std::string address() const override { return side_->address(); }
  // Takes the TCP connections the kernel has queued, steps every setup, and hands out at most
  // one finished connection per call.
  Status accept(std::unique_ptr<Connection>* conn) override;
  // While setups are under way, naps growing from 50 us to 2 ms (a setup is a round trip away);
  // otherwise sleeps in the TCP listener.
  Status acceptWait(int64_t timeout_ms, std::unique_ptr<Connection>* conn) override;

 private:
  void stepAllLocked();

  const std::string backend_;
  const std::unique_ptr<side::SideListener> side_;
  const ConnectHandle handle_;
  const AdmitSetup admit_;
  std::mutex mu_;
  std::vector<std::unique_ptr<AcceptedSetup>> setups_;
  std::deque<std::unique_ptr<Connection>> ready_;
};

}  // namespace tally::transport
