// SPDX-License-Identifier: Apache-2.0
#include "session_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <chrono>
#include <string>
#include <vector>

#include "common/strings.h"
#include "protocol/opening.h"
#include "protocol/slicing.h"
#include "protocol/wire.h"
#include "transport/network.h"

namespace tally::fuzz::session {
namespace {

namespace wire = protocol::wire;
namespace opening = protocol::opening;
constexpr int64_t kStepMs = 5000;  // health check: each step's deadline

// Receives the next header message on `c`, which must be of type `want`, into *buf.
Status expectMessage(Client& c, wire::MsgType want, std::array<uint8_t, wire::kMaxHeaderBytes>* buf,
                     size_t* got) {
  TALLY_RETURN_IF_ERROR(c.recv(buf->data(), buf->size(), wire::kTagHeader, kStepMs, got));
  wire::MsgType type;
  TALLY_RETURN_IF_ERROR(wire::peekType(buf->data(), *got, &type));
  if (type != want) {
    return Status::internal(std::string("got ") + wire::msgTypeName(type) + " instead of " +
                            wire::msgTypeName(want));
  }
  return Status::ok();
}

// The failover messages of two members after their first call: both Ack it and get the
// Commit, rank 1's Ping gets its Pong, and rank 0's Relay reaches rank 1 stamped as rank 0's.
Status failoverCheck(std::array<Client, 2>& clients) {
  std::array<uint8_t, wire::kMaxHeaderBytes> buf;
  size_t got = 0;
  const wire::AckPoint point{1, 0};
  const wire::Frame ack = wire::encodeAck(point);
  for (auto& c : clients) {
    TALLY_RETURN_IF_ERROR(c.send(ack.data(), ack.size, wire::kTagHeader, kStepMs));
  }
  for (auto& c : clients) {
    TALLY_RETURN_IF_ERROR(expectMessage(c, wire::MsgType::kCommit, &buf, &got));
    wire::AckPoint commit;
    TALLY_RETURN_IF_ERROR(wire::decodeCommit(buf.data(), got, &commit));
    if (!(commit == point)) return Status::internal("Commit of another point");
  }
  constexpr uint64_t kToken = 0x70696e67;
  const wire::Frame ping = wire::encodePing(wire::Ping{kToken});
  TALLY_RETURN_IF_ERROR(clients[1].send(ping.data(), ping.size, wire::kTagHeader, kStepMs));
  TALLY_RETURN_IF_ERROR(expectMessage(clients[1], wire::MsgType::kPong, &buf, &got));
  wire::Ping pong;
  TALLY_RETURN_IF_ERROR(wire::decodePong(buf.data(), got, &pong));
  if (pong.token != kToken) return Status::internal("Pong with another token");
  wire::Relay relay;
  relay.from = 5;  // the reducer writes the sender's rank over it
  relay.control.kind = wire::ControlKind::kPropose;
  relay.control.epoch = 1;
  const wire::Frame rf = wire::encodeRelay(relay);
  TALLY_RETURN_IF_ERROR(clients[0].send(rf.data(), rf.size, wire::kTagHeader, kStepMs));
  TALLY_RETURN_IF_ERROR(expectMessage(clients[1], wire::MsgType::kRelay, &buf, &got));
  wire::Relay back;
  TALLY_RETURN_IF_ERROR(wire::decodeRelay(buf.data(), got, &back));
  if (back.from != 0 || !(back.control == relay.control)) {
    return Status::internal("Relay not as rank 0 sent it");
  }
  return Status::ok();
}

}  // namespace

Status Client::connect(const std::string& address) {
  transport::NetworkConfig net;
  net.tcp.sockets = 1;
  net.timeouts.connect_ms = kStepMs;
  Status st = transport::connectDefault(address, net, transport::ConnectionOptions{}, &conn_);
  if (!st.isOk()) dead_ = true;
  return st;
}

void Client::close() {
  if (conn_) conn_->close();
  dead_ = true;
}

Status Client::finish(transport::Request* req, int64_t timeout_ms, size_t* got) {
  size_t sizes[1] = {0};
  Status st = req->wait(timeout_ms, sizes);
  if (!st.isOk()) {
    close();  // the request (and its buffer) may be dropped only once the connection is closed
    return st;
  }
  if (got != nullptr) *got = sizes[0];
  return Status::ok();
}

Status Client::send(const void* data, size_t size, int tag, int64_t timeout_ms) {
  if (!connected()) return Status::remote("fuzz client: not connected");
  std::unique_ptr<transport::Request> req;
  Status st = conn_->isend(data, size, tag, nullptr, &req);
  if (st.isOk() && !req) st = Status::internal("fuzz client: no room to send");
  if (!st.isOk()) {
    close();
    return st;
  }
  return finish(req.get(), timeout_ms, nullptr);
}

Status Client::recv(void* data, size_t capacity, int tag, int64_t timeout_ms, size_t* got) {
  if (!connected()) return Status::remote("fuzz client: not connected");
  std::unique_ptr<transport::Request> req;
  transport::MemoryRegion* mr = nullptr;
  Status st = conn_->irecv(1, &data, &capacity, &tag, &mr, &req);
  if (st.isOk() && !req) st = Status::internal("fuzz client: no room to receive");
  if (!st.isOk()) {
    close();
    return st;
  }
  return finish(req.get(), timeout_ms, got);
}

void sendRaw(const std::string& address, const uint8_t* data, size_t size) {
  std::string host;
  uint16_t port = 0;
  if (!splitHostPort(address, &host, &port).isOk()) return;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return;
  sockaddr_storage addr{};
  const socklen_t addr_length = found->ai_addrlen;
  std::memcpy(&addr, found->ai_addr, found->ai_addrlen);
  const int family = found->ai_family;
  ::freeaddrinfo(found);
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  timeval send_timeout{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), addr_length) == 0) {
    size_t sent = 0;
    while (sent < size) {
      ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
    // Take what the reducer answers (a Reject, an Error) until it closes or goes quiet.
    std::array<uint8_t, 4096> sink;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) break;
      if (::recv(fd, sink.data(), sink.size(), MSG_DONTWAIT) <= 0) break;
    }
  }
  ::close(fd);
}

