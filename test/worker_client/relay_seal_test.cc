// SPDX-License-Identifier: Apache-2.0
// The seal on failover relays (worker_client/relay_seal.h): what opens and what does not, and the
// MAC's layout as the header documents it, computed here from the parts.
#include "worker_client/relay_seal.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace tally::worker_client {
namespace {

namespace wire = protocol::wire;

wire::Relay sampleRelay() {
  wire::Relay r;
  r.control.kind = wire::ControlKind::kPropose;
  r.control.change = wire::Change::kLost;
  r.control.epoch = 4;
  r.control.slot = 2;
  r.control.next_call = 1234;
  r.control.commit = wire::AckPoint{77, 3};
  r.control.address = "10.0.0.9:2222";
  r.control.reason = "connection reset";
  return r;
}

RelaySeal::Key keyOf(uint8_t first) {
  RelaySeal::Key k;
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(first + 3 * i);
  return k;
}

class RelaySealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status why;
    hmac_ = hmac::shared(&why);
    ASSERT_NE(hmac_, nullptr) << why.toString();
  }
  // What a rank sends and a rank receives: sealed by `rank`, stamped `rank` by the reducer.
  wire::Relay sent(const RelaySeal& seal, uint32_t rank, wire::Relay r = sampleRelay()) {
    EXPECT_TRUE(seal.seal(rank, &r).isOk());
    wire::Relay got;
    wire::Frame f = wire::encodeRelay(r);
    f.bytes[wire::kRelayFromOffset] = static_cast<uint8_t>(rank);
    EXPECT_TRUE(wire::decodeRelay(f.data(), f.size, &got).isOk());
    return got;
  }
  const hmac::HmacSha256* hmac_ = nullptr;
  const wire::CommId comm_{0x0123456789abcdefull, 0xfedcba9876543210ull};
};

TEST_F(RelaySealTest, OpensWhatARankSealed) {
  const RelaySeal seal(hmac_, keyOf(1), comm_);
  for (uint32_t rank : {0u, 1u, 7u}) {
    const wire::Relay got = sent(seal, rank);
    EXPECT_TRUE(seal.opens(got)) << "rank " << rank;
    EXPECT_NE(got.seal, (std::array<uint8_t, wire::kRelaySealBytes>{})) << "rank " << rank;
  }
}

TEST_F(RelaySealTest, ChangedOrForgedRelaysDoNotOpen) {
  const RelaySeal seal(hmac_, keyOf(1), comm_);
  const wire::Relay good = sent(seal, 3);
  ASSERT_TRUE(seal.opens(good));
  // Each field a reducer could change on the way.
  std::vector<wire::Relay> bad(10, good);
  bad[0].from = 0;  // passed off as rank 0's
  bad[1].control.kind = wire::ControlKind::kDecide;
  bad[2].control.change = wire::Change::kFail;
  bad[3].control.epoch = 5;
  bad[4].control.slot = 1;
  bad[5].control.next_call = 1235;
  bad[6].control.commit.calls = 78;
  bad[7].control.reason = "connection reset!";
  bad[8].seal[5] ^= 0x40;
  bad[9].control.first_call = 1;
  for (size_t i = 0; i < bad.size(); ++i) EXPECT_FALSE(seal.opens(bad[i])) << "change " << i;
  // A relay with no seal at all, and one sealed under another key or for another communicator.
  wire::Relay unsealed = good;
  unsealed.seal.fill(0);
  EXPECT_FALSE(seal.opens(unsealed));
  const RelaySeal other_key(hmac_, keyOf(2), comm_);
  EXPECT_FALSE(seal.opens(sent(other_key, 3)));
  const RelaySeal other_comm(hmac_, keyOf(1), wire::CommId{comm_.hi, comm_.lo + 1});
  EXPECT_FALSE(seal.opens(sent(other_comm, 3)));
}

TEST_F(RelaySealTest, IsTheDocumentedMac) {
  const RelaySeal::Key key = keyOf(9);
  const RelaySeal seal(hmac_, key, comm_);
  wire::Relay r = sampleRelay();
  ASSERT_TRUE(seal.seal(6, &r).isOk());
  // "tally-relay-v1" and its 0 byte, the communicator id (hi, lo, little-endian), the relay as
  // encoded with from = 6 and a zero seal.
  std::vector<uint8_t> msg;
  const char label[] = "tally-relay-v1";
  msg.insert(msg.end(), label, label + sizeof(label));
  for (uint64_t v : {comm_.hi, comm_.lo}) {
    for (int i = 0; i < 8; ++i) msg.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  wire::Relay plain = sampleRelay();
  plain.from = 6;
  const wire::Frame f = wire::encodeRelay(plain);
  msg.insert(msg.end(), f.data(), f.data() + f.size);
  hmac::Digest d;
  ASSERT_TRUE(hmac_->compute(key.data(), key.size(), msg.data(), msg.size(), &d).isOk());
  EXPECT_EQ(0, std::memcmp(r.seal.data(), d.data(), wire::kRelaySealBytes));
}

TEST_F(RelaySealTest, WithoutASealEverythingOpensAndNothingIsSealed) {
  const RelaySeal none;
  EXPECT_FALSE(none.active());
  wire::Relay r = sampleRelay();
  r.seal.fill(0x55);
  ASSERT_TRUE(none.seal(2, &r).isOk());
  EXPECT_EQ(r.seal, (std::array<uint8_t, wire::kRelaySealBytes>{}));
  EXPECT_TRUE(none.opens(r));
}

TEST(RelaySealKey, KeysAreFreshAndNotZero) {
  RelaySeal::Key a, b;
  ASSERT_TRUE(RelaySeal::newKey(&a).isOk());
  ASSERT_TRUE(RelaySeal::newKey(&b).isOk());
  EXPECT_NE(a, b);
  EXPECT_NE(a, RelaySeal::Key{});
}

}  // namespace
}  // namespace tally::worker_client
