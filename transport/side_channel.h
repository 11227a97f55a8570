// SPDX-License-Identifier: Apache-2.0
// The side channel: how a backend other than TCP (ofi, verbs) sets up its connections and keeps
// watch on its peer, over one socket of Tally's own TCP transport.
//
// Setup. The accepting end listens on a "host:port" (SideListener). The connecting end opens a
// TCP connection to it (one socket) and sends one setup message, bytes the backend supplies (its
// fabric endpoint name, queue pair numbers, ...); the accepting end reads it and only then makes
// its reply (SideSetup::Reply), so it opens fabric resources only for a peer that proved to be
// one of its own kind, never for a stray TCP connection. Everything is non-blocking:
// SideSetup::step is called again until it yields a SideChannel, from the backend's
// PendingConnection::step or Listener::accept. A setup that has not finished within
// SideOptions::setup_timeout_ms of its start fails with kTimeout.
//
// Watch. The TCP connection then stays open for the life of the backend's data connection,
// carrying nothing: when the peer process dies, its kernel closes the socket and poll() says
// kLost, which the backend turns into a failure of its data connection (its fabric may never
// report a dead peer to a receive that waits). An orderly close() sends a farewell first (a few
// bytes of the backend's choosing, e.g. how many messages it sent), which the peer sees as
// kFarewell.
//
// Wire: Tally TCP messages (transport/tcp/wire.h) on one socket. Tag kSetupTag: u32 magic
// "TlyS", u16 version, u8 backend name length, the name, then the backend's bytes. Tag
// kFarewellTag: the backend's farewell bytes. Each end checks that the peer runs the same backend
// ("ofi" against "verbs" is a configuration error, kInvalidUsage).
//
// Threads: every method may be called from any thread; each object serializes itself. The TCP
// connection's own helper threads move the bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/timeouts.h"
#include "transport/transport.h"

namespace tally::transport::side {

inline constexpr int kSetupTag = 0x5e7;
inline constexpr int kFarewellTag = 0xb1e;

struct SideOptions {
  // connect_ms: TCP connect retries (a peer that starts late); io_ms: the TCP connection's I/O
  // timeout.
  Timeouts timeouts;
  // From the setup's start to the peer's setup message.
  int64_t setup_timeout_ms = kDefaultConnectTimeoutMs;
  size_t max_message_bytes = 1024;      // largest setup or farewell payload either end accepts
};

// A ConnectHandle that carries a side listener's address: u32 `magic` (the backend's), u8 length,
// the address text ("10.0.0.1:40112", "[fe80::1%2]:40112"). Fails with kInvalidUsage when the
// address does not fit (kMaxHandleBytes - 5 characters).
Status encodeHandle(uint32_t magic, const std::string& address, ConnectHandle* out);
// Reads one back; kInvalidUsage when the magic differs or the length is out of range (a handle
// from another backend, or garbage).
Status decodeHandle(uint32_t magic, const ConnectHandle& handle, std::string* address);

class SideChannel;

// The accepting end's socket.
class SideListener {
 public:
  // Listens on "host:port" (port 0 picks one; IPv6 as "[::1]:port").
  static Status listen(const std::string& host_port, const SideOptions& options,
                       std::unique_ptr<SideListener>* out);
  virtual ~SideListener() = default;
  // Non-blocking: the next TCP connection, with nothing exchanged yet (give it to
  // SideSetup::accept), or success with *conn null.
  virtual Status accept(std::unique_ptr<Connection>* conn) = 0;
  // Blocks up to timeout_ms for the next TCP connection; success with *conn null: none came.
  virtual Status acceptWait(int64_t timeout_ms, std::unique_ptr<Connection>* conn) = 0;
  // The bound address, "127.0.0.1:40112".
  virtual std::string address() const = 0;
};

// One setup exchange, at either end.
class SideSetup {
 public:
  // The connecting end: connects to `address` ("host:port") and sends `local`. `backend` names
  // the backend ("ofi"); the peer must name the same.
  static Status connect(const std::string& address, const std::string& backend,
                        std::vector<uint8_t> local, const SideOptions& options,
                        std::unique_ptr<SideSetup>* out);
  // Makes the accepting end's setup from the peer's (called once, from step(), when the peer's
  // setup has arrived and named the same backend). An error fails the setup.
  using Reply =
      std::function<Status(const std::vector<uint8_t>& peer, std::vector<uint8_t>* local)>;
  // The accepting end, over a connection from SideListener::accept.
  static Status accept(std::unique_ptr<Connection> conn, const std::string& backend, Reply reply,
                       const SideOptions& options, std::unique_ptr<SideSetup>* out);
  virtual ~SideSetup() = default;
  // Re-entry contract: call until *out is set or an error comes back; never blocks. An error is
  // final and comes back again from later calls (the TCP connection is closed by then).
  virtual Status step(std::unique_ptr<SideChannel>* out) = 0;
  // The peer's address, for log lines ("" before the TCP connection is up).
  virtual std::string peerName() const = 0;
};

enum class PeerState { kOpen, kFarewell, kLost };

// A finished setup: the peer's bytes and the watch on it.
class SideChannel {
 public:
  SideChannel(std::unique_ptr<Connection> conn, std::vector<uint8_t> peer_setup,
              size_t max_message_bytes);
  ~SideChannel();
  SideChannel(const SideChannel&) = delete;
  SideChannel& operator=(const SideChannel&) = delete;

  // Starts the watch (a receive for the farewell). Called by SideSetup before handing it out.
  Status start();
  const std::vector<uint8_t>& peerSetup() const { return peer_setup_; }
  std::string peerName() const { return peer_name_; }
  // Non-blocking: kOpen while nothing was heard; kFarewell once the peer said goodbye (its bytes
  // in *farewell when non-null); kLost once the connection failed without a farewell (the reason
  // in *why when non-null, normally kRemote). kFarewell and kLost are final.
  PeerState poll(std::vector<uint8_t>* farewell, Status* why);
  // Sends `farewell` (at most max_message_bytes), waits up to timeout_ms for it to reach the
  // socket, then closes the connection. Idempotent; the first call's bytes are the ones sent.
  void close(const std::vector<uint8_t>& farewell, int64_t timeout_ms);
  // Closes without a farewell (the peer sees kLost). Idempotent.
  void close();

 private:
  std::mutex mu_;
  std::unique_ptr<Connection> conn_;
  const std::vector<uint8_t> peer_setup_;
  const std::string peer_name_;
  std::vector<uint8_t> watch_buffer_;
  std::unique_ptr<Request> watch_;
  PeerState state_ = PeerState::kOpen;  // guarded by mu_
  std::vector<uint8_t> farewell_;       // the peer's, once state_ is kFarewell
  Status lost_;                         // once state_ is kLost
  bool closed_ = false;
};

}  // namespace tally::transport::side
