// SPDX-License-Identifier: Apache-2.0
// The accepting side: a non-blocking listening socket that collects the streams of each
// connection by the id in their hellos.
//
// Nothing a peer does stops the listener: running out of descriptors at
// accept() closes the connections that do not fit (with a spare descriptor kept for the purpose)
// and the sockets already accepted are still read and expired; at most
// TcpOptions::max_pending_sockets sockets wait for a complete connection, the oldest closed first;
// a connection that cannot be set up (no memory, no threads) is closed alone. Each of these is
// counted and logged once per interval, not once per failure.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <vector>

#include "common/log.h"
#include "common/strings.h"
#include "transport/tcp/connection.h"
#include "transport/tcp/internal.h"
#include "transport/tcp/wire.h"

namespace tally::transport::tcp {
namespace {

using Clock = std::chrono::steady_clock;

// Repeated failures are logged at most once per interval, with their count.
constexpr auto kLogInterval = std::chrono::seconds(10);
// How long accept() is left alone after it failed for lack of a resource that closing the spare
// descriptor cannot give (no spare left, ENOBUFS, ENOMEM). The sockets already accepted are
// still served meanwhile.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);

// accept() failing for lack of a resource: the process or the system is out of something.
bool outOfResources(int err) {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

// accept() failing because of the connection it was taking (accept(2): these are to be treated
// like EAGAIN, by trying again): that connection is gone, the next one may be fine.
bool connectionFailed(int err) {
  switch (err) {
    case ECONNABORTED:
    case EPROTO:
    case EPERM:
    case ENETDOWN:
    case ENETUNREACH:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case EHOSTUNREACH:
    case ENONET:
    case EOPNOTSUPP:
      return true;
    default:
      return false;
  }
}

// A descriptor held in reserve: closed to make room for accepting (and at once closing) a
// connection when the process has no descriptor left, then opened again.
int openSpare() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

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
  TcpListener(Fd fd, const SockAddr& bound, const ConnectHandle& handle, const TcpOptions& options,
              ConnectionMaker make)
      : fd_(std::move(fd)),
        address_(bound.toString()),
        handle_(handle),
        options_(options),
        max_pending_(static_cast<size_t>(std::max(options.max_pending_sockets, 1))),
        make_(make ? std::move(make) : ConnectionMaker(makeConnection)),
        spare_(openSpare()) {}

  const ConnectHandle& handle() const override { return handle_; }
  std::string address() const override { return address_; }
  DroppedHellos droppedHellos() const override {
    return {bad_hellos_.load(std::memory_order_relaxed),
            hello_timeouts_.load(std::memory_order_relaxed),
            no_descriptors_.load(std::memory_order_relaxed),
            pending_dropped_.load(std::memory_order_relaxed)};
  }

  // Non-blocking: takes what the kernel has queued, reads whatever hello bytes have arrived,
  // and hands out at most one finished connection per call. The sockets already accepted are
  // read and expired whatever accept() said.
  Status accept(std::unique_ptr<Connection>* conn) override {
    std::lock_guard<std::mutex> lock(mu_);
    Status accepted = acceptQueued();
    readHellos();
    expire();
    if (ready_.empty()) {
      *conn = nullptr;
      return accepted;
    }
    *conn = std::move(ready_.front());
    ready_.pop_front();
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
      // stale sockets expire even when nothing happens. While accept() is backing off the
      // listening socket is left out (it stays readable, and would wake this at once).
      poll_fds_.clear();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (Clock::now() >= accept_paused_until_) poll_fds_.push_back({fd_.get(), POLLIN, 0});
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
    if (Clock::now() < accept_paused_until_) return Status::ok();
    if (!spare_.valid()) spare_.reset(openSpare());
    for (;;) {
      SockAddr peer;
      peer.length = sizeof(peer.storage);
      int fd = ::accept4(fd_.get(), peer.get(), &peer.length, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        const int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK) return Status::ok();
        if (err == EINTR || connectionFailed(err)) continue;
        if (outOfResources(err)) {
          if (shedOne(err)) continue;
          accept_paused_until_ = Clock::now() + kAcceptBackoff;
          return Status::ok();
        }
        return Status::fromErrno("accept on " + address_, err);
      }
      makeRoom();
      Incoming in;
      in.fd = Fd(fd);
      in.peer = peer.toString();
      in.since = Clock::now();
      incoming_.push_back(std::move(in));
    }
  }

  // accept() failed with `err` for lack of a resource. With a spare descriptor and EMFILE or
  // ENFILE: gives the spare up to accept the first queued connection, closes that connection and
  // takes the spare back. True when a connection was closed so (accept may be tried again).
  bool shedOne(int err) {
    bool shed = false;
    if ((err == EMFILE || err == ENFILE) && spare_.valid()) {
      spare_.reset();
      int fd = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        ::close(fd);
        no_descriptors_.fetch_add(1, std::memory_order_relaxed);
        shed = true;
      }
      spare_.reset(openSpare());  // another thread may have taken the descriptor meanwhile
    }
    uint64_t count = 0;
    if (out_of_resources_.note(&count)) {
      TALLY_WARN("tcp: accept on %s failed: %s; %" PRIu64
                 " failure(s) since the last report; queued connections are closed until "
                 "there is room%s",
                 address_.c_str(), std::strerror(err), count,
                 spare_.valid() ? "" : " (no spare descriptor: accept paused)");
    }
    return shed;
  }

  size_t pendingSockets() const { return incoming_.size() + grouped_sockets_; }

