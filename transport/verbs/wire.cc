// SPDX-License-Identifier: Apache-2.0
#include "transport/verbs/wire.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace tally::transport::verbs {
namespace {

constexpr uint32_t k24Bits = 0xffffffu;
constexpr uint8_t kLinkIb = 1;
constexpr uint8_t kLinkEthernet = 2;

void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

Status bad(const std::string& what) {
  return Status::remote("peer sent a bad verbs setup message: " + what);
}

// Shared by encode (our own message, kInternal) and decode (the peer's, kRemote).
std::string problem(const SetupMessage& m) {
  if (m.version != kSetupVersion) {
    return "version " + std::to_string(m.version) + ", expected " + std::to_string(kSetupVersion);
  }
  if (m.qps.empty() || m.qps.size() > static_cast<size_t>(kMaxQps)) {
    return std::to_string(m.qps.size()) + " queue pairs, expected 1 to " + std::to_string(kMaxQps);
  }
  if (m.link_layer != kLinkIb && m.link_layer != kLinkEthernet) {
    return "link layer " + std::to_string(m.link_layer);
  }
  if (m.mtu < IBV_MTU_256 || m.mtu > IBV_MTU_4096) return "MTU code " + std::to_string(m.mtu);
  if (m.port == 0) return "port 0";
  if (m.link_layer == kLinkIb && m.lid == 0) return "InfiniBand LID 0";
  if (m.link_layer == kLinkEthernet &&
      std::all_of(m.gid, m.gid + 16, [](uint8_t b) { return b == 0; })) {
    return "RoCE GID of zeros";
  }
  if (m.max_requests == 0 || m.max_requests > kMaxWireRequests) {
    return "max_requests " + std::to_string(m.max_requests);
  }
  if (m.recv_depth == 0 || m.recv_depth > (1u << 20)) {
    return "receive depth " + std::to_string(m.recv_depth);
  }
  for (size_t i = 0; i < m.qps.size(); ++i) {
    if (m.qps[i].qp_num > k24Bits || m.qps[i].psn > k24Bits) {
      return "queue pair " + std::to_string(i) + " number or PSN beyond 24 bits";
    }
  }
  return "";
}

}  // namespace

Status encodeSetup(const SetupMessage& m, std::vector<uint8_t>* out) {
  std::string why = problem(m);
  if (!why.empty()) return Status::internal("invalid verbs setup message: " + why);
  size_t offset = out->size();
  out->resize(offset + kSetupFixedBytes + m.qps.size() * kSetupQpBytes, 0);
  uint8_t* p = out->data() + offset;
  put32(p, kSetupMagic);
  put16(p + 4, m.version);
  put16(p + 6, static_cast<uint16_t>(m.qps.size()));
  p[8] = m.link_layer;
  p[9] = m.port;
  p[10] = m.mtu;
  put16(p + 12, m.lid);
  std::memcpy(p + 16, m.gid, 16);
  put32(p + 32, m.max_requests);
  put32(p + 36, m.recv_depth);
  for (size_t i = 0; i < m.qps.size(); ++i) {
    put32(p + kSetupFixedBytes + i * kSetupQpBytes, m.qps[i].qp_num);
    put32(p + kSetupFixedBytes + i * kSetupQpBytes + 4, m.qps[i].psn);
  }
  return Status::ok();
}

size_t setupSize(const uint8_t* first8) {
  if (get32(first8) != kSetupMagic) return 0;
  uint16_t count = get16(first8 + 6);
  if (count < 1 || count > kMaxQps) return 0;
  return kSetupFixedBytes + count * kSetupQpBytes;
}

