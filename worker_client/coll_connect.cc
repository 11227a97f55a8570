// SPDX-License-Identifier: Apache-2.0
#include "worker_client/coll_connect.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "common/strings.h"
#include "transport/raw_stream.h"

namespace tally::worker_client {
namespace wire = protocol::wire;
namespace opening = protocol::opening;

namespace {

constexpr int64_t kConnectGraceMs = 250;
// How often a wait looks at its cancel flag.
constexpr int64_t kCancelStepMs = 20;

bool cancelled(const Cancel* cancel) {
  return cancel != nullptr && cancel->load(std::memory_order_acquire);
}

Status givenUp(const std::string& what) { return Status::timeout(what + ": given up"); }

// Waits for `req` until the deadline, or until `cancel` is set.
Status waitUntil(transport::Request* req, Clock::time_point deadline, size_t* sizes,
                 const std::string& what, const Cancel* cancel) {
  for (;;) {
    const int64_t left = msLeft(deadline);
    Status st = req->wait(cancel == nullptr ? left : std::min(left, kCancelStepMs), sizes);
    if (st.code() != StatusCode::kTimeout) return st;
    if (cancelled(cancel)) return givenUp(what);
    if (left <= kCancelStepMs || cancel == nullptr) return Status::timeout(what);
  }
}

// Waits until `fd` has something to read (or an error), the deadline, or `cancel`.
Status waitReadable(int fd, Clock::time_point deadline, const std::string& what,
                    const Cancel* cancel) {
  if (cancel == nullptr) return Status::ok();  // recvFrame waits on its own
  for (;;) {
    const int64_t left = msLeft(deadline);
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min(left, kCancelStepMs)));
    if (n != 0) return Status::ok();  // readable, an error or a hang-up: recvFrame says which
    if (cancelled(cancel)) return givenUp(what);
    if (left <= kCancelStepMs) return Status::timeout(what);
  }
}

// The Status for the reducer's answer of `type` to `what`: a Reject (kInvalidUsage, its reason),
// an Error (kRemote), or anything else (kRemote).
Status refusal(const HeaderBuf& buf, size_t got, wire::MsgType type, const std::string& address,
               int rank, const char* what) {
  wire::Reason reason;
  if (type == wire::MsgType::kReject) {
    TALLY_RETURN_IF_ERROR(wire::decodeReject(buf.data(), got, &reason));
    return Status::invalidUsage("reducer " + address + " rejected rank " + std::to_string(rank) +
                                ": " + reason.text);
  }
  if (type == wire::MsgType::kError) {
    TALLY_RETURN_IF_ERROR(wire::decodeError(buf.data(), got, &reason));
    return Status::remote("reducer " + address + ": " + reason.text);
  }
  return Status::remote("reducer " + address + " answered " + what + " with " +
                        wire::msgTypeName(type));
}

}  // namespace

int64_t msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max<int64_t>(0, left.count());
}

Status connectReducer(transport::Network* network, const std::string& address,
                      Clock::time_point deadline, const transport::ConnectionOptions& options,
                      std::unique_ptr<transport::Connection>* out, const Cancel* cancel) {
  std::shared_ptr<transport::Network> fallback;
  if (network == nullptr) {
    // Given none: the network layer's default (TCP), its own connect bounded by the deadline.
    transport::NetworkConfig config;
    config.timeouts.connect_ms = std::max<int64_t>(1, msLeft(deadline));
    TALLY_RETURN_IF_ERROR(transport::openDefaultNetwork(config, &fallback));
    network = fallback.get();
  }
  const auto start = Clock::now();
  Status last;
  for (;;) {
    // finishConnect bounds the network's own connect timeout by the deadline, plus a little: the
    // plugin sets both from TALLY_CONNECT_TIMEOUT_MS, and when they end together the network's
    // error says why (refused, unreachable) where ours would only say "timeout".
    const auto attempt_end = deadline + std::chrono::milliseconds(kConnectGraceMs);
    std::unique_ptr<transport::PendingConnection> pending;
    last = network->connectTo(address, options, &pending);
    // In steps when it may be cancelled: the network retries a refused connect on its own until
    // its timeout, and a connect to a host that drops packets waits that long too.
    while (last.isOk()) {
      const int64_t left = msLeft(attempt_end);
      const bool last_step = cancel == nullptr || left <= kCancelStepMs;
      Status st = transport::finishConnect(pending.get(), last_step ? left : kCancelStepMs, out);
      if (st.code() == StatusCode::kTimeout && !last_step) {
        if (!cancelled(cancel)) continue;
        const int64_t waited =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
        return givenUp("could not connect to reducer " + address + " within " +
                       std::to_string(waited) + " ms");
      }
      last = st;
      break;
    }
    if (last.isOk()) return last;
    if (last.code() == StatusCode::kInvalidUsage) return last;  // a bad address: no point retrying
    if (Clock::now() >= deadline || cancelled(cancel)) break;
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::min<int64_t>(100, msLeft(deadline))));
  }
  return Status::timeout("could not connect to reducer " + address + ": " + last.toString());
}

