// SPDX-License-Identifier: Apache-2.0
#include "transport/side_channel.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/log.h"
#include "transport/tcp/tcp.h"

namespace tally::transport::side {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kSetupMagic = 0x53796c54u;  // "TlyS"
constexpr uint16_t kSetupVersion = 1;
constexpr size_t kSetupPrefixBytes = 7;  // magic, version, name length
constexpr size_t kMaxBackendName = 32;
constexpr size_t kHandlePrefixBytes = 5;  // magic, length

void putLe(uint8_t* out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}

uint64_t getLe(const uint8_t* in, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

tcp::TcpOptions tcpOptions(const SideOptions& options) {
  tcp::TcpOptions tcp;
  tcp.sockets = 1;
  tcp.max_requests = 4;
  tcp.timeouts = options.timeouts;
  return tcp;
}

std::vector<uint8_t> frameSetup(const std::string& backend, const std::vector<uint8_t>& local) {
  std::vector<uint8_t> bytes(kSetupPrefixBytes + backend.size() + local.size());
  putLe(bytes.data(), kSetupMagic, 4);
  putLe(bytes.data() + 4, kSetupVersion, 2);
  bytes[6] = static_cast<uint8_t>(backend.size());
  std::memcpy(bytes.data() + kSetupPrefixBytes, backend.data(), backend.size());
  if (!local.empty()) {
    std::memcpy(bytes.data() + kSetupPrefixBytes + backend.size(), local.data(), local.size());
  }
  return bytes;
}

// Checks the peer's framed setup and extracts the backend's bytes.
Status parseSetup(const uint8_t* bytes, size_t size, const std::string& backend,
                  const std::string& peer, std::vector<uint8_t>* payload) {
  if (size < kSetupPrefixBytes || getLe(bytes, 4) != kSetupMagic) {
    return Status::remote("peer " + peer + " sent no Tally side-channel setup (" +
                          std::to_string(size) + " bytes, bad magic)");
  }
  const auto version = static_cast<uint16_t>(getLe(bytes + 4, 2));
  if (version != kSetupVersion) {
    return Status::remote("peer " + peer + " speaks side-channel version " +
                          std::to_string(version) + ", this end " + std::to_string(kSetupVersion));
  }
  const size_t name_length = bytes[6];
  if (kSetupPrefixBytes + name_length > size) {
    return Status::remote("peer " + peer + " sent a truncated side-channel setup");
  }
  std::string name(reinterpret_cast<const char*>(bytes + kSetupPrefixBytes), name_length);
  if (name != backend) {
    return Status::invalidUsage("peer " + peer + " runs the " + name + " transport, this end " +
                                backend + ": every rank and reducer must use the same one");
  }
  payload->assign(bytes + kSetupPrefixBytes + name_length, bytes + size);
  return Status::ok();
}

class TcpSideListener final : public SideListener {
 public:
  explicit TcpSideListener(std::unique_ptr<Listener> tcp) : tcp_(std::move(tcp)) {}
  Status accept(std::unique_ptr<Connection>* conn) override { return tcp_->accept(conn); }
  Status acceptWait(int64_t timeout_ms, std::unique_ptr<Connection>* conn) override {
    return tcp_->acceptWait(timeout_ms, conn);
  }
  std::string address() const override { return tcp_->address(); }

 private:
  std::unique_ptr<Listener> tcp_;
};

enum class SetupState { kConnecting, kStartExchange, kExchanging, kDone };

class Setup final : public SideSetup {
 public:
  Setup(std::string backend, std::vector<uint8_t> local, Reply reply, const SideOptions& options)
      : backend_(std::move(backend)),
        local_(std::move(local)),
        reply_(std::move(reply)),
        options_(options),
        start_(Clock::now()) {}

  void startConnecting(std::unique_ptr<PendingConnection> pending, std::string address) {
    pending_ = std::move(pending);
    peer_ = std::move(address);
    state_ = SetupState::kConnecting;
  }
  void startAccepted(std::unique_ptr<Connection> conn) {
    peer_ = conn->peerName();
    conn_ = std::move(conn);
    state_ = SetupState::kStartExchange;
  }

  ~Setup() override { closeConnection(); }

  Status step(std::unique_ptr<SideChannel>* out) override {
    std::lock_guard<std::mutex> lock(mu_);
    *out = nullptr;
    if (!error_.isOk()) return error_;
    Status status = advance(out);
    if (!status.isOk()) {
      error_ = status;
      closeConnection();
    }
    return status;
  }

  std::string peerName() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return peer_;
  }

 private:
  // kConnecting steps the TCP connect (its own retries and deadline); kStartExchange posts the
  // receive for the peer's setup and, at the connecting end, the send of ours; kExchanging tests
  // them until done or the setup deadline (the accepting end makes and sends its reply once the
  // peer's setup is in), then hands out the SideChannel (kDone).
  Status advance(std::unique_ptr<SideChannel>* out) {
    switch (state_) {
      case SetupState::kConnecting: {
        std::unique_ptr<Connection> conn;
        TALLY_RETURN_IF_ERROR(pending_->step(&conn));
        if (!conn) return Status::ok();
        pending_.reset();
        conn_ = std::move(conn);
        state_ = SetupState::kStartExchange;
        exchange_start_ = Clock::now();
        [[fallthrough]];
      }
      case SetupState::kStartExchange: {
        if (exchange_start_ == Clock::time_point{}) exchange_start_ = start_;
        recv_buffer_.assign(kSetupPrefixBytes + kMaxBackendName + options_.max_message_bytes, 0);
        void* data = recv_buffer_.data();
        size_t size = recv_buffer_.size();
        int tag = kSetupTag;
        TALLY_RETURN_IF_ERROR(conn_->irecv(1, &data, &size, &tag, nullptr, &recv_));
        if (!recv_) return Status::internal("side channel: no room on a new connection");
        if (!reply_) TALLY_RETURN_IF_ERROR(sendLocal());
        state_ = SetupState::kExchanging;
        [[fallthrough]];
      }
      case SetupState::kExchanging: {
        bool sent = false;
        bool received = false;
        size_t size = 0;
        TALLY_RETURN_IF_ERROR(recv_->test(&received, &size));
        if (received && !parsed_) {
          TALLY_RETURN_IF_ERROR(parseSetup(recv_buffer_.data(), size, backend_, peer_, &payload_));
          parsed_ = true;
          if (reply_) {
            std::vector<uint8_t> local;
            TALLY_RETURN_IF_ERROR(reply_(payload_, &local));
            if (local.size() > options_.max_message_bytes) {
              return Status::internal("side channel: reply of " + std::to_string(local.size()) +
                                      " bytes exceeds max_message_bytes");
            }
            local_ = std::move(local);
            TALLY_RETURN_IF_ERROR(sendLocal());
          }
        }
        if (send_) TALLY_RETURN_IF_ERROR(send_->test(&sent, nullptr));
        if (!sent || !received) {
          if (Clock::now() - exchange_start_ >
              std::chrono::milliseconds(options_.setup_timeout_ms)) {
            return Status::timeout("side-channel setup with peer " + peer_ + " did not finish " +
                                   "within " + std::to_string(options_.setup_timeout_ms) + " ms");
          }
          return Status::ok();
        }
        std::vector<uint8_t> payload = std::move(payload_);
        send_.reset();
        recv_.reset();
        auto channel = std::make_unique<SideChannel>(std::move(conn_), std::move(payload),
                                                     options_.max_message_bytes);
        TALLY_RETURN_IF_ERROR(channel->start());
        state_ = SetupState::kDone;
        *out = std::move(channel);
        return Status::ok();
      }
      case SetupState::kDone:
        return Status::internal("side-channel setup with peer " + peer_ + " stepped after done");
    }
    return Status::internal("side-channel setup: bad state");
  }

  Status sendLocal() {
    framed_ = frameSetup(backend_, local_);
    TALLY_RETURN_IF_ERROR(conn_->isend(framed_.data(), framed_.size(), kSetupTag, nullptr, &send_));
    if (!send_) return Status::internal("side channel: no room on a new connection");
    return Status::ok();
  }

  // Requests go before their connection's buffers; the connection is closed first (transport.h).
  void closeConnection() {
    if (conn_) conn_->close();
    send_.reset();
    recv_.reset();
    conn_.reset();
    pending_.reset();
  }

  mutable std::mutex mu_;
  const std::string backend_;
  std::vector<uint8_t> local_;
  const Reply reply_;  // the accepting end's; null at the connecting end
  const SideOptions options_;
  const Clock::time_point start_;
  Clock::time_point exchange_start_{};
  SetupState state_ = SetupState::kConnecting;
  std::string peer_;
  std::unique_ptr<PendingConnection> pending_;
  std::unique_ptr<Connection> conn_;
  std::vector<uint8_t> framed_;
  std::vector<uint8_t> recv_buffer_;
  std::unique_ptr<Request> send_;
  std::unique_ptr<Request> recv_;
  std::vector<uint8_t> payload_;  // the peer's setup, once in
  bool parsed_ = false;
  Status error_;
};

Status checkBackend(const std::string& backend, const std::vector<uint8_t>& local,
                    const SideOptions& options) {
  if (backend.empty() || backend.size() > kMaxBackendName) {
    return Status::internal("side channel: backend name '" + backend + "' must be 1 to " +
                            std::to_string(kMaxBackendName) + " characters");
  }
  if (local.size() > options.max_message_bytes) {
    return Status::internal("side channel: setup of " + std::to_string(local.size()) +
                            " bytes exceeds max_message_bytes " +
                            std::to_string(options.max_message_bytes));
  }
  return Status::ok();
}

}  // namespace

