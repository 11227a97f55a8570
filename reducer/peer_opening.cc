// SPDX-License-Identifier: Apache-2.0
// The reducer's side of a connection's opening (protocol/opening.h, docs/security.md): the
// Challenge, and with a job token the worker's Answer, checked before any Hello is parsed or any
// communicator state exists for the connection.
#include <array>
#include <chrono>

#include "common/log.h"
#include "protocol/opening.h"
#include "reducer/server_internal.h"
#include "reducer/session.h"

namespace tally::reducer::server {
namespace wire = protocol::wire;
namespace opening = protocol::opening;

Status Peer::greet(bool* end) {
  *end = false;
  opening::ReducerSide side;
  TALLY_RETURN_IF_ERROR(opening::ReducerSide::start(&ctx_->options.job_token, &side));
  OutMsg challenge;
  challenge.header = side.challenge();
  send(std::move(challenge));
  if (!side.authRequired()) return Status::ok();  // the main loop reads the Hello

  std::array<uint8_t, wire::kMaxHeaderBytes> header;
  size_t got = 0;
  answering_ = true;  // recvOne holds it to auth_timeout_ms
  Status received = recvOne(header.data(), header.size(), wire::kTagHeader, &got);
  answering_ = false;
  TALLY_RETURN_IF_ERROR(received);
  wire::MsgType type;
  if (wire::peekType(header.data(), got, &type).isOk() && type == wire::MsgType::kReject) {
    refusedInOpening(type, header.data(), got);
    *end = true;
    return Status::ok();
  }
  OutMsg reply;
  Status st = side.checkAnswer(header.data(), got, &reply.header);
  if (!st.isOk()) {
    TALLY_WARN_LIMITED(ctx_->warnings.rejected, "reducer: refusing peer %s: %s", name_.c_str(),
                       st.message().c_str());
    ctx_->observer->error(ServerError::kAuth);
    counted_ = true;
    reply.header = wire::encodeReject(wire::Reason{st.message()});
    send(std::move(reply));
    lingerAfterRefusal();
    *end = true;  // the writer has sent the Reject, or sends it before it closes
    return Status::ok();
  }
  TALLY_INFO(log::kNet, "reducer: peer %s proved the job token", name_.c_str());
  send(std::move(reply));
  return Status::ok();
}

void Peer::refusedInOpening(wire::MsgType type, const uint8_t* data, size_t size) {
  counted_ = true;
  OutMsg reject;
  server::refusedInOpening(ctx_, name_, type, data, size, &reject.header);
  if (reject.header.size == 0) return;
  send(std::move(reject));
  lingerAfterRefusal();
}

void Peer::lingerAfterRefusal() {
  // Closing at once could beat the Reject to the worker: its transport may see this side's
  // close on one stream before the Reject on another, and then it reports a lost connection
  // instead of the reason. The worker closes as soon as it has the Reject.
  constexpr auto kLinger = std::chrono::seconds(2);
  constexpr int64_t kStepMs = 50;
  const auto deadline = std::chrono::steady_clock::now() + kLinger;
  std::array<uint8_t, wire::kMaxHeaderBytes> sink;
  std::unique_ptr<transport::Request> req;
  while (std::chrono::steady_clock::now() < deadline && !aborted_.load() &&
         !ctx_->stopping.load()) {
    if (!req) {
      void* data = sink.data();
      size_t size = sink.size();
      int tag = wire::kTagHeader;
      transport::MemoryRegion* mr = nullptr;
      if (!conn_->irecv(1, &data, &size, &tag, &mr, &req).isOk() || !req) break;
    }
    Status st = req->wait(kStepMs, nullptr);
    if (st.isOk()) {
      req.reset();  // the worker sent more before it read the Reject: drop it
    } else if (st.code() != StatusCode::kTimeout) {
      break;  // the worker closed: the Reject is in
    }
  }
  conn_->close();  // the pending receive must not outlive an open connection
}

}  // namespace tally::reducer::server
