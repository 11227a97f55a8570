// SPDX-License-Identifier: Apache-2.0
// The reducer wire format: round trips, and rejection of anything malformed.
#include "protocol/wire.h"

#include <gtest/gtest.h>

#include <cstring>

namespace tally::protocol::wire {
namespace {

SliceHeader sampleSlice() {
  SliceHeader h;
  h.seq = 0x0102030405060708ull;
  h.slice = 3;
  h.offset = 3 * 65536;
  h.count = 65536;
  h.total_count = 300000;
  h.type = DataType::kFloat32;
  h.op = ReduceOp::kSum;
  return h;
}

Hello sampleHello() {
  Hello m;
  m.comm = CommId{0x1111222233334444ull, 0x5555666677778888ull};
  m.rank = 2;
  m.nranks = 4;
  m.reducer_index = 1;
  m.nreducers = 3;
  m.slice_bytes = 256 * 1024;
  m.epoch = 7;
  m.slices_per_reducer = 3;
  m.min_slice_bytes = 96 * 1024;
  m.window = 16;
  m.checksum = true;
  return m;
}

Challenge sampleChallenge() {
  Challenge c;
  c.auth_required = true;
  for (size_t i = 0; i < c.nonce.size(); ++i) c.nonce[i] = static_cast<uint8_t>(i * 7 + 1);
  return c;
}

Answer sampleAnswer() {
  Answer a;
  for (size_t i = 0; i < a.nonce.size(); ++i) a.nonce[i] = static_cast<uint8_t>(200 - i);
  for (size_t i = 0; i < a.mac.size(); ++i) a.mac[i] = static_cast<uint8_t>(i ^ 0x5a);
  return a;
}

TEST(WireTest, HelloRoundTrip) {
  Hello m = sampleHello();
  Frame f = encodeHello(m);
  MsgType t;
  ASSERT_TRUE(peekType(f.data(), f.size, &t).isOk());
  EXPECT_EQ(t, MsgType::kHello);
  Hello d;
  ASSERT_TRUE(decodeHello(f.data(), f.size, &d).isOk());
  EXPECT_EQ(d.comm, m.comm);
  EXPECT_EQ(d.rank, 2u);
  EXPECT_EQ(d.nranks, 4u);
  EXPECT_EQ(d.reducer_index, 1u);
  EXPECT_EQ(d.nreducers, 3u);
  EXPECT_EQ(d.slice_bytes, 256u * 1024);
  EXPECT_EQ(d.slices_per_reducer, 3u);
  EXPECT_EQ(d.min_slice_bytes, 96u * 1024);
  EXPECT_EQ(d.window, 16u);
  EXPECT_TRUE(d.checksum);
  EXPECT_EQ(d.epoch, 7u);
  m.checksum = false;
  f = encodeHello(m);
  ASSERT_TRUE(decodeHello(f.data(), f.size, &d).isOk());
  EXPECT_FALSE(d.checksum);
}

TEST(WireTest, HelloWithoutASlicePlanIsRefused) {
  for (uint32_t per : {0u, kMaxSlicesPerReducer + 1}) {
    Hello m = sampleHello();
    m.slices_per_reducer = per;
    Frame f = encodeHello(m);
    Hello d = sampleHello();
    Status st = decodeHello(f.data(), f.size, &d);
    EXPECT_FALSE(st.isOk()) << per;
    EXPECT_NE(st.message().find("slice plan"), std::string::npos) << st.message();
  }
  Hello m = sampleHello();
  m.min_slice_bytes = 0;
  Frame f = encodeHello(m);
  Hello d;
  EXPECT_FALSE(decodeHello(f.data(), f.size, &d).isOk());
}

TEST(WireTest, VersionEight) {
  EXPECT_EQ(kVersion, 8);
  Frame f = encodeBye();
  EXPECT_EQ(f.bytes[4], 8);
  EXPECT_EQ(f.bytes[5], 0);
  // A peer of version 7 (before a Decide's first call), 6 (before the relay seal), 5 (before
  // failover), 4 (before the slice plan in Hello), 3 (before all-gather and reduce-scatter) or 2
  // is refused with a message that names both versions.
  for (uint8_t old : {uint8_t{7}, uint8_t{6}, uint8_t{5}, uint8_t{4}, uint8_t{3}, uint8_t{2}}) {
    f.bytes[4] = old;
    MsgType t;
    Status st = peekType(f.data(), f.size, &t);
    EXPECT_FALSE(st.isOk());
    EXPECT_NE(st.message().find("version " + std::to_string(old)), std::string::npos)
        << st.message();
    EXPECT_NE(st.message().find("speaks 8"), std::string::npos) << st.message();
  }
}

TEST(WireTest, WindowedSlicesRoundTrip) {
  SliceHeader h = sampleSlice();
  h.kind = CollKind::kReduceScatter;
  h.rank_count = 1000003;
  h.window_offset = 77777;
  for (uint64_t count : {uint64_t{0}, uint64_t{5}}) {
    h.count = count;
    SliceHeader d;
    Frame s = encodeSlice(h);
    ASSERT_TRUE(decodeSlice(s.data(), s.size, &d).isOk());
    EXPECT_EQ(d.kind, CollKind::kReduceScatter);
    EXPECT_EQ(d.rank_count, h.rank_count);
    EXPECT_EQ(d.window_offset, h.window_offset);
    EXPECT_EQ(d.count, count);
    EXPECT_EQ(d.payloadBytes(), count * dataTypeSize(h.type));
    Frame r = encodeResult(h);
    ASSERT_TRUE(decodeResult(r.data(), r.size, &d).isOk());
    EXPECT_EQ(d.kind, CollKind::kReduceScatter);
  }
  h.kind = CollKind::kAllGather;
  h.type = DataType::kUint8;
  h.op = ReduceOp::kSum;
  SliceHeader d;
  Frame s = encodeSlice(h);
  ASSERT_TRUE(decodeSlice(s.data(), s.size, &d).isOk());
  EXPECT_EQ(d.kind, CollKind::kAllGather);
  EXPECT_NE(describeSlice(d).find("all-gather window at 77777, 1000003 per rank"),
            std::string::npos)
      << describeSlice(d);
}

TEST(WireTest, RejectsBadWindowedSlices) {
  auto decodes = [](const SliceHeader& h) {
    Frame f = encodeSlice(h);
    SliceHeader d;
    return decodeSlice(f.data(), f.size, &d).isOk();
  };
  SliceHeader h = sampleSlice();
  h.kind = CollKind::kReduceScatter;
  h.rank_count = 100;
  EXPECT_TRUE(decodes(h));
  h.rank_count = 0;  // no rank part
  EXPECT_FALSE(decodes(h));
  h.rank_count = UINT64_MAX / 2;  // x 4 bytes overflows
  EXPECT_FALSE(decodes(h));
  h.rank_count = 100;
  h.window_offset = UINT64_MAX - h.total_count;  // bytes of the window's end overflow
  EXPECT_FALSE(decodes(h));
  // An all-reduce has no window and no empty slice.
  h = sampleSlice();
  h.window_offset = 4;
  EXPECT_FALSE(decodes(h));
  h = sampleSlice();
  h.rank_count = 4;
  EXPECT_FALSE(decodes(h));
  // An all-gather moves bytes.
  h = sampleSlice();
  h.kind = CollKind::kAllGather;
  h.rank_count = 100;
  EXPECT_FALSE(decodes(h));  // float32
  h.type = DataType::kUint8;
  h.op = ReduceOp::kMax;
  EXPECT_FALSE(decodes(h));
  h.op = ReduceOp::kSum;
  EXPECT_TRUE(decodes(h));
  // Unknown kinds and non-zero reserved bytes after the kind.
  Frame f = encodeSlice(h);
  Frame bad = f;
  bad.bytes[kPreambleBytes + 12] = 3;
  EXPECT_FALSE(decodeSlice(bad.data(), bad.size, &h).isOk());
  for (size_t i = 13; i < 16; ++i) {
    bad = f;
    bad.bytes[kPreambleBytes + i] = 1;
    EXPECT_FALSE(decodeSlice(bad.data(), bad.size, &h).isOk());
  }
}

TEST(WireTest, OpeningMessagesRoundTrip) {
  Challenge c = sampleChallenge();
  Frame f = encodeChallenge(c);
  MsgType t;
  ASSERT_TRUE(peekType(f.data(), f.size, &t).isOk());
  EXPECT_EQ(t, MsgType::kChallenge);
  Challenge dc;
  ASSERT_TRUE(decodeChallenge(f.data(), f.size, &dc).isOk());
  EXPECT_TRUE(dc.auth_required);
  EXPECT_EQ(dc.nonce, c.nonce);
  c.auth_required = false;
  f = encodeChallenge(c);
  ASSERT_TRUE(decodeChallenge(f.data(), f.size, &dc).isOk());
  EXPECT_FALSE(dc.auth_required);

  Answer a = sampleAnswer();
  f = encodeAnswer(a);
  EXPECT_EQ(f.size, kPreambleBytes + 64);
  Answer da;
  ASSERT_TRUE(decodeAnswer(f.data(), f.size, &da).isOk());
  EXPECT_EQ(da.nonce, a.nonce);
  EXPECT_EQ(da.mac, a.mac);
  Proof p;
  EXPECT_FALSE(decodeProof(f.data(), f.size, &p).isOk());

  p.mac = a.mac;
  f = encodeProof(p);
  Proof dp;
  ASSERT_TRUE(decodeProof(f.data(), f.size, &dp).isOk());
  EXPECT_EQ(dp.mac, p.mac);
  EXPECT_FALSE(decodeAnswer(f.data(), f.size, &da).isOk());
}

TEST(WireTest, RejectsUnknownFlags) {
  Frame f = encodeChallenge(sampleChallenge());
  Challenge c;
  f.bytes[kPreambleBytes] = 0x02;  // an unknown flag bit
  EXPECT_FALSE(decodeChallenge(f.data(), f.size, &c).isOk());
  f = encodeChallenge(sampleChallenge());
  f.bytes[kPreambleBytes + 4] = 1;  // reserved
  EXPECT_FALSE(decodeChallenge(f.data(), f.size, &c).isOk());
  f = encodeHello(sampleHello());
  Hello h;
  f.bytes[f.size - 4] = 0x03;  // checksum plus an unknown flag
  EXPECT_FALSE(decodeHello(f.data(), f.size, &h).isOk());
}

TEST(WireTest, LittleEndianOnTheWire) {
  Frame f = encodeHello(sampleHello());
  EXPECT_EQ(std::memcmp(f.data(), "TALY", 4), 0);
  EXPECT_EQ(f.bytes[4], kVersion & 0xff);
  EXPECT_EQ(f.bytes[6], static_cast<uint8_t>(MsgType::kHello));
  // comm.hi, least significant byte first.
  EXPECT_EQ(f.bytes[8], 0x44);
  EXPECT_EQ(f.bytes[15], 0x11);
}

TEST(WireTest, ReadyRoundTrip) {
  Ready m;
  m.comm = CommId{1, 2};
  m.nranks = 8;
  m.window = 32;
  Frame f = encodeReady(m);
  Ready d;
  ASSERT_TRUE(decodeReady(f.data(), f.size, &d).isOk());
  EXPECT_EQ(d.comm, m.comm);
  EXPECT_EQ(d.nranks, 8u);
  EXPECT_EQ(d.window, 32u);
}

TEST(WireTest, SliceAndResultRoundTrip) {
  SliceHeader h = sampleSlice();
  for (int i = 0; i < kNumDataTypes; ++i) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      h.type = static_cast<DataType>(i);
      h.op = static_cast<ReduceOp>(o);
      h.crc = 0xE3069283u + static_cast<uint32_t>(i * 16 + o);
      SliceHeader d;
      Frame s = encodeSlice(h);
      ASSERT_TRUE(decodeSlice(s.data(), s.size, &d).isOk());
      EXPECT_EQ(d.seq, h.seq);
      EXPECT_EQ(d.slice, h.slice);
      EXPECT_EQ(d.offset, h.offset);
      EXPECT_EQ(d.count, h.count);
      EXPECT_EQ(d.total_count, h.total_count);
      EXPECT_EQ(d.type, h.type);
      EXPECT_EQ(d.op, h.op);
      EXPECT_EQ(d.crc, h.crc);
      Frame r = encodeResult(h);
      ASSERT_TRUE(decodeResult(r.data(), r.size, &d).isOk());
      EXPECT_EQ(d.crc, h.crc);
      EXPECT_EQ(d.payloadBytes(), h.count * dataTypeSize(h.type));
      // A slice is not a result and vice versa.
      EXPECT_FALSE(decodeResult(s.data(), s.size, &d).isOk());
      EXPECT_FALSE(decodeSlice(r.data(), r.size, &d).isOk());
    }
  }
}

