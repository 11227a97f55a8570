// SPDX-License-Identifier: Apache-2.0
// The tuner tables (tables_tuner.cc over tuner.h): the CollNet entries of an NCCL-shaped table
// are the model's cost and nothing else changes; v2 picks CollNet where the model says so; v6's
// chunk; and ranks whose hosts measure different link speeds still make the same choice.
#include "plugin/tuner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "model/cost_table.h"
#include "test/plugin/plugin_test_util.h"

extern "C" const ncclTuner_v2_t ncclTunerPlugin_v2;
extern "C" const ncclTuner_v5_t ncclTunerPlugin_v5;
extern "C" const ncclTuner_v6_t ncclTunerPlugin_v6;

namespace tally::plugin {
namespace {

constexpr int kAlgos = 7;
constexpr int kProtos = 3;

// A device that reports only a speed, as a host's interface would.
class SpeedDevice final : public transport::Device {
 public:
  explicit SpeedDevice(int mbps) {
    props_.name = "eth0";
    props_.speed_mbps = mbps;
  }
  const transport::DeviceProperties& properties() const override { return props_; }
  Status listen(std::unique_ptr<transport::Listener>*) override {
    return Status::internal("not used");
  }
  Status connect(const transport::ConnectHandle&, const transport::ConnectionOptions&,
                 std::unique_ptr<transport::PendingConnection>*) override {
    return Status::internal("not used");
  }

