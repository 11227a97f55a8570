// SPDX-License-Identifier: Apache-2.0
// The verbs setup message, control messages and immediates: bytes, round trips and refusals.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstring>

#include "transport/verbs/wire.h"

namespace tally::transport::verbs {
namespace {

SetupMessage roceSetup(int qps) {
  SetupMessage m;
  m.link_layer = 2;
  m.port = 1;
  m.mtu = IBV_MTU_4096;
  m.gid[10] = 0xff;
  m.gid[11] = 0xff;
  m.gid[12] = 192;
  m.gid[13] = 168;
  m.gid[15] = 7;
  m.max_requests = 256;
  m.recv_depth = 2312;
  for (int i = 0; i < qps; ++i) {
    m.qps.push_back({0x100u + static_cast<uint32_t>(i), 0xabcdefu - static_cast<uint32_t>(i)});
  }
  return m;
}

std::vector<uint8_t> encoded(const SetupMessage& m) {
  std::vector<uint8_t> bytes;
  Status status = encodeSetup(m, &bytes);
  EXPECT_TRUE(status.isOk()) << status.toString();
  return bytes;
}

Status decode(const std::vector<uint8_t>& bytes, SetupMessage* out = nullptr) {
  SetupMessage scratch;
  return decodeSetup(bytes.data(), bytes.size(), out != nullptr ? out : &scratch);
}

TEST(VerbsWireTest, SetupBytesAreFixed) {
  SetupMessage m = roceSetup(2);
  std::vector<uint8_t> bytes = encoded(m);
  ASSERT_EQ(bytes.size(), 40u + 2 * 8);
  const uint8_t head[] = {'T', 'l', 'y', 'V', 1, 0, 2, 0, 2, 1, 5, 0, 0, 0, 0, 0};
  EXPECT_EQ(0, std::memcmp(bytes.data(), head, sizeof(head)));
  EXPECT_EQ(bytes[16 + 12], 192);
  EXPECT_EQ(bytes[32], 0x00);  // max_requests 256, little-endian
  EXPECT_EQ(bytes[33], 0x01);
  EXPECT_EQ(bytes[36], 2312 & 0xff);
  const uint8_t qp1[] = {0x01, 0x01, 0, 0, 0xee, 0xcd, 0xab, 0};
  EXPECT_EQ(0, std::memcmp(bytes.data() + 48, qp1, sizeof(qp1)));
  EXPECT_EQ(setupSize(bytes.data()), bytes.size());
}

TEST(VerbsWireTest, SetupRoundTrip) {
  for (int qps : {1, 3, kMaxQps}) {
    SetupMessage m = roceSetup(qps);
    SetupMessage back;
    ASSERT_TRUE(decode(encoded(m), &back).isOk());
    EXPECT_EQ(back.version, kSetupVersion);
    EXPECT_EQ(back.link_layer, 2);
    EXPECT_EQ(back.mtu, IBV_MTU_4096);
    EXPECT_EQ(0, std::memcmp(back.gid, m.gid, 16));
    EXPECT_EQ(back.max_requests, 256u);
    EXPECT_EQ(back.recv_depth, 2312u);
    ASSERT_EQ(back.qps.size(), static_cast<size_t>(qps));
    for (int i = 0; i < qps; ++i) {
      EXPECT_EQ(back.qps[i].qp_num, m.qps[i].qp_num);
      EXPECT_EQ(back.qps[i].psn, m.qps[i].psn);
    }
  }
  SetupMessage ib = roceSetup(1);
  ib.link_layer = 1;
  ib.lid = 0x1234;
  std::memset(ib.gid, 0, 16);
  SetupMessage back;
  ASSERT_TRUE(decode(encoded(ib), &back).isOk());
  EXPECT_EQ(back.lid, 0x1234);
}

void expectRefused(const std::vector<uint8_t>& bytes, const std::string& text) {
  Status status = decode(bytes);
  EXPECT_EQ(status.code(), StatusCode::kRemote) << text;
  EXPECT_NE(status.message().find(text), std::string::npos) << status.toString();
}

TEST(VerbsWireTest, TruncatedAndLongMessagesAreRefused) {
  std::vector<uint8_t> bytes = encoded(roceSetup(2));
  std::vector<uint8_t> head_only(bytes.begin(), bytes.begin() + 20);
  expectRefused(head_only, "20 bytes, shorter than the 40-byte header");
  std::vector<uint8_t> one_qp_short(bytes.begin(), bytes.end() - 1);
  expectRefused(one_qp_short, "55 bytes for 2 queue pairs, expected 56");
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  expectRefused(longer, "57 bytes for 2 queue pairs, expected 56");
  expectRefused({}, "0 bytes");
}

TEST(VerbsWireTest, GarbageIsRefused) {
  std::vector<uint8_t> garbage(56);
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 37 + 11);
  expectRefused(garbage, "wrong magic");
  EXPECT_EQ(setupSize(garbage.data()), 0u);
}

TEST(VerbsWireTest, BadFieldsAreRefused) {
  std::vector<uint8_t> good = encoded(roceSetup(2));
  auto with = [&](size_t offset, std::initializer_list<uint8_t> values) {
    std::vector<uint8_t> bytes = good;
    size_t i = offset;
    for (uint8_t v : values) bytes[i++] = v;
    return bytes;
  };
  expectRefused(with(4, {2, 0}), "version 2, expected 1");
  expectRefused(with(6, {0, 0}), "0 queue pairs");
  expectRefused(with(6, {17, 0}), "17 queue pairs, expected 1 to 16");
  expectRefused(with(8, {3}), "link layer 3");
  expectRefused(with(10, {6}), "MTU code 6");
  expectRefused(with(10, {0}), "MTU code 0");
  expectRefused(with(9, {0}), "port 0");
  expectRefused(with(32, {0, 0, 0, 0}), "max_requests 0");
  expectRefused(with(32, {1, 0, 1, 0}), "max_requests 65537");
  expectRefused(with(36, {0, 0, 0, 0}), "receive depth 0");
  expectRefused(with(40 + 8 + 3, {1}), "queue pair 1 number or PSN beyond 24 bits");
  expectRefused(with(40 + 7, {1}), "queue pair 0 number or PSN beyond 24 bits");
  std::vector<uint8_t> no_gid = good;
  std::memset(no_gid.data() + 16, 0, 16);
  expectRefused(no_gid, "RoCE GID of zeros");
  std::vector<uint8_t> ib_no_lid = with(8, {1});
  expectRefused(ib_no_lid, "InfiniBand LID 0");
  // The size of a message whose header is fine but whose count is not is unknown.
  std::vector<uint8_t> bad_count = with(6, {17, 0});
  EXPECT_EQ(setupSize(bad_count.data()), 0u);
}

TEST(VerbsWireTest, EncodeRefusesInvalidMessages) {
  SetupMessage none = roceSetup(0);
  std::vector<uint8_t> bytes;
  Status status = encodeSetup(none, &bytes);
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_TRUE(bytes.empty());
  SetupMessage wide = roceSetup(1);
  wide.qps[0].qp_num = 1u << 24;
  EXPECT_EQ(encodeSetup(wide, &bytes).code(), StatusCode::kInternal);
}

TEST(VerbsWireTest, ClearToSendRoundTrip) {
  ClearToSend cts;
  cts.seq = 0x1abcde;
  cts.n = kMaxRecvs;
  for (int i = 0; i < kMaxRecvs; ++i) {
    cts.entries[i] = {-5 + i, 0x1000u + i, 0x7f0000001000ull + i * 64, 1000ull * (i + 1)};
  }
  uint8_t bytes[kControlBytes];
  size_t size = encodeClearToSend(cts, bytes);
  EXPECT_EQ(size, kControlBytes);
  ControlKind kind{};
  ClearToSend back;
  Mismatch unused;
  ASSERT_TRUE(decodeControl(bytes, size, &kind, &back, &unused).isOk());
  EXPECT_EQ(kind, ControlKind::kClearToSend);
  EXPECT_EQ(back.seq, cts.seq);
  ASSERT_EQ(back.n, kMaxRecvs);
  for (int i = 0; i < kMaxRecvs; ++i) {
    EXPECT_EQ(back.entries[i].tag, cts.entries[i].tag);
    EXPECT_EQ(back.entries[i].rkey, cts.entries[i].rkey);
    EXPECT_EQ(back.entries[i].addr, cts.entries[i].addr);
    EXPECT_EQ(back.entries[i].capacity, cts.entries[i].capacity);
  }
  // A count that disagrees with the length, a count of 0 or 9, a short message.
  EXPECT_EQ(decodeControl(bytes, size - 24, &kind, &back, &unused).code(), StatusCode::kRemote);
  bytes[1] = 0;
  EXPECT_EQ(decodeControl(bytes, 8, &kind, &back, &unused).code(), StatusCode::kRemote);
  bytes[1] = 9;
  EXPECT_EQ(decodeControl(bytes, 8 + 9 * 24, &kind, &back, &unused).code(), StatusCode::kRemote);
  EXPECT_EQ(decodeControl(bytes, 4, &kind, &back, &unused).code(), StatusCode::kRemote);
}

TEST(VerbsWireTest, MismatchRoundTripAndUnknownKind) {
  uint8_t bytes[kControlBytes];
  size_t size = encodeMismatch({7, 101, 100}, bytes);
  ControlKind kind{};
  ClearToSend unused;
  Mismatch back;
  ASSERT_TRUE(decodeControl(bytes, size, &kind, &unused, &back).isOk());
  EXPECT_EQ(kind, ControlKind::kMismatch);
  EXPECT_EQ(back.tag, 7);
  EXPECT_EQ(back.size, 101u);
  EXPECT_EQ(back.capacity, 100);
  encodeMismatch({7, 5, -1}, bytes);
  ASSERT_TRUE(decodeControl(bytes, size, &kind, &unused, &back).isOk());
  EXPECT_EQ(back.capacity, -1);
  bytes[0] = 9;
  Status status = decodeControl(bytes, size, &kind, &unused, &back);
  EXPECT_EQ(status.code(), StatusCode::kRemote);
  EXPECT_NE(status.message().find("unknown control message (kind 9"), std::string::npos);
}

TEST(VerbsWireTest, Immediates) {
  Immediate imm{0x1fffff, 7, 255};
  Immediate back;
  ASSERT_TRUE(decodeImmediate(encodeImmediate(imm), &back).isOk());
  EXPECT_EQ(back.seq, 0x1fffffu);
  EXPECT_EQ(back.slot, 7);
  EXPECT_EQ(back.chunks, 255);
  ASSERT_TRUE(decodeImmediate(encodeImmediate({kSeqMask + 5, 2, 1}), &back).isOk());
  EXPECT_EQ(back.seq, 4u) << "the sequence wraps modulo 2^21";
  EXPECT_EQ(back.slot, 2);
  EXPECT_EQ(encodeImmediate({1, 1, 1}), (1u << 11) | (1u << 8) | 1u);
  EXPECT_EQ(decodeImmediate(0x800u, &back).code(), StatusCode::kRemote);  // 0 chunks
}

}  // namespace
}  // namespace tally::transport::verbs