TEST(WireTest, ReasonsRoundTripAndTruncate) {
  Reason m{"ranks disagree: rank 0 sent float32, rank 1 sent int32"};
  Frame f = encodeError(m);
  Reason d;
  ASSERT_TRUE(decodeError(f.data(), f.size, &d).isOk());
  EXPECT_EQ(d.text, m.text);
  f = encodeReject(Reason{std::string(1000, 'x')});
  ASSERT_TRUE(decodeReject(f.data(), f.size, &d).isOk());
  EXPECT_EQ(d.text, std::string(kMaxReasonBytes, 'x'));
  EXPECT_FALSE(decodeError(f.data(), f.size, &d).isOk());  // a Reject is not an Error
}

TEST(WireTest, ByeRoundTrip) {
  Frame f = encodeBye();
  EXPECT_EQ(f.size, kPreambleBytes);
  EXPECT_TRUE(decodeBye(f.data(), f.size).isOk());
}

TEST(WireTest, RejectsBadPreamble) {
  Frame f = encodeBye();
  MsgType t;
  Frame bad = f;
  bad.bytes[0] ^= 1;  // magic
  EXPECT_EQ(peekType(bad.data(), bad.size, &t).code(), StatusCode::kRemote);
  bad = f;
  bad.bytes[4] = 99;  // version
  EXPECT_FALSE(peekType(bad.data(), bad.size, &t).isOk());
  bad = f;
  bad.bytes[6] = 0;  // type
  EXPECT_FALSE(peekType(bad.data(), bad.size, &t).isOk());
  bad.bytes[6] = 11;  // one past the last type (Proof)
  EXPECT_FALSE(peekType(bad.data(), bad.size, &t).isOk());
  bad.bytes[6] = 200;
  EXPECT_FALSE(peekType(bad.data(), bad.size, &t).isOk());
  bad = f;
  bad.bytes[7] = 1;  // reserved
  EXPECT_FALSE(peekType(bad.data(), bad.size, &t).isOk());
  EXPECT_FALSE(peekType(nullptr, 0, &t).isOk());
}