Status decodeSetup(const uint8_t* data, size_t size, SetupMessage* out) {
  if (size < kSetupFixedBytes) {
    return bad(std::to_string(size) + " bytes, shorter than the " +
               std::to_string(kSetupFixedBytes) + "-byte header");
  }
  if (get32(data) != kSetupMagic) return bad("wrong magic (not a Tally verbs peer)");
  SetupMessage m;
  m.version = get16(data + 4);
  if (m.version != kSetupVersion) return bad(problem(SetupMessage{m.version}));
  size_t count = get16(data + 6);
  if (count < 1 || count > static_cast<size_t>(kMaxQps)) {
    return bad(std::to_string(count) + " queue pairs, expected 1 to " + std::to_string(kMaxQps));
  }
  size_t expected = kSetupFixedBytes + count * kSetupQpBytes;
  if (size != expected) {
    return bad(std::to_string(size) + " bytes for " + std::to_string(count) +
               " queue pairs, expected " + std::to_string(expected));
  }
  m.link_layer = data[8];
  m.port = data[9];
  m.mtu = data[10];
  m.lid = get16(data + 12);
  std::memcpy(m.gid, data + 16, 16);
  m.max_requests = get32(data + 32);
  m.recv_depth = get32(data + 36);
  m.qps.resize(count);
  for (size_t i = 0; i < count; ++i) {
    m.qps[i].qp_num = get32(data + kSetupFixedBytes + i * kSetupQpBytes);
    m.qps[i].psn = get32(data + kSetupFixedBytes + i * kSetupQpBytes + 4);
  }
  std::string why = problem(m);
  if (!why.empty()) return bad(why);
  *out = std::move(m);
  return Status::ok();
}

size_t encodeClearToSend(const ClearToSend& cts, uint8_t* out) {
  out[0] = static_cast<uint8_t>(ControlKind::kClearToSend);
  out[1] = static_cast<uint8_t>(cts.n);
  put16(out + 2, 0);
  put32(out + 4, cts.seq);
  for (int i = 0; i < cts.n; ++i) {
    uint8_t* e = out + 8 + i * 24;
    put32(e, static_cast<uint32_t>(cts.entries[i].tag));
    put32(e + 4, cts.entries[i].rkey);
    put64(e + 8, cts.entries[i].addr);
    put64(e + 16, cts.entries[i].capacity);
  }
  return 8 + static_cast<size_t>(cts.n) * 24;
}

size_t encodeMismatch(const Mismatch& mismatch, uint8_t* out) {
  out[0] = static_cast<uint8_t>(ControlKind::kMismatch);
  out[1] = 0;
  put16(out + 2, 0);
  put32(out + 4, static_cast<uint32_t>(mismatch.tag));
  put64(out + 8, mismatch.size);
  put64(out + 16, static_cast<uint64_t>(mismatch.capacity));
  return 24;
}

Status decodeControl(const uint8_t* data, size_t size, ControlKind* kind, ClearToSend* cts,
                     Mismatch* mismatch) {
  if (size < 8)
    return Status::remote("peer sent a control message of " + std::to_string(size) + " bytes");
  if (data[0] == static_cast<uint8_t>(ControlKind::kClearToSend)) {
    int n = data[1];
    if (n < 1 || n > kMaxRecvs || size != 8 + static_cast<size_t>(n) * 24) {
      return Status::remote("peer sent a bad clear-to-send (" + std::to_string(n) + " buffers in " +
                            std::to_string(size) + " bytes)");
    }
    cts->seq = get32(data + 4);
    cts->n = n;
    for (int i = 0; i < n; ++i) {
      const uint8_t* e = data + 8 + i * 24;
      cts->entries[i] = {static_cast<int32_t>(get32(e)), get32(e + 4), get64(e + 8), get64(e + 16)};
    }
    *kind = ControlKind::kClearToSend;
    return Status::ok();
  }
  if (data[0] == static_cast<uint8_t>(ControlKind::kMismatch) && size == 24) {
    mismatch->tag = static_cast<int32_t>(get32(data + 4));
    mismatch->size = get64(data + 8);
    mismatch->capacity = static_cast<int64_t>(get64(data + 16));
    *kind = ControlKind::kMismatch;
    return Status::ok();
  }
  return Status::remote("peer sent an unknown control message (kind " + std::to_string(data[0]) +
                        ", " + std::to_string(size) + " bytes)");
}

uint32_t encodeImmediate(const Immediate& imm) {
  return ((imm.seq & kSeqMask) << 11) | (static_cast<uint32_t>(imm.slot & 7) << 8) |
         static_cast<uint32_t>(imm.chunks & 0xff);
}

Status decodeImmediate(uint32_t value, Immediate* out) {
  Immediate imm;
  imm.seq = value >> 11;
  imm.slot = static_cast<int>((value >> 8) & 7);
  imm.chunks = static_cast<int>(value & 0xff);
  if (imm.chunks == 0) return Status::remote("peer wrote a data chunk with a chunk count of 0");
  *out = imm;
  return Status::ok();
}

}  // namespace tally::transport::verbs
