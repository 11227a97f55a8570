// SPDX-License-Identifier: Apache-2.0
// Little-endian field writers and readers for the wire messages (wire.cc, wire_failover.cc).
// Not a public interface: every message has its own encode and decode in wire.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "protocol/wire.h"

namespace tally::protocol::wire::codec {

// Appends little-endian fields to a Frame. The caller keeps within kMaxHeaderBytes (each
// message's size is a static_assert beside its encoder).
class Writer {
 public:
  explicit Writer(Frame* f) : f_(f) { f_->size = 0; }
  void u8(uint8_t v) { f_->bytes[f_->size++] = v; }
  void u16(uint16_t v) { uint(v, 2); }
  void u32(uint32_t v) { uint(v, 4); }
  void u64(uint64_t v) { uint(v, 8); }
  void raw(const void* p, size_t n) {
    std::memcpy(f_->bytes.data() + f_->size, p, n);
    f_->size += n;
  }
  void zeros(size_t n) {
    std::memset(f_->bytes.data() + f_->size, 0, n);
    f_->size += n;
  }
  // A text field of exactly `width` bytes: its first `width` bytes, zero padded.
  void text(const std::string& s, size_t width) {
    const size_t n = s.size() < width ? s.size() : width;
    raw(s.data(), n);
    zeros(width - n);
  }

 private:
  void uint(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) f_->bytes[f_->size++] = static_cast<uint8_t>(v >> (8 * i));
  }
  Frame* f_;
};

// Reads little-endian fields; the caller has already checked the total size.
class Reader {
 public:
  explicit Reader(const uint8_t* p) : p_(p) {}
  uint8_t u8() { return p_[pos_++]; }
  uint16_t u16() { return static_cast<uint16_t>(uint(2)); }
  uint32_t u32() { return static_cast<uint32_t>(uint(4)); }
  uint64_t u64() { return uint(8); }
  const uint8_t* take(size_t n) {
    const uint8_t* r = p_ + pos_;
    pos_ += n;
    return r;
  }

 private:
  uint64_t uint(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p_[pos_++]) << (8 * i);
    return v;
  }
  const uint8_t* p_;
  size_t pos_ = 0;
};

// The preamble of a message of type t.
inline void start(MsgType t, Writer* w) {
  w->u32(kMagic);
  w->u16(kVersion);
  w->u8(static_cast<uint8_t>(t));
  w->u8(0);
}

// Checks the preamble, the size, and that the message is of type `want`.
Status expect(const uint8_t* data, size_t size, MsgType want);

// Body sizes (after the preamble) of the failover messages (wire_failover.cc); 0 for others.
size_t failoverBodySize(MsgType t);

}  // namespace tally::protocol::wire::codec
