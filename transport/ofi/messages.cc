// SPDX-License-Identifier: Apache-2.0
// The ofi connection's messages: how a send becomes a control message and payload chunks, and
// how the receiving helper reads headers in order and matches them to posted receives (wire.h
// has the bytes, core.h the threads). Runs on the helper thread only.
#include <algorithm>
#include <cstring>

#include "transport/ofi/core.h"

namespace tally::transport::ofi {

void Core::queueFlush(const std::shared_ptr<Op>& op) {
  op->outstanding = static_cast<uint64_t>(op->n);
  for (int i = 0; i < op->n; ++i) to_post_.push_back(&op->chunks[0][i]);
}

void Core::queueSend(const std::shared_ptr<Op>& op) {
  if (free_send_slots_.empty()) {
    // submit() caps sends in flight at max_requests, the number of slots.
    return fail(Status::internal("ofi connection to peer " + peer_ + ": no send slot"));
  }
  const uint32_t slot = free_send_slots_.back();
  free_send_slots_.pop_back();
  op->control_slot = static_cast<int>(slot);
  uint8_t* buffer = send_arena_.get() + slot * params_.slot_bytes;
  const bool inline_payload = op->size <= params_.inline_bytes;
  const uint64_t chunks = inline_payload ? 0 : chunkCount(op->size, params_.chunk_bytes);
  Header header;
  header.tag = op->tag;
  header.size = op->size;
  header.flags = inline_payload ? kInline : 0;
  header.chunks = static_cast<uint32_t>(chunks);
  encodeHeader(header, buffer);
  if (inline_payload && op->size > 0) std::memcpy(buffer + kHeaderBytes, op->send_data, op->size);

  Piece& control = send_pieces_[slot];
  control = Piece{};
  control.kind = Piece::kControlSend;
  control.op = op.get();
  control.slot = slot;
  control.buffer = buffer;
  control.length = kHeaderBytes + (inline_payload ? op->size : 0);
  control.desc = send_arena_desc_;
  control.tag = controlTag(op->seq);
  to_post_.push_back(&control);
  op->outstanding = 1 + chunks;
  if (chunks == 0) return;
  op->chunks[0] = std::make_unique<Piece[]>(chunks);
  for (uint64_t c = 0; c < chunks; ++c) {
    Piece& piece = op->chunks[0][c];
    const uint64_t offset = c * params_.chunk_bytes;
    piece.kind = Piece::kChunkSend;
    piece.op = op.get();
    piece.buffer = const_cast<uint8_t*>(op->send_data) + offset;
    piece.length = std::min<uint64_t>(params_.chunk_bytes, op->size - offset);
    piece.desc = op->desc[0];
    piece.tag = chunkTag(op->seq, c);
    to_post_.push_back(&piece);
  }
}

void Core::postControlRecv(uint64_t seq) {
  const auto slot = static_cast<uint32_t>(seq % control_slots_);
  Piece& piece = recv_pieces_[slot];
  piece = Piece{};
  piece.kind = Piece::kControlRecv;
  piece.slot = slot;
  piece.buffer = recv_arena_.get() + slot * params_.slot_bytes;
  piece.length = params_.slot_bytes;
  piece.desc = recv_arena_desc_;
  piece.tag = controlTag(seq);
  to_post_.push_back(&piece);
}

bool Core::processHeaders() {
  bool any = false;
  // A slot holds the next header once its receive, posted for that very sequence number, is
  // complete (while an earlier header waits in it, it is not yet posted for a later one).
  for (;;) {
    const size_t slot = next_header_seq_ % control_slots_;
    if (arrived_length_[slot] == SIZE_MAX ||
        recv_pieces_[slot].tag != controlTag(next_header_seq_)) {
      break;
    }
    ready_headers_.push_back(next_header_seq_++);
    any = true;
  }
  while (!ready_headers_.empty() && !posted_recvs_.empty()) {
    const uint64_t seq = ready_headers_.front();
    if (!matchHeader(seq, static_cast<uint32_t>(seq % control_slots_),
                     arrived_length_[seq % control_slots_])) {
      return any;
    }
    ready_headers_.pop_front();
    any = true;
  }
  return any;
}

bool Core::matchHeader(uint64_t seq, uint32_t slot, size_t length) {
  const uint8_t* bytes = recv_arena_.get() + slot * params_.slot_bytes;
  const std::string& peer = peer_;
  const Header header = length >= kHeaderBytes ? decodeHeader(bytes) : Header{0, 0, 0, 0, 0};
  const bool inline_payload = (header.flags & kInline) != 0;
  const bool consistent =
      header.magic == kHeaderMagic &&
      (inline_payload ? header.size == length - kHeaderBytes && header.chunks == 0
                      : length == kHeaderBytes &&
                            header.chunks == chunkCount(header.size, params_.chunk_bytes));
  if (!consistent) {
    fail(Status::remote("peer " + peer + " sent a bad ofi message header (" +
                        std::to_string(length) + " bytes, message " + std::to_string(seq) + ")"));
    return false;
  }
  std::shared_ptr<Op> op = posted_recvs_.front();
  int buffer = -1;
  for (int i = 0; i < op->n && buffer < 0; ++i) {
    if (!op->taken[i] && op->tags[i] == header.tag) buffer = i;
  }
  if (buffer < 0 || header.size > op->capacity[buffer]) {
    std::string text = "peer " + peer + " sent " + std::to_string(header.size) +
                       " bytes with tag " + std::to_string(header.tag);
    text += buffer < 0
                ? " but the posted receive has no free buffer with that tag"
                : " into a receive buffer of " + std::to_string(op->capacity[buffer]) + " bytes";
    fail(Status::internal(text));
    return false;
  }
  op->taken[buffer] = true;
  op->received[buffer] = header.size;
  ++op->matched;
  op->last_progress = Clock::now();
  if (inline_payload) {
    if (header.size > 0) std::memcpy(op->data[buffer], bytes + kHeaderBytes, header.size);
    ++delivered_;
  } else if (header.chunks > 0) {
    op->chunks[buffer] = std::make_unique<Piece[]>(header.chunks);
    op->chunks_left[buffer] = header.chunks;
    op->outstanding += header.chunks;
    for (uint64_t c = 0; c < header.chunks; ++c) {
      Piece& piece = op->chunks[buffer][c];
      const uint64_t offset = c * params_.chunk_bytes;
      piece.kind = Piece::kChunkRecv;
      piece.op = op.get();
      piece.slot = static_cast<uint32_t>(buffer);
      piece.buffer = op->data[buffer] + offset;
      piece.length = std::min<uint64_t>(params_.chunk_bytes, header.size - offset);
      piece.desc = op->desc[buffer];
      piece.tag = chunkTag(seq, c);
      to_post_.push_back(&piece);
    }
  } else {
    ++delivered_;
  }
  arrived_length_[slot] = SIZE_MAX;
  postControlRecv(seq + control_slots_);
  if (op->matched == op->n) {
    posted_recvs_.pop_front();
    if (op->outstanding == 0) completeOp(op.get());
  }
  return true;
}

}  // namespace tally::transport::ofi
