// SPDX-License-Identifier: Apache-2.0
// The ABI headers' static asserts run by including them; these tests pin what the exported
// tables contain.
#include "plugin/abi/abi.h"

#include <gtest/gtest.h>

#include <cstring>

#include "plugin/coll_comm.h"
#include "plugin/net_comm.h"
#include "plugin/state.h"
#include "plugin_test_util.h"

namespace {

static_assert(sizeof(ncclNet_v8_t) == 152);
static_assert(sizeof(ncclNet_v11_t) == 176);
static_assert(sizeof(ncclCollNet_v11_t) == 152);
static_assert(offsetof(ncclNetProperties_v11_t, maxCollBytes) == 96);
static_assert(sizeof(ncclNet_v12_t) == 176);
static_assert(sizeof(ncclCollNet_v12_t) == 152);
static_assert(sizeof(ncclNetProperties_v12_t) == 128);
static_assert(sizeof(ncclNetVDeviceProps_v12_t) == 36);
static_assert(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104);
static_assert(offsetof(ncclNetProperties_v12_t, maxCollBytes) == 112);
static_assert(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120);
static_assert(offsetof(ncclNetProperties_v12_t, railId) == 124);
static_assert(offsetof(ncclNetProperties_v12_t, planeId) == 126);
static_assert(NCCL_NET_ID_UNDEF == -1);
static_assert(sizeof(tally::plugin::NetHandle) <= NCCL_NET_HANDLE_MAXSIZE);
static_assert(tally::plugin::kMaxSendRequests == NCCL_NET_MAX_REQUESTS * 8);

TEST(PluginAbi, EveryTableIsNamedTally) {
  EXPECT_STREQ(ncclNetPlugin_v8.name, "Tally");
  EXPECT_STREQ(ncclNetPlugin_v9.name, "Tally");
  EXPECT_STREQ(ncclNetPlugin_v10.name, "Tally");
  EXPECT_STREQ(ncclNetPlugin_v11.name, "Tally");
  EXPECT_STREQ(ncclNetPlugin_v12.name, "Tally");
  EXPECT_STREQ(ncclCollNetPlugin_v8.name, "Tally");
  EXPECT_STREQ(ncclCollNetPlugin_v9.name, "Tally");
  EXPECT_STREQ(ncclCollNetPlugin_v10.name, "Tally");
  EXPECT_STREQ(ncclCollNetPlugin_v11.name, "Tally");
  EXPECT_STREQ(ncclCollNetPlugin_v12.name, "Tally");
}

TEST(PluginAbi, NetV11SlotsThatMustBeSetAreSet) {
  const ncclNet_v11_t& t = ncclNetPlugin_v11;
  for (auto fn :
       {(void*)t.init, (void*)t.devices, (void*)t.getProperties, (void*)t.listen, (void*)t.connect,
        (void*)t.accept, (void*)t.regMr, (void*)t.deregMr, (void*)t.isend, (void*)t.irecv,
        (void*)t.iflush, (void*)t.test, (void*)t.closeSend, (void*)t.closeRecv,
        (void*)t.closeListen, (void*)t.finalize, (void*)t.setNetAttr}) {
    EXPECT_NE(fn, nullptr);
  }
  // Set in every version: NCCL calls it only on devices that advertise NCCL_PTR_DMABUF.
  EXPECT_NE(t.regMrDmaBuf, nullptr);
  EXPECT_NE(ncclNetPlugin_v8.regMrDmaBuf, nullptr);
  EXPECT_NE(ncclNetPlugin_v9.regMrDmaBuf, nullptr);
  EXPECT_NE(ncclNetPlugin_v10.regMrDmaBuf, nullptr);
  EXPECT_EQ(t.getDeviceMr, nullptr);
  EXPECT_EQ(t.irecvConsumed, nullptr);
  EXPECT_EQ(t.makeVDevice, nullptr);
}

TEST(PluginAbi, CollNetV11SlotsThatMustBeSetAreSet) {
  const ncclCollNet_v11_t& t = ncclCollNetPlugin_v11;
  for (auto fn : {(void*)t.init, (void*)t.devices, (void*)t.getProperties, (void*)t.listen,
                  (void*)t.connect, (void*)t.reduceSupport, (void*)t.regMr, (void*)t.deregMr,
                  (void*)t.iallreduce, (void*)t.iallgather, (void*)t.ireducescatter,
                  (void*)t.iflush, (void*)t.test, (void*)t.closeColl, (void*)t.closeListen,
                  (void*)t.finalize}) {
    EXPECT_NE(fn, nullptr);
  }
  EXPECT_EQ(t.makeVDevice, nullptr);
}

// NCCL 2.30 calls a v8 to v11 table's all-gather and reduce-scatter slots through adapters that
// never check them for NULL: no table may leave them empty.
TEST(PluginAbi, EveryCollNetTableHasAllGatherAndReduceScatter) {
  EXPECT_NE((void*)ncclCollNetPlugin_v8.iallgather, nullptr);
  EXPECT_NE((void*)ncclCollNetPlugin_v8.ireducescatter, nullptr);
  EXPECT_NE((void*)ncclCollNetPlugin_v9.iallgather, nullptr);
  EXPECT_NE((void*)ncclCollNetPlugin_v9.ireducescatter, nullptr);
  EXPECT_NE((void*)ncclCollNetPlugin_v10.iallgather, nullptr);
  EXPECT_NE((void*)ncclCollNetPlugin_v10.ireducescatter, nullptr);
  EXPECT_NE((void*)ncclCollNetPlugin_v11.iallgather, nullptr);
  EXPECT_NE((void*)ncclCollNetPlugin_v11.ireducescatter, nullptr);
  EXPECT_NE((void*)ncclCollNetPlugin_v12.iallgather, nullptr);
  EXPECT_NE((void*)ncclCollNetPlugin_v12.ireducescatter, nullptr);
}

TEST(PluginAbi, AdaptersAreSharedAcrossVersionsWithoutSignatureChange) {
  // v10 changed no CollNet signature: its table equals v9's slot for slot.
  EXPECT_EQ(0,
            std::memcmp(&ncclCollNetPlugin_v9, &ncclCollNetPlugin_v10, sizeof(ncclCollNet_v9_t)));
  // v11 net isend/irecv are the v10 adapters.
  EXPECT_EQ((void*)ncclNetPlugin_v11.isend, (void*)ncclNetPlugin_v10.isend);
  EXPECT_EQ((void*)ncclNetPlugin_v11.irecv, (void*)ncclNetPlugin_v10.irecv);
  EXPECT_EQ((void*)ncclNetPlugin_v8.test, (void*)ncclNetPlugin_v11.test);
}

// v12 changes only the property layout: every slot but getProperties is v11's, slot for slot.
TEST(PluginAbi, V12DiffersFromV11OnlyInGetProperties) {
  static_assert(sizeof(ncclNet_v12_t) == sizeof(ncclNet_v11_t));
  static_assert(sizeof(ncclCollNet_v12_t) == sizeof(ncclCollNet_v11_t));
  EXPECT_NE((void*)ncclNetPlugin_v12.getProperties, (void*)ncclNetPlugin_v11.getProperties);
  EXPECT_NE(ncclNetPlugin_v12.getProperties, nullptr);
  ncclNet_v12_t net12 = ncclNetPlugin_v12;
  ncclNet_v11_t net11 = ncclNetPlugin_v11;
  net12.getProperties = nullptr;
  net11.getProperties = nullptr;
  EXPECT_EQ(0, std::memcmp(&net12, &net11, sizeof(net12)));

  EXPECT_NE((void*)ncclCollNetPlugin_v12.getProperties, (void*)ncclCollNetPlugin_v11.getProperties);
  EXPECT_NE(ncclCollNetPlugin_v12.getProperties, nullptr);
  ncclCollNet_v12_t coll12 = ncclCollNetPlugin_v12;
  ncclCollNet_v11_t coll11 = ncclCollNetPlugin_v11;
  coll12.getProperties = nullptr;
  coll11.getProperties = nullptr;
  EXPECT_EQ(0, std::memcmp(&coll12, &coll11, sizeof(coll12)));
}

}  // namespace