Status ConnHeaderChannel::send(const wire::Frame& frame, Clock::time_point deadline,
                               const std::string& what) {
  std::unique_ptr<transport::Request> req;
  TALLY_RETURN_IF_ERROR(conn_->isend(frame.data(), frame.size, wire::kTagHeader, nullptr, &req));
  if (!req) return Status::internal("transport had no room for " + what);
  return waitUntil(req.get(), deadline, nullptr, "sending " + what + " timed out", cancel_);
}

Status ConnHeaderChannel::recv(Clock::time_point deadline, HeaderBuf* buf, size_t* got,
                               const std::string& what) {
  void* data = buf->data();
  size_t size = buf->size();
  int tag = wire::kTagHeader;
  transport::MemoryRegion* mr = nullptr;
  std::unique_ptr<transport::Request> req;
  TALLY_RETURN_IF_ERROR(conn_->irecv(1, &data, &size, &tag, &mr, &req));
  if (!req) return Status::internal("transport had no room for a receive");
  Status st = waitUntil(req.get(), deadline, got, what, cancel_);
  if (!st.isOk()) conn_->close();  // the pending receive must not outlive an open connection
  return st;
}

Status FdHeaderChannel::send(const wire::Frame& frame, Clock::time_point deadline,
                             const std::string& what) {
  Status st = transport::sendFrame(fd_, wire::kTagHeader, frame.data(), frame.size,
                                        msLeft(deadline), peer_);
  if (st.code() == StatusCode::kTimeout) return Status::timeout("sending " + what + " timed out");
  return st;
}

Status FdHeaderChannel::recv(Clock::time_point deadline, HeaderBuf* buf, size_t* got,
                             const std::string& what) {
  TALLY_RETURN_IF_ERROR(waitReadable(fd_, deadline, what, cancel_));
  Status st = transport::recvFrame(fd_, wire::kTagHeader, buf->data(), buf->size(), got,
                                        msLeft(deadline), peer_);
  if (st.code() == StatusCode::kTimeout) return Status::timeout(what);
  return st;
}

bool isTcpNetwork(const transport::Network* network) {
  return network == nullptr || std::string(network->name()) == "tcp";
}

Status openReducer(HeaderChannel* chan, const std::string& address, Clock::time_point deadline,
                   opening::WorkerSide* side) {
  HeaderBuf buf;
  size_t got = 0;
  TALLY_RETURN_IF_ERROR(chan->recv(deadline, &buf, &got,
                                   "reducer " + address +
                                       " sent no Challenge in time (is it a "
                                       "tally-reducer of this version?)"));
  bool send_answer = false;
  wire::Frame answer;
  std::string reject;
  Status st = side->onChallenge(buf.data(), got, &send_answer, &answer, &reject);
  if (!st.isOk()) {
    if (!reject.empty()) {
      (void)chan->send(wire::encodeReject(wire::Reason{reject}),
                       std::min(deadline, Clock::now() + std::chrono::seconds(1)), "Reject");
    }
    return st;
  }
  if (send_answer) TALLY_RETURN_IF_ERROR(chan->send(answer, deadline, "the Answer"));
  return Status::ok();
}