Status healthCheck(const std::string& address, const auth::JobToken& token, uint64_t comm_hi,
                   uint64_t comm_lo) {
  constexpr uint64_t kCount = 20000;
  constexpr uint64_t kSliceBytes = 64 * 1024;
  std::array<Client, 2> clients;
  std::array<std::vector<float>, 2> input;
  for (uint64_t i = 0; i < kCount; ++i) {
    input[0].push_back(static_cast<float>(i % 7));
    input[1].push_back(static_cast<float>(2 * (i % 5)) + 0.5f);
  }
  auto fail = [](const std::string& step, const Status& st) {
    return Status::internal("health check: " + step + ": " + st.toString());
  };
  std::array<uint8_t, wire::kMaxHeaderBytes> buf;
  std::vector<opening::WorkerSide> sides(2, opening::WorkerSide(&token, address));
  for (int r = 0; r < 2; ++r) {
    Status st = clients[r].connect(address);
    if (!st.isOk()) return fail("connect", st);
    size_t got = 0;
    st = clients[r].recv(buf.data(), buf.size(), wire::kTagHeader, kStepMs, &got);
    bool send_answer = false;
    wire::Frame answer;
    std::string reject;
    if (st.isOk()) st = sides[r].onChallenge(buf.data(), got, &send_answer, &answer, &reject);
    if (st.isOk() && send_answer) {
      st = clients[r].send(answer.data(), answer.size, wire::kTagHeader, kStepMs);
    }
    if (!st.isOk()) return fail("opening", st);
    wire::Hello hello;
    hello.comm = {comm_hi, comm_lo};
    hello.rank = static_cast<uint32_t>(r);
    hello.nranks = 2;
    hello.reducer_index = 0;
    hello.nreducers = 1;
    hello.slice_bytes = kSliceBytes;
    hello.window = 4;
    wire::Frame f = wire::encodeHello(hello);
    st = clients[r].send(f.data(), f.size, wire::kTagHeader, kStepMs);
    if (!st.isOk()) return fail("send Hello", st);
  }
  for (int r = 0; r < 2; ++r) {
    size_t got = 0;
    Status st;
    if (sides[r].expectsProof()) {
      st = clients[r].recv(buf.data(), buf.size(), wire::kTagHeader, kStepMs, &got);
      if (st.isOk()) st = sides[r].checkProof(buf.data(), got);
      if (!st.isOk()) return fail("Proof", st);
    }
    st = clients[r].recv(buf.data(), buf.size(), wire::kTagHeader, kStepMs, &got);
    wire::Ready ready;
    if (st.isOk()) st = wire::decodeReady(buf.data(), got, &ready);
    if (!st.isOk()) return fail("Ready", st);
  }
  // The call is cut the way workers cut it; a few slices, all within the window of 4.
  const uint64_t per = protocol::sliceElements(kCount, sizeof(float), kSliceBytes, 1);
  const uint64_t nslices = (kCount + per - 1) / per;
  if (nslices > 4) return Status::internal("health check: too many slices for the window");
  for (uint64_t s = 0; s < nslices; ++s) {
    wire::SliceHeader h;
    h.seq = 0;
    h.slice = static_cast<uint32_t>(s);
    h.offset = s * per;
    h.count = std::min(per, kCount - h.offset);
    h.total_count = kCount;
    h.type = DataType::kFloat32;
    h.op = ReduceOp::kSum;
    wire::Frame f = wire::encodeSlice(h);
    for (int r = 0; r < 2; ++r) {
      Status st = clients[r].send(f.data(), f.size, wire::kTagHeader, kStepMs);
      if (st.isOk()) {
        st = clients[r].send(input[r].data() + h.offset, h.payloadBytes(), wire::kTagPayload,
                             kStepMs);
      }
      if (!st.isOk()) return fail("send slice " + std::to_string(s), st);
    }
  }
  for (int r = 0; r < 2; ++r) {
    std::vector<float> result(kCount, -1.0f);
    for (uint64_t s = 0; s < nslices; ++s) {
      size_t got = 0;
      Status st = clients[r].recv(buf.data(), buf.size(), wire::kTagHeader, kStepMs, &got);
      wire::SliceHeader h;
      if (st.isOk()) st = wire::decodeResult(buf.data(), got, &h);
      if (!st.isOk()) return fail("result header", st);
      if (h.total_count != kCount || h.type != DataType::kFloat32) {
        return fail("result header", Status::internal(wire::describeSlice(h)));
      }
      st = clients[r].recv(result.data() + h.offset, h.payloadBytes(), wire::kTagPayload, kStepMs,
                           &got);
      if (st.isOk() && got != h.payloadBytes()) st = Status::internal("short result payload");
      if (!st.isOk()) return fail("result payload", st);
    }
    for (uint64_t i = 0; i < kCount; ++i) {
      if (result[i] != input[0][i] + input[1][i]) {
        return Status::internal("health check: rank " + std::to_string(r) + " element " +
                                std::to_string(i) + " is " + std::to_string(result[i]) +
                                ", expected " + std::to_string(input[0][i] + input[1][i]));
      }
    }
  }
  Status st = failoverCheck(clients);
  if (!st.isOk()) return fail("failover messages", st);
  // The reducer closes a connection as soon as it reads Bye, and the transport may report that
  // close as the send's result: Bye cannot fail the check.
  const wire::Frame bye = wire::encodeBye();
  for (auto& c : clients) {
    (void)c.send(bye.data(), bye.size, wire::kTagHeader, kStepMs);
    c.close();
  }
  return Status::ok();
}

}  // namespace tally::fuzz::session
