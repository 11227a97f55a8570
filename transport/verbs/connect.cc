// SPDX-License-Identifier: Apache-2.0
// Connection setup, both ends: a TCP side channel carries one setup message each way (wire.h),
// then one ready byte each way, and stays open as the peer watch (side_channel.h).
//
// Why the ready byte: a queue pair drops what arrives before it reaches RTR, and the sender
// retries only after its ACK timeout (seconds). Each end moves its queue pairs to RTR and RTS as
// soon as it has the peer's setup and only then sends "ready"; an end uses its queue pairs only
// after the peer's ready came, so nothing is ever sent to a queue pair that cannot take it.
// The setup message is framed like SideSetup's ("TlyS", version, backend name "verbs"), so a
// peer running another transport fails with a message that says so.
#include <chrono>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/log.h"
#include "transport/setup_listener.h"
#include "transport/tcp/tcp.h"
#include "transport/verbs/connection.h"
#include "transport/verbs/endpoint.h"
#include "transport/verbs/internal.h"

namespace tally::transport::verbs {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kFrameMagic = 0x53796c54u;  // "TlyS", as side_channel.h frames setups
constexpr uint16_t kFrameVersion = 1;
constexpr char kBackendName[] = "verbs";
constexpr size_t kFramePrefix = 7 + sizeof(kBackendName) - 1;
constexpr size_t kMaxFrameBytes = 7 + 32 + kMaxSetupBytes;

std::vector<uint8_t> frame(const std::vector<uint8_t>& setup) {
  std::vector<uint8_t> bytes(kFramePrefix + setup.size());
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<uint8_t>(kFrameMagic >> (8 * i));
  bytes[4] = kFrameVersion & 0xff;
  bytes[5] = kFrameVersion >> 8;
  bytes[6] = sizeof(kBackendName) - 1;
  std::memcpy(bytes.data() + 7, kBackendName, sizeof(kBackendName) - 1);
  if (!setup.empty()) std::memcpy(bytes.data() + kFramePrefix, setup.data(), setup.size());
  return bytes;
}

Status unframe(const uint8_t* bytes, size_t size, const std::string& peer, SetupMessage* out) {
  uint32_t magic = 0;
  for (int i = 3; i >= 0 && size >= 4; --i) magic = (magic << 8) | bytes[i];
  if (size < 7 || magic != kFrameMagic || (bytes[4] | (bytes[5] << 8)) != kFrameVersion) {
    return Status::remote("peer " + peer + " sent no Tally side-channel setup");
  }
  const size_t name_length = bytes[6];
  if (7 + name_length > size) return Status::remote("peer " + peer + " sent a truncated setup");
  std::string name(reinterpret_cast<const char*>(bytes + 7), name_length);
  if (name != kBackendName) {
    return Status::invalidUsage("peer " + peer + " runs the " + name +
                                " transport, this end verbs: every rank and reducer must use the "
                                "same one");
  }
  Status status = decodeSetup(bytes + 7 + name_length, size - 7 - name_length, out);
  if (!status.isOk()) return Status(status.code(), status.message() + " (peer " + peer + ")");
  return Status::ok();
}

enum class HandshakeState { kConnecting, kExchange, kWaitSetup, kWaitReady, kDone };

// One setup, at either end. Not thread-safe: its owner serializes step().
class Handshake {
 public:
  Handshake(std::shared_ptr<DeviceContext> device, int max_requests)
      : device_(std::move(device)), max_requests_(max_requests), start_(Clock::now()) {}
  ~Handshake() { closeTcp(); }

  void startConnecting(std::unique_ptr<PendingConnection> pending, std::string address) {
    pending_ = std::move(pending);
    peer_ = std::move(address);
    state_ = HandshakeState::kConnecting;
  }
  void startAccepted(std::unique_ptr<Connection> conn) {
    peer_ = conn->peerName();
    tcp_ = std::move(conn);
    state_ = HandshakeState::kExchange;
  }
  const std::string& peer() const { return peer_; }

  // Re-entry contract: call until *out is set or an error comes back; never blocks. An error is
  // final and is returned again by later calls (the TCP connection is closed by then).
  Status step(std::unique_ptr<Connection>* out) {
    *out = nullptr;
    if (!error_.isOk()) return error_;
    Status status = advance(out);
    if (status.isOk() && !*out && state_ != HandshakeState::kConnecting) status = checkDeadline();
    if (!status.isOk()) {
      error_ = status;
      closeTcp();
      endpoint_.reset();
    }
    return status;
  }