Status encodeHandle(uint32_t magic, const std::string& address, ConnectHandle* out) {
  if (address.empty() || address.size() > kMaxHandleBytes - kHandlePrefixBytes) {
    return Status::invalidUsage("address '" + address + "' does not fit a connect handle");
  }
  ConnectHandle handle{};
  putLe(handle.bytes, magic, 4);
  handle.bytes[4] = static_cast<uint8_t>(address.size());
  std::memcpy(handle.bytes + kHandlePrefixBytes, address.data(), address.size());
  *out = handle;
  return Status::ok();
}

Status decodeHandle(uint32_t magic, const ConnectHandle& handle, std::string* address) {
  const auto found = static_cast<uint32_t>(getLe(handle.bytes, 4));
  if (found != magic) {
    char text[96];
    std::snprintf(text, sizeof(text), "connect handle has magic 0x%08x, expected 0x%08x", found,
                  magic);
    return Status::invalidUsage(std::string(text) +
                                ": it comes from another transport or is corrupt");
  }
  const size_t length = handle.bytes[4];
  if (length == 0 || length > kMaxHandleBytes - kHandlePrefixBytes) {
    return Status::invalidUsage("connect handle has a bad address length " +
                                std::to_string(length));
  }
  address->assign(reinterpret_cast<const char*>(handle.bytes + kHandlePrefixBytes), length);
  return Status::ok();
}