TEST(WireTest, RejectsTruncatedAndOversized) {
  const Frame frames[] = {encodeHello(sampleHello()), encodeReady(Ready{CommId{}, 2, 4}),
                          encodeSlice(sampleSlice()), encodeResult(sampleSlice()),
                          encodeError(Reason{"x"}), encodeReject(Reason{"y"}), encodeBye(),
                          encodeChallenge(sampleChallenge()), encodeAnswer(sampleAnswer()),
                          encodeProof(Proof{})};
  for (const Frame& f : frames) {
    MsgType t;
    ASSERT_TRUE(peekType(f.data(), f.size, &t).isOk());
    for (size_t n = 0; n < f.size; ++n) {
      EXPECT_FALSE(peekType(f.data(), n, &t).isOk()) << msgTypeName(t) << " cut to " << n;
    }
    Frame longer = f;
    EXPECT_FALSE(peekType(longer.data(), f.size + 1, &t).isOk());
  }
  Hello h;
  Frame f = encodeHello(sampleHello());
  EXPECT_FALSE(decodeHello(f.data(), f.size - 1, &h).isOk());
}

TEST(WireTest, RejectsBadSliceFields) {
  auto decodes = [](const SliceHeader& h) {
    Frame f = encodeSlice(h);
    SliceHeader d;
    d.seq = 77;
    Status st = decodeSlice(f.data(), f.size, &d);
    if (!st.isOk()) {
      EXPECT_EQ(d.seq, 77u) << "output written on failure";
    }
    return st.isOk();
  };
  EXPECT_TRUE(decodes(sampleSlice()));
  SliceHeader h = sampleSlice();
  h.count = 0;
  EXPECT_FALSE(decodes(h));
  h = sampleSlice();
  h.offset = h.total_count;  // past the end
  EXPECT_FALSE(decodes(h));
  h = sampleSlice();
  h.offset = UINT64_MAX - 10;  // offset + count overflows
  EXPECT_FALSE(decodes(h));
  h = sampleSlice();
  h.count = kMaxSliceBytes / 4 + 1;  // over the slice limit
  h.total_count = h.count;
  h.offset = 0;
  EXPECT_FALSE(decodes(h));
  h = sampleSlice();
  h.type = DataType::kFloat64;
  h.count = UINT64_MAX / 4;  // count x 8 overflows
  h.offset = 0;
  h.total_count = UINT64_MAX;
  EXPECT_FALSE(decodes(h));
  h = sampleSlice();
  h.total_count = UINT64_MAX / 2;  // total x 4 overflows
  EXPECT_FALSE(decodes(h));

  // Unknown type and op codes, non-zero reserved bytes: patched into a good frame.
  Frame f = encodeSlice(sampleSlice());
  SliceHeader d;
  const size_t type_at = kPreambleBytes + 8 + 4 + 1 + 3 + 8 + 8 + 8;
  Frame bad = f;
  bad.bytes[type_at] = kNumDataTypes;
  EXPECT_FALSE(decodeSlice(bad.data(), bad.size, &d).isOk());
  bad = f;
  bad.bytes[type_at + 1] = kNumReduceOps;
  EXPECT_FALSE(decodeSlice(bad.data(), bad.size, &d).isOk());
  bad = f;
  bad.bytes[kPreambleBytes + 13] = 1;  // padding after the kind
  EXPECT_FALSE(decodeSlice(bad.data(), bad.size, &d).isOk());
}

