// The accepting side: a non-blocking listening socket that collects the streams of each
// connection by the id in their hellos.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "common/log.h"
#include "transport/tcp/connection.h"
#include "transport/tcp/internal.h"
#include "transport/tcp/wire.h"

namespace tally::transport::tcp {
namespace {

using Clock = std::chrono::steady_clock;

// A socket accepted but whose hello has not fully arrived.
struct Incoming {
  Fd fd;
  std::string peer;
  uint8_t hello[kHelloBytes] = {};
  size_t received = 0;
  Clock::time_point since;
};

// Streams of one connection seen so far.
struct Group {
  std::vector<Fd> fds;  // by stream index
  int arrived = 0;
  std::string peer;  // of stream 0, once it came
  uint64_t min_stripe = 0;
  Clock::time_point since;
};

class TcpListener final : public Listener {
 public:
  TcpListener(Fd fd, const SockAddr& bound, const ConnectHandle& handle, const TcpOptions& options)
      : fd_(std::move(fd)), address_(bound.toString()), handle_(handle), options_(options) {}

  const ConnectHandle& handle() const override { return handle_; }
  std::string address() const override { return address_; }
  DroppedHellos droppedHellos() const override {
    return {bad_hellos_.load(std::memory_order_relaxed),
            hello_timeouts_.load(std::memory_order_relaxed)};
  }

  // Non-blocking: takes what the kernel has queued, reads whatever hello bytes have arrived,
  // and hands out at most one finished connection per call.
  Status accept(std::unique_ptr<Connection>* conn) override {
    std::lock_guard<std::mutex> lock(mu_);
    TALLY_RETURN_IF_ERROR(acceptQueued());
    TALLY_RETURN_IF_ERROR(readHellos());
    expire();
    if (ready_.empty()) {
      *conn = nullptr;
    } else {
      *conn = std::move(ready_.front());
      ready_.pop_front();
    }
    return Status::ok();
  }

  Status acceptWait(int64_t timeout_ms, std::unique_ptr<Connection>* conn) override {
    auto deadline = Clock::now() + std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0));
    *conn = nullptr;
    std::lock_guard<std::mutex> wait_lock(wait_mu_);  // one waiter at a time owns poll_fds_
    for (;;) {
      std::unique_ptr<Connection> accepted;
      TALLY_RETURN_IF_ERROR(accept(&accepted));
      if (accepted) {
        *conn = std::move(accepted);
        return Status::ok();
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (timeout_ms >= 0 && left.count() <= 0) return Status::ok();
      // Sleep until the listening socket or a half-received hello has something; the cap lets
      // stale sockets expire even when nothing happens.
      poll_fds_.clear();
      {
        std::lock_guard<std::mutex> lock(mu_);
        poll_fds_.push_back({fd_.get(), POLLIN, 0});
        for (const Incoming& in : incoming_) poll_fds_.push_back({in.fd.get(), POLLIN, 0});
      }
      int64_t wait_ms = timeout_ms < 0 ? 100 : std::min<int64_t>(left.count(), 100);
      if (::poll(poll_fds_.data(), poll_fds_.size(), static_cast<int>(wait_ms)) < 0 &&
          errno != EINTR) {
        return Status::fromErrno("poll on listener " + address_, errno);
      }
    }
  }

 private:
  Status acceptQueued() {
    for (;;) {
      SockAddr peer;
      peer.length = sizeof(peer.storage);
      int fd = ::accept4(fd_.get(), peer.get(), &peer.length, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return Status::fromErrno("accept on " + address_, errno);
      }
      Incoming in;
      in.fd = Fd(fd);
      in.peer = peer.toString();
      in.since = Clock::now();
      incoming_.push_back(std::move(in));
    }
  }