Status SideListener::listen(const std::string& host_port, const SideOptions& options,
                            std::unique_ptr<SideListener>* out) {
  std::unique_ptr<Listener> tcp;
  TALLY_RETURN_IF_ERROR(tcp::listenAt(host_port, tcpOptions(options), &tcp));
  *out = std::make_unique<TcpSideListener>(std::move(tcp));
  return Status::ok();
}

Status SideSetup::connect(const std::string& address, const std::string& backend,
                          std::vector<uint8_t> local, const SideOptions& options,
                          std::unique_ptr<SideSetup>* out) {
  TALLY_RETURN_IF_ERROR(checkBackend(backend, local, options));
  ConnectionOptions conn_options;
  conn_options.sockets = 1;
  conn_options.max_requests = 4;
  std::unique_ptr<PendingConnection> pending;
  TALLY_RETURN_IF_ERROR(tcp::connectTo(address, tcpOptions(options), conn_options, &pending));
  auto setup = std::make_unique<Setup>(backend, std::move(local), nullptr, options);
  setup->startConnecting(std::move(pending), address);
  *out = std::move(setup);
  return Status::ok();
}

Status SideSetup::accept(std::unique_ptr<Connection> conn, const std::string& backend, Reply reply,
                         const SideOptions& options, std::unique_ptr<SideSetup>* out) {
  if (!conn) return Status::internal("side channel: accept without a connection");
  if (!reply) return Status::internal("side channel: accept without a reply");
  TALLY_RETURN_IF_ERROR(checkBackend(backend, {}, options));
  auto setup = std::make_unique<Setup>(backend, std::vector<uint8_t>(), std::move(reply), options);
  setup->startAccepted(std::move(conn));
  *out = std::move(setup);
  return Status::ok();
}