  // Before one more socket joins the pending ones: when they are at the limit, reads the hellos
  // that have arrived (finished connections leave the count), then closes the oldest.
  void makeRoom() {
    if (pendingSockets() < max_pending_) return;
    readHellos();
    uint64_t dropped = 0;
    while (pendingSockets() >= max_pending_ && pendingSockets() > 0) {
      auto oldest_group = groups_.end();
      for (auto it = groups_.begin(); it != groups_.end(); ++it) {
        if (oldest_group == groups_.end() || it->second.since < oldest_group->second.since) {
          oldest_group = it;
        }
      }
      if (!incoming_.empty() &&
          (oldest_group == groups_.end() || incoming_.front().since <= oldest_group->second.since)) {
        incoming_.erase(incoming_.begin());
        ++dropped;
      } else {
        dropped += static_cast<uint64_t>(oldest_group->second.arrived);
        grouped_sockets_ -= static_cast<size_t>(oldest_group->second.arrived);
        groups_.erase(oldest_group);
      }
    }
    pending_dropped_.fetch_add(dropped, std::memory_order_relaxed);
    for (uint64_t i = 0; i < dropped; ++i) {
      uint64_t count = 0;
      if (pending_full_.note(&count)) {
        TALLY_WARN("tcp: %zu sockets on %s are waiting to complete a connection, the limit; "
                   "closed the oldest, %" PRIu64 " since the last report",
                   max_pending_, address_.c_str(), count);
      }
    }
  }

  void readHellos() {
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
        // The socket leaves the list whatever admit() makes of it: it owns the socket now.
        std::string peer = in.peer;
        Status st = admitGuarded(std::move(in));
        if (!st.isOk()) {
          uint64_t count = 0;
          if (admit_failed_.note(&count)) {
            TALLY_WARN("tcp: closed the connection of peer %s on %s: %s; %" PRIu64
                       " connection(s) closed so since the last report",
                       peer.c_str(), address_.c_str(), st.toString().c_str(), count);
          }
        }
        drop = true;
      }
      if (drop) {
        incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }

  // admit(), with an exception from setting up the connection (no memory) made a Status: it
  // fails that connection, not the listener.
  Status admitGuarded(Incoming in) {
    try {
      return admit(std::move(in));
    } catch (const std::exception& e) {
      return Status::system(std::string("cannot set up the connection: ") + e.what());
    }
  }

  // A socket whose hello is complete: checked, then added to its connection's group. A bad
  // hello closes that socket only; the listener carries on. An error is a connection that could
  // not be set up; its sockets are closed.
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
    ++grouped_sockets_;
    if (++group.arrived < static_cast<int>(group.fds.size())) return Status::ok();

    Group done = std::move(group);
    groups_.erase(it);
    grouped_sockets_ -= done.fds.size();
    std::unique_ptr<Connection> conn;
    TALLY_RETURN_IF_ERROR(make_(std::move(done.fds), done.peer, options_.max_requests,
                                done.min_stripe, options_.timeouts.io_ms,
                                options_.inline_sends, &conn));
    ready_.push_back(std::move(conn));
    return Status::ok();
  }

  // Drops sockets and partial connections that did not complete within the connect timeout.
  void expire() {
    auto limit = Clock::now() - std::chrono::milliseconds(options_.timeouts.connect_ms);
    for (size_t i = 0; i < incoming_.size();) {
      if (incoming_[i].since < limit) {
        uint64_t count = 0;
        if (expired_.note(&count)) {
          TALLY_WARN("tcp: dropping peer %s on %s: no hello within %" PRId64
                     " ms; %" PRIu64 " dropped so since the last report",
                     incoming_[i].peer.c_str(), address_.c_str(), options_.timeouts.connect_ms,
                     count);
        }
        incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i));
        hello_timeouts_.fetch_add(1, std::memory_order_relaxed);
      } else {
        ++i;
      }
    }
    for (auto it = groups_.begin(); it != groups_.end();) {
      if (it->second.since < limit) {
        hello_timeouts_.fetch_add(1, std::memory_order_relaxed);
        uint64_t count = 0;
        if (expired_.note(&count)) {
          TALLY_WARN("tcp: dropping a connection on %s: %d of %zu streams within %" PRId64
                     " ms; %" PRIu64 " dropped so since the last report",
                     address_.c_str(), it->second.arrived, it->second.fds.size(),
                     options_.timeouts.connect_ms, count);
        }
        grouped_sockets_ -= static_cast<size_t>(it->second.arrived);
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
  const size_t max_pending_;
  const ConnectionMaker make_;
  std::mutex mu_;
  std::mutex wait_mu_;              // held by acceptWait
  std::vector<pollfd> poll_fds_;  // reused by acceptWait (guarded by wait_mu_)
  // The rest is guarded by mu_.
  std::vector<Incoming> incoming_;
  std::map<uint64_t, Group> groups_;
  size_t grouped_sockets_ = 0;  // sockets in groups_
  std::deque<std::unique_ptr<Connection>> ready_;
  Fd spare_;
  Clock::time_point accept_paused_until_;
  log::RateLimitedLog out_of_resources_{kLogInterval};
  log::RateLimitedLog pending_full_{kLogInterval};
  log::RateLimitedLog admit_failed_{kLogInterval};
  log::RateLimitedLog expired_{kLogInterval};
  std::atomic<uint64_t> bad_hellos_{0};
  std::atomic<uint64_t> hello_timeouts_{0};
  std::atomic<uint64_t> no_descriptors_{0};   // queued connections closed for lack of one
  std::atomic<uint64_t> pending_dropped_{0};  // oldest waiting sockets closed at the limit
};

}  // namespace

Status makeListener(const SockAddr& addr, const TcpOptions& options,
                    std::unique_ptr<Listener>* out, ConnectionMaker make) {
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
  *out = std::make_unique<TcpListener>(std::move(fd), bound, handle, options, std::move(make));
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
