// SPDX-License-Identifier: Apache-2.0
// A wire-level peer for the security tests: speaks protocol/wire.h messages over one transport
// connection, so a test can play a misbehaving worker or an impostor reducer. Every wait is
// bounded.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <string>

#include "protocol/wire.h"
#include "transport/network.h"

namespace tally::security_test {

namespace wire = protocol::wire;
using HeaderBuf = std::array<uint8_t, wire::kMaxHeaderBytes>;

inline constexpr int64_t kWaitMs = 5000;

class RawPeer {
 public:
  explicit RawPeer(std::unique_ptr<transport::Connection> conn) : conn_(std::move(conn)) {}
  ~RawPeer() { conn_->close(); }

  static Status connect(const std::string& address, std::unique_ptr<RawPeer>* out) {
    transport::NetworkConfig net;
    net.tcp.sockets = 1;
    net.timeouts.connect_ms = kWaitMs;
    std::unique_ptr<transport::Connection> conn;
    TALLY_RETURN_IF_ERROR(
        transport::connectDefault(address, net, transport::ConnectionOptions{}, &conn));
    *out = std::make_unique<RawPeer>(std::move(conn));
    return Status::ok();
  }

  Status send(const wire::Frame& f) { return sendBytes(f.data(), f.size, wire::kTagHeader); }

  Status sendBytes(const void* data, size_t size, int tag) {
    std::unique_ptr<transport::Request> req;
    TALLY_RETURN_IF_ERROR(conn_->isend(data, size, tag, nullptr, &req));
    if (!req) return Status::internal("no room to send");
    return req->wait(kWaitMs, nullptr);
  }

  // Receives one header message; kTimeout after timeout_ms (the connection is then closed).
  Status recv(HeaderBuf* buf, size_t* got, int64_t timeout_ms = kWaitMs) {
    void* data = buf->data();
    size_t size = buf->size();
    int tag = wire::kTagHeader;
    transport::MemoryRegion* mr = nullptr;
    std::unique_ptr<transport::Request> req;
    TALLY_RETURN_IF_ERROR(conn_->irecv(1, &data, &size, &tag, &mr, &req));
    if (!req) return Status::internal("no room to receive");
    size_t sizes[transport::kMaxRecvs] = {};
    Status st = req->wait(timeout_ms, sizes);
    if (!st.isOk()) {
      conn_->close();
      return st;
    }
    *got = sizes[0];
    return Status::ok();
  }

  // Receives one header and returns its type (kBye's value when it is not a valid message).
  Status recvType(wire::MsgType* type, HeaderBuf* buf, size_t* got) {
    TALLY_RETURN_IF_ERROR(recv(buf, got));
    return wire::peekType(buf->data(), *got, type);
  }

  // Receives one header that must be a Reject; returns its reason.
  Status recvReject(std::string* reason) {
    HeaderBuf buf;
    size_t got = 0;
    TALLY_RETURN_IF_ERROR(recv(&buf, &got));
    wire::Reason r;
    TALLY_RETURN_IF_ERROR(wire::decodeReject(buf.data(), got, &r));
    *reason = r.text;
    return Status::ok();
  }

  transport::Connection* conn() { return conn_.get(); }

 private:
  std::unique_ptr<transport::Connection> conn_;
};

}  // namespace tally::security_test