SideChannel::SideChannel(std::unique_ptr<Connection> conn, std::vector<uint8_t> peer_setup,
                         size_t max_message_bytes)
    : conn_(std::move(conn)),
      peer_setup_(std::move(peer_setup)),
      peer_name_(conn_->peerName()),
      watch_buffer_(max_message_bytes) {}

SideChannel::~SideChannel() { close(); }

Status SideChannel::start() {
  std::lock_guard<std::mutex> lock(mu_);
  void* data = watch_buffer_.data();
  size_t size = watch_buffer_.size();
  int tag = kFarewellTag;
  TALLY_RETURN_IF_ERROR(conn_->irecv(1, &data, &size, &tag, nullptr, &watch_));
  if (!watch_) return Status::internal("side channel: no room for the watch receive");
  return Status::ok();
}

PeerState SideChannel::poll(std::vector<uint8_t>* farewell, Status* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == PeerState::kOpen && watch_) {
    bool done = false;
    size_t size = 0;
    Status status = watch_->test(&done, &size);
    if (!status.isOk()) {
      state_ = PeerState::kLost;
      lost_ = std::move(status);
    } else if (done) {
      state_ = PeerState::kFarewell;
      farewell_.assign(watch_buffer_.begin(), watch_buffer_.begin() + static_cast<long>(size));
    }
  } else if (state_ == PeerState::kOpen) {
    state_ = PeerState::kLost;
    lost_ = Status::remote("side channel to peer " + peer_name_ + " was closed");
  }
  if (state_ == PeerState::kFarewell && farewell != nullptr) *farewell = farewell_;
  if (state_ == PeerState::kLost && why != nullptr) *why = lost_;
  return state_;
}

void SideChannel::close(const std::vector<uint8_t>& farewell, int64_t timeout_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  closed_ = true;
  if (conn_ && farewell.size() <= watch_buffer_.size()) {
    std::unique_ptr<Request> send;
    Status status = conn_->isend(farewell.data(), farewell.size(), kFarewellTag, nullptr, &send);
    // A peer already gone is fine: it needs no farewell.
    if (status.isOk() && send) status = send->wait(timeout_ms, nullptr);
    if (!status.isOk()) {
      TALLY_INFO(log::kNet, "side channel: no farewell to peer %s: %s", peer_name_.c_str(),
                 status.toString().c_str());
    }
    conn_->close();
  }
  if (conn_) conn_->close();
  watch_.reset();
}

void SideChannel::close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  if (conn_) conn_->close();
  watch_.reset();
}

}  // namespace tally::transport::side