 private:
  // kConnecting: the TCP connect (it retries a refused peer itself). kExchange: make the queue
  // pairs, post the setup receive and send ours. kWaitSetup: once the peer's setup is in, bring
  // the queue pairs up and exchange ready bytes. kWaitReady: once both ready bytes moved, hand
  // the TCP connection to a SideChannel and build the Connection.
  Status advance(std::unique_ptr<Connection>* out) {
    switch (state_) {
      case HandshakeState::kConnecting: {
        std::unique_ptr<Connection> conn;
        TALLY_RETURN_IF_ERROR(pending_->step(&conn));
        if (!conn) return Status::ok();
        pending_.reset();
        tcp_ = std::move(conn);
        state_ = HandshakeState::kExchange;
        [[fallthrough]];
      }
      case HandshakeState::kExchange: {
        const VerbsOptions& options = device_->options();
        TALLY_RETURN_IF_ERROR(
            Endpoint::create(device_, options.qps_per_connection, max_requests_, &endpoint_));
        std::vector<uint8_t> setup;
        TALLY_RETURN_IF_ERROR(encodeSetup(endpoint_->localSetup(), &setup));
        sent_ = frame(setup);
        received_.assign(kMaxFrameBytes, 0);
        TALLY_RETURN_IF_ERROR(post(side::kSetupTag));
        state_ = HandshakeState::kWaitSetup;
        [[fallthrough]];
      }
      case HandshakeState::kWaitSetup: {
        size_t size = 0;
        bool done = false;
        TALLY_RETURN_IF_ERROR(bothDone(&done, &size));
        if (!done) return Status::ok();
        SetupMessage peer;
        TALLY_RETURN_IF_ERROR(unframe(received_.data(), size, peer_, &peer));
        Status status = endpoint_->bringUp(peer);
        if (!status.isOk()) {
          return Status(status.code(), "verbs setup with peer " + peer_ + ": " + status.message());
        }
        peer_setup_ = received_;
        peer_setup_.resize(size);
        sent_.assign(1, kReadyByte);
        received_.assign(1, 0);
        TALLY_RETURN_IF_ERROR(post(kReadyTag));
        state_ = HandshakeState::kWaitReady;
        [[fallthrough]];
      }
      case HandshakeState::kWaitReady: {
        size_t size = 0;
        bool done = false;
        TALLY_RETURN_IF_ERROR(bothDone(&done, &size));
        if (!done) return Status::ok();
        if (size != 1 || received_[0] != kReadyByte) {
          return Status::remote("peer " + peer_ + " sent a bad ready byte");
        }
        send_.reset();
        recv_.reset();
        auto side =
            std::make_unique<side::SideChannel>(std::move(tcp_), std::move(peer_setup_),
                                                sideOptions(device_->options()).max_message_bytes);
        TALLY_RETURN_IF_ERROR(side->start());
        state_ = HandshakeState::kDone;
        return makeConnection(std::move(endpoint_), std::move(side), peer_, device_->options(),
                              out);
      }
      case HandshakeState::kDone:
        return Status::internal("verbs setup with peer " + peer_ + " stepped after done");
    }
    return Status::internal("verbs setup: bad state");
  }

  Status post(int tag) {
    void* data = received_.data();
    size_t size = received_.size();
    TALLY_RETURN_IF_ERROR(tcp_->irecv(1, &data, &size, &tag, nullptr, &recv_));
    TALLY_RETURN_IF_ERROR(tcp_->isend(sent_.data(), sent_.size(), tag, nullptr, &send_));
    if (!recv_ || !send_) return Status::internal("verbs setup: no room on a new TCP connection");
    return Status::ok();
  }

  Status bothDone(bool* done, size_t* size) {
    bool sent = false;
    bool received = false;
    TALLY_RETURN_IF_ERROR(send_->test(&sent, nullptr));
    TALLY_RETURN_IF_ERROR(recv_->test(&received, size));
    *done = sent && received;
    return Status::ok();
  }

  Status checkDeadline() const {
    const int64_t limit = device_->options().timeouts.connect_ms;
    if (limit <= 0 || Clock::now() - start_ < std::chrono::milliseconds(limit)) {
      return Status::ok();
    }
    return Status::timeout("verbs setup with peer " + peer_ + " did not finish within " +
                           std::to_string(limit) + " ms");
  }