  Status readHellos() {
    for (size_t i = 0; i < incoming_.size();) {
      Incoming& in = incoming_[i];
      bool drop = false;
      while (in.received < kHelloBytes) {
        ssize_t got =
            ::recv(in.fd.get(), in.hello + in.received, kHelloBytes - in.received, MSG_DONTWAIT);
        if (got > 0) {
          in.received += static_cast<size_t>(got);
          continue;
        }
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        TALLY_INFO(log::kNet, "tcp: peer %s went away before its hello on %s",
                   in.peer.c_str(), address_.c_str());
        drop = true;
        break;
      }
      if (!drop && in.received == kHelloBytes) {
        TALLY_RETURN_IF_ERROR(admit(std::move(in)));
        drop = true;
      }
      if (drop) {
        incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    return Status::ok();
  }

  // A socket whose hello is complete: checked, then added to its connection's group. A bad
  // hello closes that socket only; the listener carries on.
  Status admit(Incoming in) {
    Hello hello = decodeHello(in.hello);
    if (hello.magic != kHelloMagic) {
      TALLY_WARN("tcp: rejecting peer %s on %s: bad hello magic 0x%016" PRIx64,
                 in.peer.c_str(), address_.c_str(), hello.magic);
      bad_hellos_.fetch_add(1, std::memory_order_relaxed);
      return Status::ok();
    }
    if (hello.version != kProtocolVersion) {
      TALLY_WARN("tcp: rejecting peer %s on %s: protocol version %u, expected %u",
                 in.peer.c_str(), address_.c_str(), hello.version, kProtocolVersion);
      bad_hellos_.fetch_add(1, std::memory_order_relaxed);
      return Status::ok();
    }
    if (hello.count < 1 || hello.count > kMaxStreams || hello.index >= hello.count) {
      TALLY_WARN("tcp: rejecting peer %s on %s: stream %u of %u", in.peer.c_str(),
                 address_.c_str(), hello.index, hello.count);
      bad_hellos_.fetch_add(1, std::memory_order_relaxed);
      return Status::ok();
    }
    auto [it, inserted] = groups_.try_emplace(hello.connection_id);
    Group& group = it->second;
    if (inserted) {
      group.fds.resize(hello.count);
      group.since = in.since;
    }
    if (group.fds.size() != hello.count || group.fds[hello.index].valid()) {
      TALLY_WARN(
          "tcp: rejecting peer %s on %s: stream %u of %u does not fit its "
          "connection",
          in.peer.c_str(), address_.c_str(), hello.index, hello.count);
      bad_hellos_.fetch_add(1, std::memory_order_relaxed);
      return Status::ok();
    }
    if (hello.index == 0) {
      group.peer = in.peer;
      group.min_stripe = hello.min_stripe;
    }
    group.fds[hello.index] = std::move(in.fd);
    if (++group.arrived < static_cast<int>(group.fds.size())) return Status::ok();

    Group done = std::move(group);
    groups_.erase(it);
    std::unique_ptr<Connection> conn;
    TALLY_RETURN_IF_ERROR(makeConnection(std::move(done.fds), done.peer, options_.max_requests,
                                         done.min_stripe, options_.io_timeout_ms, &conn));
    ready_.push_back(std::move(conn));
    return Status::ok();
  }

  // Drops sockets and partial connections that did not complete within the connect timeout.
  void expire() {
    auto limit = Clock::now() - std::chrono::milliseconds(options_.connect_timeout_ms);
    for (size_t i = 0; i < incoming_.size();) {
      if (incoming_[i].since < limit) {
        TALLY_WARN("tcp: dropping peer %s on %s: no hello within %" PRId64 " ms",
                   incoming_[i].peer.c_str(), address_.c_str(), options_.connect_timeout_ms);
        incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i));
        hello_timeouts_.fetch_add(1, std::memory_order_relaxed);
      } else {
        ++i;
      }
    }
    for (auto it = groups_.begin(); it != groups_.end();) {
      if (it->second.since < limit) {
        hello_timeouts_.fetch_add(1, std::memory_order_relaxed);
        TALLY_WARN("tcp: dropping a connection on %s: %d of %zu streams within %" PRId64
                   " ms",
                   address_.c_str(), it->second.arrived, it->second.fds.size(),
                   options_.connect_timeout_ms);
        it = groups_.erase(it);
      } else {
        ++it;
      }
    }
  }

  const Fd fd_;
  const std::string address_;
  const ConnectHandle handle_;
  const TcpOptions options_;
  std::mutex mu_;
  std::mutex wait_mu_;              // held by acceptWait
  std::vector<pollfd> poll_fds_;  // reused by acceptWait (guarded by wait_mu_)
  std::vector<Incoming> incoming_;
  std::map<uint64_t, Group> groups_;
  std::deque<std::unique_ptr<Connection>> ready_;
  std::atomic<uint64_t> bad_hellos_{0};
  std::atomic<uint64_t> hello_timeouts_{0};
};

}  // namespace

Status makeListener(const SockAddr& addr, const TcpOptions& options,
                    std::unique_ptr<Listener>* out) {
  Fd fd;
  TALLY_RETURN_IF_ERROR(newSocket(addr.family(), &fd));
  int one = 1;
  if (setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return Status::fromErrno("setsockopt(SO_REUSEADDR)", errno);
  }
  if (::bind(fd.get(), addr.get(), addr.length) != 0) {
    return Status::fromErrno("bind to " + addr.toString(), errno);
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    return Status::fromErrno("listen on " + addr.toString(), errno);
  }
  SockAddr bound;
  TALLY_RETURN_IF_ERROR(localAddress(fd.get(), &bound));
  ConnectHandle handle{};
  TALLY_RETURN_IF_ERROR(encodeHandle(bound, &handle));
  TALLY_INFO(log::kNet, "tcp: listening on %s", bound.toString().c_str());
  *out = std::make_unique<TcpListener>(std::move(fd), bound, handle, options);
  return Status::ok();
}

Status listenAt(const std::string& host_port, const TcpOptions& options,
                std::unique_ptr<Listener>* out) {
  std::string host;
  uint16_t port = 0;
  TALLY_RETURN_IF_ERROR(splitHostPort(host_port, &host, &port));
  SockAddr addr;
  TALLY_RETURN_IF_ERROR(resolve(host, port, true, &addr));
  return makeListener(addr, options, out);
}

}  // namespace tally::transport::tcp
