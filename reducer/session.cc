// SPDX-License-Identifier: Apache-2.0
#include "reducer/session.h"

#include <cctype>
#include <cstdio>

#include "common/crc32c.h"
#include "common/log.h"
#include "protocol/opening.h"
#include "transport/transport.h"

namespace tally::reducer::server {
namespace wire = protocol::wire;
namespace opening = protocol::opening;

namespace {

// Text from a peer, fit for one log line.
std::string printable(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
  }
  return out;
}

}  // namespace

Status acceptHello(ServerContext* ctx, const std::shared_ptr<Member>& self, const uint8_t* data,
                   size_t size, std::shared_ptr<Communicator>* comm, int* rank,
                   wire::Frame* reject) {
  wire::Hello hello;
  Status st = wire::decodeHello(data, size, &hello);
  if (st.isOk() && hello.checksum) {
    Status why;
    if (crc32c::shared(&why) == nullptr) {
      st = Status::invalidUsage("this reducer cannot check TALLY_CHECKSUM=1: " + why.message());
    }
  }
  bool over_limit = false;
  if (st.isOk()) st = ctx->registry->join(self, hello, comm, &over_limit);
  if (!st.isOk()) {
    TALLY_WARN_LIMITED(ctx->warnings.rejected, "reducer: rejecting peer %s: %s",
                       self->name().c_str(), st.message().c_str());
    ctx->observer->error(over_limit ? ServerError::kLimit : ServerError::kRejectedHello);
    *reject = wire::encodeReject(wire::Reason{st.message()});
    comm->reset();
    return Status::ok();
  }
  *rank = static_cast<int>(hello.rank);
  TALLY_INFO(log::kColl, "reducer: peer %s joined communicator %s as rank %u of %u",
             self->name().c_str(), hello.comm.toString().c_str(), hello.rank, hello.nranks);
  return Status::ok();
}

Status acceptSliceHeader(Communicator& comm, int rank, const uint8_t* data, size_t size,
                         wire::SliceHeader* h, size_t* bytes) {
  Status st = wire::decodeSlice(data, size, h);
  if (!st.isOk()) {
    // Every member hears why, this one too (its Error is flushed before the close).
    st = Status::remote("rank " + std::to_string(rank) +
                        " sent a slice header that does not decode: " + st.message());
    comm.fail(st.message());
    return st;
  }
  st = comm.checkSlice(*h, rank);
  if (!st.isOk()) {
    comm.fail(st.message());
    return st;
  }
  // From here the slice is on its way to the engine, which completes it (or the communicator
  // fails): counted first, so that a Commit its Ack below brings goes with its result.
  comm.inputFiled(rank);
  // The sender's Ack, carried along (wire.h SliceHeader::ack): taken like an Ack message.
  if (h->ack.calls != 0 || h->ack.recovery_epoch != 0) {
    st = comm.ack(rank, h->ack);
    if (!st.isOk()) {
      comm.fail(st.message());
      return st;
    }
  }
  *bytes = h->payloadBytes();
  return Status::ok();
}

bool payloadIntact(ServerContext* ctx, Communicator& comm, int rank, const std::string& name,
                   const wire::SliceHeader& h, const uint8_t* data, size_t bytes, bool* counted) {
  if (!comm.checksum || bytes == 0) return true;
  // The library loaded when the Hello was admitted.
  const uint32_t crc = crc32c::shared(nullptr)->compute(data, bytes);
  if (crc == h.crc) return true;
  if (comm.failed()) return false;  // dropped, as the engine would
  char sums[64];
  std::snprintf(sums, sizeof(sums), "CRC32C %08x, header says %08x", crc, h.crc);
  const std::string why = "checksum mismatch: rank " + std::to_string(rank) + " (peer " + name +
                          ") sent " + wire::describeSlice(h) + " with payload " + sums +
                          "; corrupted in transit";
  ctx->observer->error(ServerError::kChecksum);
  *counted = true;
  // Every member gets the Error (logged there). The connection stays open until the worker,
  // having read it, closes.
  comm.fail(why);
  return false;
}

