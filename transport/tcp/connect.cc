// SPDX-License-Identifier: Apache-2.0
// The connecting side: a resumable state machine over non-blocking sockets.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/strings.h"
#include "transport/tcp/connection.h"
#include "transport/tcp/internal.h"
#include "transport/tcp/wire.h"

namespace tally::transport::tcp {
namespace {

using Clock = std::chrono::steady_clock;

enum class ConnectState { kStart, kConnecting, kSendingHello, kDone };

// Errors a peer that is still starting (or restarting) can cause; connect tries again.
bool retryable(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == ECONNABORTED;
}

uint64_t randomConnectionId() {
  std::random_device device;
  uint64_t id = (static_cast<uint64_t>(device()) << 32) ^ device();
  return id ^ static_cast<uint64_t>(Clock::now().time_since_epoch().count());
}

class TcpPendingConnection final : public PendingConnection {
 public:
  TcpPendingConnection(const SockAddr& addr, std::string peer, int streams, int max_requests,
                       uint64_t min_stripe, int64_t timeout_ms, int64_t io_timeout_ms,
                       bool inline_sends)
      : addr_(addr),
        peer_(std::move(peer)),
        max_requests_(max_requests),
        min_stripe_(min_stripe),
        timeout_ms_(timeout_ms),
        io_timeout_ms_(io_timeout_ms),
        inline_sends_(inline_sends),
        streams_(static_cast<size_t>(streams)) {}

  // Re-entry contract: call until *conn is set or an error comes back. Each call does one
  // non-blocking step: kStart opens every socket; kConnecting checks them with a zero-timeout
  // poll and re-opens refused ones after a short backoff, until the connect timeout;
  // kSendingHello writes whatever hello bytes the sockets take; the last step hands the
  // sockets to a Connection (kDone). An error is final and is returned again by later calls.
  Status step(std::unique_ptr<Connection>* conn) override {
    if (!error_.isOk()) return error_;
    Status status = advance(conn);
    if (!status.isOk()) {
      error_ = status;
      streams_.clear();
    }
    return status;
  }

 private:
  struct StreamState {
    Fd fd;
    bool connected = false;
    size_t hello_sent = 0;
    uint8_t hello[kHelloBytes] = {};
    Clock::time_point retry_at{};
    Clock::duration backoff = std::chrono::milliseconds(2);
  };

  Status advance(std::unique_ptr<Connection>* conn) {
    switch (state_) {
      case ConnectState::kStart: {
        deadline_ = Clock::now() + std::chrono::milliseconds(std::max<int64_t>(timeout_ms_, 0));
        uint64_t id = randomConnectionId();
        for (size_t i = 0; i < streams_.size(); ++i) {
          Hello hello;
          hello.index = static_cast<uint16_t>(i);
          hello.count = static_cast<uint16_t>(streams_.size());
          hello.connection_id = id;
          hello.min_stripe = min_stripe_;
          encodeHello(hello, streams_[i].hello);
          TALLY_RETURN_IF_ERROR(open(streams_[i]));
        }
        state_ = ConnectState::kConnecting;
        return Status::ok();
      }
      case ConnectState::kConnecting: {
        bool all = true;
        for (StreamState& s : streams_) {
          TALLY_RETURN_IF_ERROR(poke(s));
          all = all && s.connected;
        }
        if (all) {
          state_ = ConnectState::kSendingHello;
          return Status::ok();
        }
        return checkDeadline();
      }
      case ConnectState::kSendingHello: {
        bool all = true;
        for (StreamState& s : streams_) {
          TALLY_RETURN_IF_ERROR(sendHello(s));
          all = all && s.hello_sent == kHelloBytes;
        }
        if (!all) return checkDeadline();
        std::vector<Fd> fds;
        for (StreamState& s : streams_) fds.push_back(std::move(s.fd));
        streams_.clear();
        state_ = ConnectState::kDone;
        return makeConnection(std::move(fds), peer_, max_requests_, min_stripe_, io_timeout_ms_,
                              inline_sends_, conn);
      }
      case ConnectState::kDone:
        return Status::internal("connect to peer " + peer_ +
                                ": step() called again after it produced the connection");
    }
    return Status::internal("connect: bad state");
  }

  // Starts a non-blocking connect on a fresh socket.
  Status open(StreamState& s) {
    TALLY_RETURN_IF_ERROR(newSocket(addr_.family(), &s.fd));
    if (::connect(s.fd.get(), addr_.get(), addr_.length) == 0) {
      s.connected = true;
      return Status::ok();
    }
    if (errno == EINPROGRESS || errno == EINTR) return Status::ok();
    return refusedOrFatal(s, errno);
  }

