#include "worker_client/coll_connect.h"

#include <algorithm>
#include <thread>

#include "transport/raw_stream.h"

namespace tally::worker_client {
namespace wire = protocol::wire;
namespace opening = protocol::opening;

namespace {

constexpr int64_t kConnectGraceMs = 250;

// Waits for `req` until the deadline.
Status waitUntil(transport::Request* req, Clock::time_point deadline, size_t* sizes,
                 const std::string& what) {
  Status st = req->wait(msLeft(deadline), sizes);
  if (st.code() == StatusCode::kTimeout) return Status::timeout(what);
  return st;
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
                      std::unique_ptr<transport::Connection>* out) {
  std::shared_ptr<transport::Network> fallback;
  if (network == nullptr) {
    // Given none: the network layer's default (TCP), its own connect bounded by the deadline.
    transport::NetworkConfig config;
    config.timeouts.connect_ms = std::max<int64_t>(1, msLeft(deadline));
    TALLY_RETURN_IF_ERROR(transport::openDefaultNetwork(config, &fallback));
    network = fallback.get();
  }
  Status last;
  for (;;) {
    // finishConnect bounds the network's own connect timeout by the deadline, plus a little: the
    // plugin sets both from TALLY_CONNECT_TIMEOUT_MS, and when they end together the network's
    // error says why (refused, unreachable) where ours would only say "timeout".
    std::unique_ptr<transport::PendingConnection> pending;
    last = network->connectTo(address, options, &pending);
    if (last.isOk()) {
      last = transport::finishConnect(pending.get(), msLeft(deadline) + kConnectGraceMs, out);
    }
    if (last.isOk()) return last;
    if (last.code() == StatusCode::kInvalidUsage) return last;  // a bad address: no point retrying
    if (Clock::now() >= deadline) break;
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
  return waitUntil(req.get(), deadline, nullptr, "sending " + what + " timed out");
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
  Status st = waitUntil(req.get(), deadline, got, what);
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