void refusedInOpening(ServerContext* ctx, const std::string& name, wire::MsgType type,
                      const uint8_t* data, size_t size, wire::Frame* reject) {
  ctx->observer->error(ServerError::kAuth);
  if (type == wire::MsgType::kReject) {
    wire::Reason reason;
    Status st = wire::decodeReject(data, size, &reason);
    TALLY_WARN_LIMITED(ctx->warnings.rejected, "reducer: peer %s refused this reducer: %s",
                       name.c_str(),
                       st.isOk() ? printable(reason.text).c_str() : st.message().c_str());
    return;
  }
  const Status why = opening::unexpectedAnswer();
  TALLY_WARN_LIMITED(ctx->warnings.rejected, "reducer: refusing peer %s: %s", name.c_str(),
                     why.message().c_str());
  *reject = wire::encodeReject(wire::Reason{why.message()});
}

namespace {

Status evicted(ServerContext* ctx, const std::string& name,
               std::chrono::steady_clock::time_point opened, const OpeningBudget::Slot* slot,
               std::chrono::steady_clock::time_point now) {
  if (slot == nullptr || !slot->evicted()) return Status::ok();
  ctx->observer->error(ServerError::kLimit);
  const auto held = std::chrono::duration_cast<std::chrono::milliseconds>(now - opened);
  return Status::system("peer " + name + " was evicted after " + std::to_string(held.count()) +
                        " ms without joining: " + std::to_string(ctx->openings.limit()) +
                        " newer connections have not joined either (the opening budget, "
                        "--max-opening-connections)");
}

}  // namespace

Status openingDeadline(ServerContext* ctx, const std::string& name,
                       std::chrono::steady_clock::time_point opened, bool answering,
                       const OpeningBudget::Slot* slot, std::chrono::steady_clock::time_point now) {
  if (Status st = evicted(ctx, name, opened, slot, now); !st.isOk()) return st;
  const int64_t auth_ms = ctx->options.auth_timeout_ms;
  const int64_t join_ms = ctx->options.join_timeout_ms;
  std::string why;
  if (answering && auth_ms > 0 && now - opened > std::chrono::milliseconds(auth_ms)) {
    why = "did not answer the job token's Challenge within " + std::to_string(auth_ms);
  } else if (join_ms > 0 && now - opened > std::chrono::milliseconds(join_ms)) {
    why = "did not join a communicator within " + std::to_string(join_ms);
  } else {
    return Status::ok();
  }
  ctx->observer->error(ServerError::kTimeout);
  return Status::timeout("peer " + name + " " + why + " ms of connecting");
}

Status memberDeadline(ServerContext* ctx, Communicator& comm,
                      std::chrono::steady_clock::time_point now, bool* failed) {
  // A failed communicator's members are let go once its Error is in their queues.
  *failed = comm.failureSent();
  if (comm.failed() || comm.formed()) return Status::ok();
  const int64_t limit = ctx->options.join_timeout_ms;
  if (limit <= 0 || now - comm.created <= std::chrono::milliseconds(limit)) return Status::ok();
  ctx->observer->error(ServerError::kTimeout);
  return Status::timeout("communicator " + comm.describe() + " did not form within " +
                         std::to_string(limit) + " ms of its first Hello (" + comm.joinedText() +
                         ")");
}

void endOfEvicted(ServerContext* ctx, const std::string& name,
                  std::chrono::steady_clock::time_point opened, const OpeningBudget::Slot* slot,
                  Ending* e) {
  if (e->counted || e->graceful) return;
  Status st = evicted(ctx, name, opened, slot, std::chrono::steady_clock::now());
  if (st.isOk()) return;
  e->status = std::move(st);
  e->counted = true;
}

Queueing admitToQueue(const ServerContext& ctx, const OutMsg& msg, size_t unsent,
                      bool pong_unsent) {
  if (msg.releases_credit) return Queueing::kQueue;  // a result: the window bounds those
  if (msg.pong && pong_unsent) return Queueing::kAnswered;
  if (unsent >= unsentControlLimit(ctx.options.window)) return Queueing::kOverflow;
  return Queueing::kQueue;
}

Status controlOverflow(ServerContext* ctx, const std::string& name, size_t unsent) {
  ctx->observer->error(ServerError::kLimit);
  return Status::remote("peer " + name + " left " + std::to_string(unsent) +
                        " control messages (Commits, Pongs, Relays) unread, the most one " +
                        "connection may: it does not read what it is sent");
}