  // A connect that failed with `err`: retried later when the peer may just not be up yet.
  Status refusedOrFatal(StreamState& s, int err) {
    s.fd.reset();
    if (!retryable(err)) return Status::fromErrno("connect to peer " + peer_, err);
    last_error_ = err;
    s.retry_at = Clock::now() + s.backoff;
    s.backoff = std::min<Clock::duration>(s.backoff * 2, std::chrono::milliseconds(100));
    return Status::ok();
  }

  // One look at a socket that is not connected yet.
  Status poke(StreamState& s) {
    if (s.connected) return Status::ok();
    if (!s.fd.valid()) return Clock::now() >= s.retry_at ? open(s) : Status::ok();
    pollfd pfd{s.fd.get(), POLLOUT, 0};
    int ready = ::poll(&pfd, 1, 0);
    if (ready < 0) return errno == EINTR ? Status::ok() : Status::fromErrno("poll", errno);
    if (ready == 0) return Status::ok();
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(s.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
      return Status::fromErrno("getsockopt(SO_ERROR)", errno);
    }
    if (err != 0) return refusedOrFatal(s, err);
    s.connected = true;
    return Status::ok();
  }

  Status sendHello(StreamState& s) {
    while (s.hello_sent < kHelloBytes) {
      ssize_t sent = ::send(s.fd.get(), s.hello + s.hello_sent, kHelloBytes - s.hello_sent,
                            MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
        return Status::fromErrno("send hello to peer " + peer_, errno);
      }
      s.hello_sent += static_cast<size_t>(sent);
    }
    return Status::ok();
  }

  Status checkDeadline() const {
    if (Clock::now() < deadline_) return Status::ok();
    std::string text =
        "connect to peer " + peer_ + " timed out after " + std::to_string(timeout_ms_) + " ms";
    if (last_error_ != 0) text += std::string(" (last error: ") + std::strerror(last_error_) + ")";
    return Status::timeout(text);
  }

  const SockAddr addr_;
  const std::string peer_;
  const int max_requests_;
  const uint64_t min_stripe_;
  const int64_t timeout_ms_;
  const int64_t io_timeout_ms_;
  const bool inline_sends_;
  ConnectState state_ = ConnectState::kStart;
  Clock::time_point deadline_{};
  std::vector<StreamState> streams_;
  int last_error_ = 0;
  Status error_;
};

}  // namespace

Status makePendingConnection(const SockAddr& addr, const std::string& peer,
                             const TcpOptions& options, const ConnectionOptions& conn_options,
                             std::unique_ptr<PendingConnection>* out) {
  int streams = conn_options.sockets > 0 ? conn_options.sockets : options.sockets;
  if (streams < 1 || streams > kMaxStreams) {
    return Status::invalidUsage("TCP sockets per connection is " + std::to_string(streams) +
                                ", expected 1 to " + std::to_string(kMaxStreams));
  }
  int max_requests =
      conn_options.max_requests > 0 ? conn_options.max_requests : options.max_requests;
  *out = std::make_unique<TcpPendingConnection>(addr, peer, streams, max_requests,
                                                options.min_stripe, options.timeouts.connect_ms,
                                                options.timeouts.io_ms, options.inline_sends);
  return Status::ok();
}

Status connectTo(const std::string& host_port, const TcpOptions& options,
                 const ConnectionOptions& conn_options, std::unique_ptr<PendingConnection>* out) {
  std::string host;
  uint16_t port = 0;
  TALLY_RETURN_IF_ERROR(splitHostPort(host_port, &host, &port));
  SockAddr addr;
  TALLY_RETURN_IF_ERROR(resolve(host, port, false, &addr));
  return makePendingConnection(addr, addr.toString(), options, conn_options, out);
}

Status connectBlocking(const std::string& host_port, const TcpOptions& options,
                       const ConnectionOptions& conn_options, std::unique_ptr<Connection>* out) {
  std::unique_ptr<PendingConnection> pending;
  TALLY_RETURN_IF_ERROR(connectTo(host_port, options, conn_options, &pending));
  std::unique_ptr<Connection> conn;
  // The state machine enforces the connect timeout itself; between steps we sleep briefly
  // rather than spin.
  for (;;) {
    TALLY_RETURN_IF_ERROR(pending->step(&conn));
    if (conn) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  *out = std::move(conn);
  return Status::ok();
}

}  // namespace tally::transport::tcp