  // Requests go before their connection's buffers; the connection is closed first (transport.h).
  void closeTcp() {
    if (tcp_) tcp_->close();
    send_.reset();
    recv_.reset();
    tcp_.reset();
    pending_.reset();
  }

  const std::shared_ptr<DeviceContext> device_;
  const int max_requests_;
  const Clock::time_point start_;
  HandshakeState state_ = HandshakeState::kConnecting;
  std::string peer_;
  std::unique_ptr<PendingConnection> pending_;
  std::unique_ptr<Connection> tcp_;
  std::unique_ptr<Endpoint> endpoint_;
  std::vector<uint8_t> sent_;
  std::vector<uint8_t> received_;
  std::vector<uint8_t> peer_setup_;
  std::unique_ptr<Request> send_;
  std::unique_ptr<Request> recv_;
  Status error_;
};

class VerbsPendingConnection final : public PendingConnection {
 public:
  explicit VerbsPendingConnection(std::unique_ptr<Handshake> handshake)
      : handshake_(std::move(handshake)) {}
  Status step(std::unique_ptr<Connection>* conn) override {
    std::lock_guard<std::mutex> lock(mu_);
    return handshake_->step(conn);
  }

 private:
  std::mutex mu_;
  std::unique_ptr<Handshake> handshake_;
};

// An accepted peer's Handshake, as the shared listener steps it.
class VerbsAcceptedSetup final : public AcceptedSetup {
 public:
  explicit VerbsAcceptedSetup(std::unique_ptr<Handshake> handshake)
      : handshake_(std::move(handshake)) {}
  Status step(std::unique_ptr<Connection>* conn) override { return handshake_->step(conn); }
  std::string peerName() const override { return handshake_->peer(); }

 private:
  std::unique_ptr<Handshake> handshake_;
};

}  // namespace

side::SideOptions sideOptions(const VerbsOptions& options) {
  side::SideOptions side;
  side.timeouts.connect_ms = options.timeouts.connect_ms;
  side.setup_timeout_ms = options.timeouts.connect_ms;
  // The side channel carries nothing after setup, so no I/O timeout applies to it.
  side.timeouts.io_ms = 0;
  side.max_message_bytes = 64;
  return side;
}

Status makePendingConnection(std::shared_ptr<DeviceContext> device, const std::string& address,
                             const ConnectionOptions& conn_options,
                             std::unique_ptr<PendingConnection>* out) {
  const side::SideOptions side = sideOptions(device->options());
  tcp::TcpOptions tcp;
  tcp.sockets = 1;
  tcp.max_requests = 4;
  tcp.timeouts = side.timeouts;
  ConnectionOptions tcp_conn;
  tcp_conn.sockets = 1;
  tcp_conn.max_requests = 4;
  std::unique_ptr<PendingConnection> pending;
  TALLY_RETURN_IF_ERROR(tcp::connectTo(address, tcp, tcp_conn, &pending));
  const int max_requests =
      conn_options.max_requests > 0 ? conn_options.max_requests : device->options().max_requests;
  auto handshake = std::make_unique<Handshake>(std::move(device), max_requests);
  handshake->startConnecting(std::move(pending), address);
  *out = std::make_unique<VerbsPendingConnection>(std::move(handshake));
  return Status::ok();
}

Status makeListener(std::shared_ptr<DeviceContext> device, const std::string& host_port,
                    std::unique_ptr<Listener>* out) {
  std::unique_ptr<side::SideListener> side;
  TALLY_RETURN_IF_ERROR(
      side::SideListener::listen(host_port, sideOptions(device->options()), &side));
  ConnectHandle handle{};
  TALLY_RETURN_IF_ERROR(side::encodeHandle(kHandleMagic, side->address(), &handle));
  TALLY_INFO(log::kNet, "verbs: %s listening on %s", device->properties().name.c_str(),
             side->address().c_str());
  auto admit = [device](std::unique_ptr<Connection> tcp,
                        std::unique_ptr<AcceptedSetup>* setup) -> Status {
    auto handshake = std::make_unique<Handshake>(device, device->options().max_requests);
    handshake->startAccepted(std::move(tcp));
    *setup = std::make_unique<VerbsAcceptedSetup>(std::move(handshake));
    return Status::ok();
  };
  *out = std::make_unique<SetupListener>(kBackendName, std::move(side), handle, std::move(admit));
  return Status::ok();
}

}  // namespace tally::transport::verbs