 private:
  transport::DeviceProperties props_;
};

void fillTable(float (*table)[kProtos]) {
  for (int a = 0; a < kAlgos; ++a) {
    for (int p = 0; p < kProtos; ++p) table[a][p] = 50.0f + 7.0f * a + p;
  }
}

TEST(Tuner, V5ChangesOnlyTheCollNetEntriesWithReducers) {
  testing::installLoopbackState();  // one reducer, 127.0.0.1:1
  PluginState* state = PluginState::globalIfLoaded();
  ASSERT_NE(state, nullptr);
  void* ctx = nullptr;
  ASSERT_EQ(ncclTunerPlugin_v5.init(&ctx, 1, 8, 8, nullptr, nullptr, nullptr), ncclSuccess);
  ASSERT_NE(ctx, nullptr);
  for (size_t bytes : {size_t{4096}, size_t{1} << 20, size_t{1} << 28}) {
    float table[kAlgos][kProtos];
    fillTable(table);
    table[NCCL_ALGO_COLLNET_DIRECT][NCCL_PROTO_SIMPLE] = NCCL_ALGO_PROTO_IGNORE;
    float before[kAlgos][kProtos];
    std::copy(&table[0][0], &table[0][0] + kAlgos * kProtos, &before[0][0]);
    int channels = 0;
    ASSERT_EQ(ncclTunerPlugin_v5.getCollInfo(ctx, ncclFuncAllReduce, bytes, 1,
                                             reinterpret_cast<float**>(table), kAlgos, kProtos, 0,
                                             &channels),
              ncclSuccess);
    const double want =
        model::collNetCostMicros(tunerSetupFor(*state, 8, 8, false), bytes,
                                 model::ringCostInTable(&before[0][0], kAlgos, kProtos));
    ASSERT_GT(want, 0);
    EXPECT_FLOAT_EQ(table[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE], static_cast<float>(want));
    EXPECT_EQ(table[NCCL_ALGO_COLLNET_DIRECT][NCCL_PROTO_SIMPLE], NCCL_ALGO_PROTO_IGNORE);
    for (int a = 0; a < kAlgos; ++a) {
      for (int p = 0; p < kProtos; ++p) {
        if (a == NCCL_ALGO_COLLNET_CHAIN && p == NCCL_PROTO_SIMPLE) continue;
        EXPECT_EQ(table[a][p], before[a][p]) << bytes << ": " << a << "/" << p;
      }
    }
    EXPECT_EQ(channels, 0);  // NCCL's to choose
    // Other collectives: untouched.
    fillTable(table);
    ASSERT_EQ(ncclTunerPlugin_v5.getCollInfo(ctx, ncclFuncAllGather, bytes, 1,
                                             reinterpret_cast<float**>(table), kAlgos, kProtos, 0,
                                             &channels),
              ncclSuccess);
    fillTable(before);
    EXPECT_TRUE(std::equal(&table[0][0], &table[0][0] + kAlgos * kProtos, &before[0][0]));
  }
  EXPECT_EQ(ncclTunerPlugin_v5.finalize(ctx), ncclSuccess);
}

TEST(Tuner, V6ChunkFollowsTheModelOnlyForCollNet) {
  testing::installLoopbackState();
  PluginState* state = PluginState::globalIfLoaded();
  ASSERT_NE(state, nullptr);
  void* ctx = nullptr;
  ASSERT_EQ(ncclTunerPlugin_v6.init(&ctx, 1, 64, 64, nullptr, nullptr, nullptr), ncclSuccess);
  const size_t bytes = size_t{1} << 30;
  size_t chunk = 256 * 1024;
  ASSERT_EQ(ncclTunerPlugin_v6.getChunkSize(ctx, ncclFuncAllReduce, bytes, NCCL_ALGO_COLLNET_CHAIN,
                                            NCCL_PROTO_SIMPLE, 2, &chunk),
            ncclSuccess);
  EXPECT_EQ(chunk,
            model::tunerCollNetChunk(tunerSetupFor(*state, 64, 64, true), bytes, 2, 256 * 1024));
  size_t ring_chunk = 128 * 1024;
  ASSERT_EQ(ncclTunerPlugin_v6.getChunkSize(ctx, ncclFuncAllReduce, bytes, NCCL_ALGO_RING,
                                            NCCL_PROTO_SIMPLE, 2, &ring_chunk),
            ncclSuccess);
  EXPECT_EQ(ring_chunk, size_t{128 * 1024});
  EXPECT_EQ(ncclTunerPlugin_v6.finalize(ctx), ncclSuccess);
}

TEST(Tuner, V2PicksCollNetOnlyWhereOffered) {
  testing::installLoopbackState();
  void* ctx = nullptr;
  ASSERT_EQ(ncclTunerPlugin_v2.init(8, 8, nullptr, &ctx), ncclSuccess);
  int algo = NCCL_ALGO_UNDEF, proto = NCCL_PROTO_UNDEF, channels = 0;
  // One reducer for 8 hosts: the ring is cheaper, so NCCL keeps its choice.
  ASSERT_EQ(ncclTunerPlugin_v2.getCollInfo(ctx, ncclFuncAllReduce, size_t{1} << 26, 1, 0, 1, &algo,
                                           &proto, &channels),
            ncclSuccess);
  EXPECT_EQ(algo, NCCL_ALGO_UNDEF);
  EXPECT_EQ(proto, NCCL_PROTO_UNDEF);
  EXPECT_EQ(ncclTunerPlugin_v2.destroy(ctx), ncclSuccess);
}

TEST(Tuner, RanksWithDifferentInterfaceSpeedsChooseAlike) {
  auto values = testing::loopbackValues();
  values["TALLY_REDUCERS"] =
      "10.0.0.1:1,10.0.0.2:1,10.0.0.3:1,10.0.0.4:1,10.0.0.5:1,"
      "10.0.0.6:1,10.0.0.7:1,10.0.0.8:1";
  std::vector<std::unique_ptr<PluginState>> ranks;
  for (int mbps : {1000, 25000, 100000}) {
    std::vector<std::shared_ptr<transport::Device>> devices{std::make_shared<SpeedDevice>(mbps)};
    ranks.push_back(std::make_unique<PluginState>(testing::paramsFrom(values), devices));
  }
  // What each host measures differs...
  EXPECT_NE(ranks[0]->device(0)->properties().speed_mbps,
            ranks[2]->device(0)->properties().speed_mbps);
  // ...and would change the choice if the model used it (4 hosts: CollNet from 18 KiB at 1 Gb/s,
  // from 1 KiB at 100 Gb/s): the control that this test can fail.
  bool speed_matters = false;
  for (size_t bytes = 1024; bytes <= (size_t{1} << 30); bytes *= 2) {
    model::CollNetSetup slow = tunerSetupFor(*ranks[0], 4, 4, false);
    model::CollNetSetup fast = slow;
    slow.link_mbps = 1000;
    fast.link_mbps = 100000;
    speed_matters |= model::chooseAllReduce(slow, bytes).algorithm !=
                     model::chooseAllReduce(fast, bytes).algorithm;
  }
  EXPECT_TRUE(speed_matters);
  // The tuner's tables agree at every size, for 4 and for 8 hosts.
  for (size_t hosts : {size_t{4}, size_t{8}}) {
    for (size_t bytes = 1024; bytes <= (size_t{1} << 30); bytes = bytes * 3 / 2) {
      float first[kAlgos][kProtos];
      for (size_t r = 0; r < ranks.size(); ++r) {
        const model::CollNetSetup setup = tunerSetupFor(*ranks[r], hosts, hosts, false);
        EXPECT_EQ(setup.reducers, 8);
        float table[kAlgos][kProtos];
        fillTable(table);
        model::applyCollNetCosts(setup, model::kFuncAllReduce, bytes, &table[0][0], kAlgos,
                                 kProtos);
        if (r == 0) {
          std::copy(&table[0][0], &table[0][0] + kAlgos * kProtos, &first[0][0]);
        } else {
          EXPECT_TRUE(std::equal(&table[0][0], &table[0][0] + kAlgos * kProtos, &first[0][0]))
              << "rank " << r << " at " << bytes << " bytes";
        }
        EXPECT_EQ(
            model::chooseAllReduce(setup, bytes).algorithm,
            model::chooseAllReduce(tunerSetupFor(*ranks[0], hosts, hosts, false), bytes).algorithm);
      }
    }
  }
}

}  // namespace
}  // namespace tally::plugin