ServerError causeOf(const Ending& e) {
  if (e.internal) return ServerError::kInternal;
  if (e.worker_aborted) return ServerError::kPeerLost;
  switch (transport::failureKind(e.status)) {
    case transport::FailureKind::kTimedOut:
      return ServerError::kTimeout;
    case transport::FailureKind::kProtocol:
      return ServerError::kProtocol;
    case transport::FailureKind::kLost:
      break;
  }
  return e.recv_failed ? ServerError::kPeerLost : ServerError::kProtocol;
}

std::string describeEnd(const Status& st) {
  // "protocol violation: peer ... sent garbage ...", whatever code the transport gave it (a
  // message too large for its receive is kInternal there, the peer's fault here).
  if (transport::failureKind(st) == transport::FailureKind::kProtocol) return st.message();
  return st.toString();
}

namespace {

// A Dismiss is one step of a failover the workers run (docs/failover.md), which drops this
// reducer from one communicator: no error of the connection, so tally_reducer_errors_total does
// not count it (an alert on errors would otherwise fire for every reducer a job lets go);
// tally_reducer_communicator_failures_total still does.
void reportDismissal(ServerContext* ctx, const std::shared_ptr<Communicator>& comm, int rank,
                     const std::string& name, const Ending& e) {
  const std::string why = "rank " + std::to_string(rank) + " (peer " + name +
                          ") dismissed this reducer: " + printable(e.status.message());
  // The WARN line is fail()'s; a communicator that failed before only loses a member.
  if (!comm->fail(why, wire::ErrorScope::kReducer)) {
    TALLY_INFO(log::kColl, "reducer: %s left communicator %s (it dismissed this reducer: %s)",
               name.c_str(), comm->id.toString().c_str(), printable(e.status.message()).c_str());
  }
  ctx->registry->leave(comm, rank, false, why, wire::ErrorScope::kReducer);
}

}  // namespace

void reportEnd(ServerContext* ctx, const std::shared_ptr<Communicator>& comm, int rank,
               const std::string& name, const Ending& e, bool stopping) {
  if (comm && !stopping && e.dismissed) return reportDismissal(ctx, comm, rank, name, e);
  if (!e.graceful && !e.dismissed && !stopping && !e.counted) ctx->observer->error(causeOf(e));
  if (comm && !stopping) {
    // After a Bye, the reason a call that still needs this rank fails with (leave()).
    const std::string why = "rank " + std::to_string(rank) + " (peer " + name + ") " +
                            (e.graceful ? "closed its communicator while the others' calls need it"
                             : e.status.isOk()  ? "left"
                             : e.worker_aborted ? "gave up: " + e.status.message()
                             : e.recv_failed    ? "was lost: " + describeEnd(e.status)
                                                : "was dropped: " + describeEnd(e.status));
    // Lost without a word: the link may be what failed, not the worker, so only this reducer
    // is out of the communicator; the workers fail over (and a lost worker still fails it, as
    // every reducer says the same). A worker that gave up, or broke the protocol, fails it.
    const bool lost = e.recv_failed && !e.worker_aborted && !e.internal &&
                      transport::failureKind(e.status) != transport::FailureKind::kProtocol;
    if (!e.graceful && !e.recv_failed && !e.internal) {
      // This side dropped a member that can still read (it broke the protocol, or stalled):
      // fail the communicator before it leaves, so that it gets the Error with the reason too.
      comm->fail(why);
    }
    if (e.graceful) {
      TALLY_INFO(log::kColl, "reducer: %s left communicator %s", name.c_str(),
                 comm->id.toString().c_str());
    } else if (e.worker_aborted) {
      TALLY_WARN("reducer: peer %s (rank %d of communicator %s) gave up: %s", name.c_str(), rank,
                 comm->id.toString().c_str(), e.status.message().c_str());
    } else {
      TALLY_WARN("reducer: peer %s (rank %d of communicator %s) lost: %s", name.c_str(), rank,
                 comm->id.toString().c_str(), describeEnd(e.status).c_str());
    }
    ctx->registry->leave(comm, rank, e.graceful, why,
                         lost ? wire::ErrorScope::kReducer : wire::ErrorScope::kCommunicator);
  } else if (!e.graceful && !stopping) {
    TALLY_WARN_LIMITED(ctx->warnings.dropped, "reducer: peer %s closed before joining: %s",
                       name.c_str(), describeEnd(e.status).c_str());
  }
}

}  // namespace tally::reducer::server
