// SPDX-License-Identifier: Apache-2.0
// The protocol steps both kinds of link share (link_session.h).
#include "worker_client/link_session.h"

#include <cstdio>

namespace tally::worker_client {

Status acceptResult(SliceLedger* ledger, const std::string& reducer, const uint8_t* data,
                    size_t size, wire::SliceHeader* h, LedgerEntry** entry) {
  TALLY_RETURN_IF_ERROR(wire::decodeResult(data, size, h));
  // A Commit carried along: for results before this one.
  if (h->ack.calls != 0 || h->ack.recovery_epoch != 0) {
    TALLY_RETURN_IF_ERROR(ledger->commit(h->ack, reducer));
  }
  LedgerEntry* e = ledger->find(h->seq, h->slice);
  if (e == nullptr || e->landed) {
    return Status::remote("unexpected result for " + wire::describeSlice(*h));
  }
  *entry = e;
  return Status::ok();
}

Status checkResult(const wire::SliceHeader& h, const LedgerEntry& entry, bool sent) {
  if (!sent) {
    return Status::remote("result for " + wire::describeSlice(h) + " before the slice was sent");
  }
  const SliceTask& task = entry.task;
  const Call& call = *task.call;
  if (h.offset != task.recv.offset || h.count != task.recv.count || h.total_count != call.count ||
      h.type != call.type || h.op != call.op || h.kind != call.kind ||
      h.rank_count != call.rank_count || h.window_offset != call.window_offset) {
    return Status::remote("result " + wire::describeSlice(h) + " does not match the slice sent");
  }
  return Status::ok();
}

uint8_t* resultDestination(const wire::SliceHeader& h, const LedgerEntry& entry,
                           std::vector<uint8_t>* scratch) {
  const size_t bytes = h.payloadBytes();
  if (bytes == 0) return nullptr;
  const SliceTask& task = entry.task;
  if (task.drop_result) {
    // Sent again after its call was done (an early call): read, checked, dropped.
    if (scratch->size() < bytes) scratch->resize(bytes);
    return scratch->data();
  }
  const Call& call = *task.call;
  return call.recv + (task.recv.offset - call.recv_origin) * dataTypeSize(call.type);
}

Status checkPayloadFrame(const wire::SliceHeader& h, int tag, size_t size) {
  const size_t bytes = h.payloadBytes();
  if (tag == wire::kTagPayload && size == bytes) return Status::ok();
  return Status::remote("result payload of " + std::to_string(size) + " bytes with tag " +
                        std::to_string(tag) + " for " + wire::describeSlice(h) + ", expected " +
                        std::to_string(bytes));
}

Status checkPayload(const crc32c::Crc32c* crc, int rank, const wire::SliceHeader& h,
                    const void* data, bool* fatal) {
  const size_t bytes = h.payloadBytes();
  if (crc == nullptr || bytes == 0) return Status::ok();
  const uint32_t sum = crc->compute(data, bytes);
  if (sum == h.crc) return Status::ok();
  char sums[64];
  std::snprintf(sums, sizeof(sums), "CRC32C %08x, header says %08x", sum, h.crc);
  *fatal = true;
  return Status::remote("checksum mismatch: rank " + std::to_string(rank) + " got the result of " +
                        wire::describeSlice(h) + " with payload " + sums +
                        "; corrupted in transit");
}

Status onLinkMessage(SliceLedger* ledger, LinkOwner* owner, uint32_t slot,
                     const std::string& reducer, wire::MsgType type, const uint8_t* data,
                     size_t size, bool* fatal) {
  switch (type) {
    case wire::MsgType::kCommit: {
      wire::AckPoint p;
      TALLY_RETURN_IF_ERROR(wire::decodeCommit(data, size, &p));
      return ledger->commit(p, reducer);
    }
    case wire::MsgType::kPong: {
      wire::Ping pong;
      return wire::decodePong(data, size, &pong);
    }
    case wire::MsgType::kRelay: {
      wire::Relay relay;
      TALLY_RETURN_IF_ERROR(wire::decodeRelay(data, size, &relay));
      owner->relayed(slot, relay);  // queued for the keeper: takes no lock of a link
      return Status::ok();
    }
    case wire::MsgType::kError: {
      wire::Reason reason;
      wire::ErrorScope scope = wire::ErrorScope::kCommunicator;
      TALLY_RETURN_IF_ERROR(wire::decodeError(data, size, &reason, &scope));
      *fatal = scope == wire::ErrorScope::kCommunicator;
      return Status::remote(reason.text);
    }
    default:
      return Status::remote(std::string("unexpected ") + wire::msgTypeName(type) + " message");
  }
}

std::optional<wire::AckPoint> dueAck(SliceLedger* ledger, const Shared& shared, bool alone) {
  return ledger->nextAck(shared.posted_through.load(std::memory_order_acquire),
                         shared.applied_epoch.load(std::memory_order_acquire), alone);
}

void reportLinkFailure(LinkOwner* owner, uint32_t slot, const std::string& reducer,
                       const Status& st, bool fatal) {
  if (owner->closing()) return;
  const Status why(st.code() == StatusCode::kTimeout ? StatusCode::kTimeout : StatusCode::kRemote,
                   "reducer " + reducer + ": " + st.message());
  if (fatal) {
    owner->fail(why);
  } else {
    owner->linkLost(slot, why);
  }
}

const wire::Frame* LastMessage::make(Kind kind, const std::string& reason) {
  if (made_) return nullptr;
  made_ = true;
  frame_ = kind == Kind::kAbort ? wire::encodeError(wire::Reason{reason})
                                : wire::encodeDismiss(wire::Reason{reason});
  return &frame_;
}

}  // namespace tally::worker_client