TEST(WireTest, RejectsBadHelloFields) {
  auto decodes = [](const Hello& m) {
    Frame f = encodeHello(m);
    Hello d;
    return decodeHello(f.data(), f.size, &d).isOk();
  };
  Hello m = sampleHello();
  m.rank = m.nranks;
  EXPECT_FALSE(decodes(m));
  m = sampleHello();
  m.nranks = 0;
  m.rank = 0;
  EXPECT_FALSE(decodes(m));
  m = sampleHello();
  m.reducer_index = 3;
  EXPECT_FALSE(decodes(m));
  m = sampleHello();
  m.slice_bytes = 0;
  EXPECT_FALSE(decodes(m));
  m = sampleHello();
  m.slice_bytes = kMaxSliceBytes + 1;
  EXPECT_FALSE(decodes(m));
  m = sampleHello();
  m.window = 0;
  EXPECT_FALSE(decodes(m));
}

TEST(WireTest, RejectsBadReasonLength) {
  Frame f = encodeError(Reason{"abc"});
  f.bytes[kPreambleBytes] = 0xff;  // length 255 > kMaxReasonBytes
  Reason d;
  EXPECT_FALSE(decodeError(f.data(), f.size, &d).isOk());
}

}  // namespace
}  // namespace tally::protocol::wire