Status awaitProof(HeaderChannel* chan, const std::string& address, int rank,
                  Clock::time_point deadline, const opening::WorkerSide& side) {
  if (!side.expectsProof()) return Status::ok();
  HeaderBuf buf;
  size_t got = 0;
  TALLY_RETURN_IF_ERROR(
      chan->recv(deadline, &buf, &got, "reducer " + address + " sent no Proof in time"));
  wire::MsgType type;
  TALLY_RETURN_IF_ERROR(wire::peekType(buf.data(), got, &type));
  if (type == wire::MsgType::kReject || type == wire::MsgType::kError) {
    return refusal(buf, got, type, address, rank, "the job token's Answer");
  }
  return side.checkProof(buf.data(), got);
}

Status awaitReady(HeaderChannel* chan, const std::string& address, int rank,
                  Clock::time_point deadline, int* window) {
  HeaderBuf buf;
  size_t got = 0;
  TALLY_RETURN_IF_ERROR(chan->recv(
      deadline, &buf, &got, "reducer " + address + " did not report all ranks joined in time"));
  wire::MsgType type;
  TALLY_RETURN_IF_ERROR(wire::peekType(buf.data(), got, &type));
  if (type == wire::MsgType::kReady) {
    wire::Ready ready;
    TALLY_RETURN_IF_ERROR(wire::decodeReady(buf.data(), got, &ready));
    *window = static_cast<int>(ready.window);
    return Status::ok();
  }
  return refusal(buf, got, type, address, rank, "Hello");
}

}  // namespace tally::worker_client

namespace tally::worker_client {

Status joinReducer(const JoinRequest& req, std::unique_ptr<transport::Connection>* conn, Fd* fd,
                   int* window) {
  transport::ConnectionOptions options;
  if (req.raw) options.sockets = 1;
  std::unique_ptr<transport::Connection> c;
  TALLY_RETURN_IF_ERROR(
      connectReducer(req.network, req.address, req.deadline, options, &c, req.cancel));
  Fd socket;
  std::unique_ptr<HeaderChannel> chan;
  if (req.raw) socket.reset(c->takeSocket());
  if (socket.valid()) {
    c.reset();
    chan = std::make_unique<FdHeaderChannel>(socket.get(), req.address, req.cancel);
  } else {
    chan = std::make_unique<ConnHeaderChannel>(c.get(), req.cancel);
  }
  // Closes what was opened on any failure below (a Connection closes in its destructor too).
  auto fail = [&](const Status& st) {
    if (c) c->close();
    return st;
  };
  opening::WorkerSide side(req.token, req.address);
  const int rank = static_cast<int>(req.hello.rank);
  Status st = openReducer(chan.get(), req.address, req.deadline, &side);
  if (st.isOk()) st = awaitProof(chan.get(), req.address, rank, req.deadline, side);
  if (st.isOk()) {
    st = chan->send(wire::encodeHello(req.hello), req.deadline, "Hello to reducer " + req.address);
  }
  int w = static_cast<int>(req.hello.window);
  if (st.isOk()) st = awaitReady(chan.get(), req.address, rank, req.deadline, &w);
  if (!st.isOk()) return fail(st);
  chan.reset();
  *window = w;
  *conn = std::move(c);
  *fd = std::move(socket);
  return Status::ok();
}

bool acceptsConnections(const std::string& address, int timeout_ms) {
  std::string host;
  uint16_t port = 0;
  if (!splitHostPort(address, &host, &port).isOk()) return false;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  bool ok = false;
  for (addrinfo* a = found; a != nullptr && !ok; a = a->ai_next) {
    Fd s(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!s.valid()) continue;
    if (::connect(s.get(), a->ai_addr, a->ai_addrlen) == 0) {
      ok = true;
      break;
    }
    if (errno != EINPROGRESS) continue;
    pollfd p{s.get(), POLLOUT, 0};
    if (::poll(&p, 1, timeout_ms) != 1) continue;
    int err = 0;
    socklen_t len = sizeof(err);
    ok = ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
  }
  ::freeaddrinfo(found);
  return ok;
}

}  // namespace tally::worker_client
