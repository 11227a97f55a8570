// SPDX-License-Identifier: Apache-2.0
// The v12 tables (the ones NCCL 2.30 picks) in process: getProperties writes all 128 bytes of the
// new layout whatever the caller's struct held (NCCL passes it uninitialized), with the same
// values as v11 and no rail or plane; setNetAttr takes every op bit NCCL 2.30 can set.
#include <gtest/gtest.h>

#include <cstring>

#include "plugin_test_util.h"

namespace tally::plugin {
namespace {

using GetV12 = ncclResult_t (*)(int, ncclNetProperties_v12_t*);

// Calls get(dev) on a struct filled with `fill` and returns the raw bytes it left.
void propertiesOver(GetV12 get, int dev, unsigned char fill, ncclNetProperties_v12_t* out) {
  std::memset(out, fill, sizeof(*out));
  ASSERT_EQ(get(dev, out), ncclSuccess);
}

// Every byte is written: two calls over different fills leave identical bytes, none of them the
// fill where no field may hold it (padding, unused devs), and the ids are NCCL_NET_ID_UNDEF.
void expectEveryByteWritten(GetV12 get) {
  ncclNetProperties_v12_t a, b;
  ASSERT_NO_FATAL_FAILURE(propertiesOver(get, 0, 0xab, &a));
  ASSERT_NO_FATAL_FAILURE(propertiesOver(get, 0, 0x54, &b));
  const auto* pa = reinterpret_cast<const unsigned char*>(&a);
  const auto* pb = reinterpret_cast<const unsigned char*>(&b);
  for (size_t i = 0; i < sizeof(a); ++i) {
    EXPECT_EQ(pa[i], pb[i]) << "byte " << i << " keeps what the caller left there";
  }
  // The 4 bytes between vProps (36 B from 64) and maxP2pBytes (104) are padding: 0.
  for (size_t i = 100; i < 104; ++i) EXPECT_EQ(pa[i], 0) << "padding byte " << i;
  EXPECT_EQ(a.railId, NCCL_NET_ID_UNDEF);
  EXPECT_EQ(a.planeId, NCCL_NET_ID_UNDEF);
  EXPECT_EQ(pa[124], 0xff);  // -1 in both bytes of each id
  EXPECT_EQ(pa[127], 0xff);
  ASSERT_EQ(a.vProps.ndevs, 1);
  EXPECT_EQ(a.vProps.devs[0], 0);
  for (int i = 1; i < NCCL_NET_MAX_DEVS_PER_NIC_V12; ++i) EXPECT_EQ(a.vProps.devs[i], 0);
}

// The fields v11 has carry the same values in v12.
void expectSameAsV11(const ncclNetProperties_v12_t& p, const ncclNetProperties_v11_t& q) {
  EXPECT_EQ(p.name, q.name);
  EXPECT_EQ(p.pciPath, q.pciPath);
  EXPECT_EQ(p.guid, q.guid);
  EXPECT_EQ(p.ptrSupport, q.ptrSupport);
  EXPECT_EQ(p.regIsGlobal, q.regIsGlobal);
  EXPECT_EQ(p.forceFlush, q.forceFlush);
  EXPECT_EQ(p.speed, q.speed);
  EXPECT_EQ(p.port, q.port);
  EXPECT_EQ(p.latency, q.latency);
  EXPECT_EQ(p.maxComms, q.maxComms);
  EXPECT_EQ(p.maxRecvs, q.maxRecvs);
  EXPECT_EQ(p.netDeviceType, q.netDeviceType);
  EXPECT_EQ(p.netDeviceVersion, q.netDeviceVersion);
  EXPECT_EQ(p.vProps.ndevs, q.vProps.ndevs);
  EXPECT_EQ(p.maxP2pBytes, q.maxP2pBytes);
  EXPECT_EQ(p.maxCollBytes, q.maxCollBytes);
  EXPECT_EQ(p.maxMultiRequestSize, q.maxMultiRequestSize);
}

TEST(PluginV12, NetGetPropertiesWritesEveryByte) {
  testing::installLoopbackState();
  void* ctx = nullptr;
  ncclNetCommConfig_v12_t config = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
  ASSERT_EQ(ncclNetPlugin_v12.init(&ctx, 12, &config, nullptr, nullptr), ncclSuccess);
  int ndev = 0;
  ASSERT_EQ(ncclNetPlugin_v12.devices(&ndev), ncclSuccess);
  ASSERT_GE(ndev, 1);
  expectEveryByteWritten(ncclNetPlugin_v12.getProperties);

  ncclNetProperties_v12_t p;
  ncclNetProperties_v11_t q;
  ASSERT_EQ(ncclNetPlugin_v12.getProperties(0, &p), ncclSuccess);
  ASSERT_EQ(ncclNetPlugin_v11.getProperties(0, &q), ncclSuccess);
  expectSameAsV11(p, q);
  EXPECT_EQ(ncclNetPlugin_v12.getProperties(ndev, &p), ncclInternalError);
  EXPECT_EQ(ncclNetPlugin_v12.getProperties(0, nullptr), ncclInternalError);
  EXPECT_EQ(ncclNetPlugin_v12.finalize(ctx), ncclSuccess);
}

TEST(PluginV12, CollNetGetPropertiesWritesEveryByte) {
  testing::installLoopbackState();  // TALLY_REDUCERS set: CollNet has devices
  void* ctx = nullptr;
  ASSERT_EQ(ncclCollNetPlugin_v12.init(&ctx, 12, nullptr), ncclSuccess);
  int ncoll = 0;
  ASSERT_EQ(ncclCollNetPlugin_v12.devices(&ncoll), ncclSuccess);
  ASSERT_GE(ncoll, 1);
  expectEveryByteWritten(ncclCollNetPlugin_v12.getProperties);

  ncclNetProperties_v12_t p;
  ncclNetProperties_v11_t q;
  ASSERT_EQ(ncclCollNetPlugin_v12.getProperties(0, &p), ncclSuccess);
  ASSERT_EQ(ncclCollNetPlugin_v11.getProperties(0, &q), ncclSuccess);
  expectSameAsV11(p, q);
  EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(ncclCollNetPlugin_v12.getProperties(ncoll, &p), ncclInternalError);
  EXPECT_EQ(ncclCollNetPlugin_v12.finalize(ctx), ncclSuccess);
}

TEST(PluginV12, SetNetAttrTakesEveryOpBitOfNccl230) {
  testing::installLoopbackState();
  void* ctx = nullptr;
  ASSERT_EQ(ncclNetPlugin_v12.init(&ctx, 13, nullptr, nullptr, nullptr), ncclSuccess);
  ncclNetAttr_v12_t attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.op = (1u << 15) - 1;  // ncclFunc_t 0 to 14 (WaitSignal)
  attr.algo = (1u << 7) - 1;
  attr.proto = (1u << 3) - 1;
  EXPECT_EQ(ncclNetPlugin_v12.setNetAttr(ctx, &attr), ncclSuccess);
  attr.op = 1u << 14;
  EXPECT_EQ(ncclNetPlugin_v12.setNetAttr(ctx, &attr), ncclSuccess);
  EXPECT_EQ(ncclNetPlugin_v12.finalize(ctx), ncclSuccess);
}

TEST(PluginV12, NoVirtualNicsAreMade) {
  // NULL makeVDevice: NCCL merges no NICs (so the 8-device v12 limit never reaches Tally).
  EXPECT_EQ(ncclNetPlugin_v12.makeVDevice, nullptr);
  EXPECT_EQ(ncclCollNetPlugin_v12.makeVDevice, nullptr);
}

}  // namespace
}  // namespace tally::plugin
