// SPDX-License-Identifier: Apache-2.0
// The driver's views of the built plugin's tables as each NCCL sees them: which CollNet
// all-gather / reduce-scatter slots a view offers (CallingNccl::k228, the table as it is, and
// k230, NCCL 2.30's adapters for v8 to v11), the limits of the v8 adapter, and the v12 property
// fields (rail and plane ids) through the version-free NetProperties.
#include <gtest/gtest.h>

#include <cstdio>

#include "test/support/cluster.h"

namespace tally::functional {
namespace {

std::unique_ptr<driver::PluginLibrary> openLibrary() {
  std::unique_ptr<driver::PluginLibrary> lib;
  Status s = driver::PluginLibrary::open(pluginPath(), &lib);
  EXPECT_TRUE(s.isOk()) << s.toString();
  return lib;
}

TEST(TableViews, LibraryExportsV8ToV12) {
  if (pluginPath().empty()) GTEST_SKIP() << "the plugin was not built";
  auto lib = openLibrary();
  ASSERT_NE(lib, nullptr);
  const std::vector<int> all = {8, 9, 10, 11, 12};
  EXPECT_EQ(lib->netVersions(), all);
  EXPECT_EQ(lib->collNetVersions(), all);
  std::unique_ptr<driver::CollNetApi> view;
  EXPECT_EQ(lib->collNet(13, &view).code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(lib->collNet(7, &view, driver::CallingNccl::k230).code(), StatusCode::kInvalidUsage);
}

// Tally fills iallgather and ireducescatter in every table, so both views offer both collectives
// for every version: k228 shows the slots as they are, k230 wraps v8 to v11 as NCCL 2.30 does.
TEST(TableViews, WhichViewsOfferAllGatherAndReduceScatter) {
  if (pluginPath().empty()) GTEST_SKIP() << "the plugin was not built";
  auto lib = openLibrary();
  ASSERT_NE(lib, nullptr);
  for (int v = driver::kMinTableVersion; v <= driver::kMaxTableVersion; ++v) {
    std::unique_ptr<driver::CollNetApi> as_is, nccl230;
    ASSERT_TRUE(lib->collNet(v, &as_is).isOk());
    ASSERT_TRUE(lib->collNet(v, &nccl230, driver::CallingNccl::k230).isOk());
    EXPECT_EQ(as_is->version(), v);
    EXPECT_TRUE(as_is->hasAllGather()) << "v" << v;
    EXPECT_TRUE(as_is->hasReduceScatter()) << "v" << v;
    EXPECT_TRUE(nccl230->hasAllGather()) << "v" << v;
    EXPECT_TRUE(nccl230->hasReduceScatter()) << "v" << v;
  }
}

// Every table's slots, through both views, refuse a call without a collComm or with a bad part
// list with ncclInternalError (NCCL reports it) instead of crashing.
TEST(TableViews, SlotsRefuseBadCallsCleanly) {
  if (pluginPath().empty()) GTEST_SKIP() << "the plugin was not built";
  auto lib = openLibrary();
  ASSERT_NE(lib, nullptr);
  char buf[64] = {};
  driver::CollSge part{nullptr, buf, sizeof(buf)};
  for (auto nccl : {driver::CallingNccl::k228, driver::CallingNccl::k230}) {
    for (int v = driver::kMinTableVersion; v <= driver::kMaxTableVersion; ++v) {
      std::unique_ptr<driver::CollNetApi> view;
      ASSERT_TRUE(lib->collNet(v, &view, nccl).isOk());
      void* request = nullptr;
      EXPECT_EQ(view->iallgather(nullptr, buf, 1, &part, 64, 0, 64, nullptr, &request),
                ncclInternalError)
          << "v" << v;
      EXPECT_EQ(view->ireducescatter(nullptr, 1, &part, buf, 64, 0, 64, ncclFloat32, ncclSum,
                                     nullptr, &request),
                ncclInternalError)
          << "v" << v;
      EXPECT_EQ(request, nullptr);
    }
  }
}

// NCCL's v8 adapter takes one part of at most 512 MiB (the v8 SGE size is 32 bits) and fails
// anything else before calling the plugin. A k230 view always calls the slot, so a refusal here
// (rather than a crash through a NULL slot) shows the view checked first.
TEST(TableViews, V8TakesOnePartOfAtMost512MiB) {
  if (pluginPath().empty()) GTEST_SKIP() << "the plugin was not built";
  auto lib = openLibrary();
  ASSERT_NE(lib, nullptr);
  std::unique_ptr<driver::CollNetApi> view;
  ASSERT_TRUE(lib->collNet(8, &view, driver::CallingNccl::k230).isOk());
  char buf[64] = {};
  driver::CollSge two[2] = {{nullptr, buf, 32}, {nullptr, buf + 32, 32}};
  driver::CollSge big{nullptr, buf, (size_t{512} << 20) + 1};
  void* request = nullptr;
  EXPECT_EQ(view->iallgather(nullptr, buf, 2, two, 32, 0, 64, nullptr, &request),
            ncclInternalError);
  EXPECT_EQ(view->iallgather(nullptr, buf, 1, &big, big.size, 0, big.size, nullptr, &request),
            ncclInternalError);
  EXPECT_EQ(view->ireducescatter(nullptr, 2, two, buf, 32, 0, 64, ncclFloat32, ncclSum, nullptr,
                                 &request),
            ncclInternalError);
  EXPECT_EQ(view->ireducescatter(nullptr, 1, &big, buf, big.size, 0, big.size, ncclFloat32, ncclSum,
                                 nullptr, &request),
            ncclInternalError);
  EXPECT_EQ(request, nullptr);
}

// NetProperties carries the v12 rail and plane ids (-1 from Tally, and -1 for a version without
// them); every other field is the same through v11 and v12, for net and CollNet.
TEST(TableViews, V12PropertiesThroughTheDriver) {
  if (pluginPath().empty()) GTEST_SKIP() << "the plugin was not built";
  std::string why = runAll(1, [&](int) -> int {
    setWorkerEnvironment("127.0.0.1:1");  // a reducer address: CollNet reports devices
    std::unique_ptr<driver::PluginLibrary> lib;
    std::unique_ptr<driver::NetApi> net11, net12;
    std::unique_ptr<driver::CollNetApi> coll11, coll12;
    if (!openNet(11, &lib, &net11) || !check(-1, lib->net(12, &net12), "net v12") ||
        !check(-1, lib->collNet(11, &coll11), "collnet v11") ||
        !check(-1, lib->collNet(12, &coll12), "collnet v12"))
      return 2;
    void* ctx11 = nullptr;
    void* ctx12 = nullptr;
    void* cctx11 = nullptr;
    void* cctx12 = nullptr;
    if (net11->init(1, &ctx11) != ncclSuccess || net12->init(2, &ctx12) != ncclSuccess ||
        coll11->init(3, &cctx11) != ncclSuccess || coll12->init(4, &cctx12) != ncclSuccess) {
      std::fprintf(stderr, "init failed\n");
      return 3;
    }
    int failures = 0;
    auto expect = [&](bool ok, const char* what) {
      if (!ok) {
        std::fprintf(stderr, "%s\n", what);
        ++failures;
      }
    };
    driver::NetProperties p11, p12, c11, c12;
    expect(net11->getProperties(0, &p11) == ncclSuccess, "net v11 getProperties");
    expect(net12->getProperties(0, &p12) == ncclSuccess, "net v12 getProperties");
    expect(coll11->getProperties(0, &c11) == ncclSuccess, "collnet v11 getProperties");
    expect(coll12->getProperties(0, &c12) == ncclSuccess, "collnet v12 getProperties");
    for (const driver::NetProperties* p : {&p11, &p12, &c11, &c12}) {
      expect(p->rail_id == -1 && p->plane_id == -1, "rail or plane id is not -1");
    }
    for (auto pair : {std::make_pair(&p11, &p12), std::make_pair(&c11, &c12)}) {
      const driver::NetProperties& a = *pair.first;
      const driver::NetProperties& b = *pair.second;
      expect(!a.name.empty() && a.name == b.name, "name differs or is empty");
      expect(a.guid == b.guid && a.ptr_support == b.ptr_support && a.speed == b.speed &&
                 a.max_comms == b.max_comms && a.max_recvs == b.max_recvs,
             "a v11 field differs in v12");
      expect(a.vdevs == 1 && b.vdevs == 1, "vProps.ndevs is not 1");
      expect(a.max_p2p_bytes == b.max_p2p_bytes && a.max_coll_bytes == b.max_coll_bytes &&
                 a.max_coll_bytes > 0,
             "maxP2pBytes or maxCollBytes differs");
      expect(a.max_multi_request_size == 1 && b.max_multi_request_size == 1,
             "maxMultiRequestSize is not 1");
    }
    expect(c12.ptr_support == NCCL_PTR_HOST, "CollNet v12 offers more than host memory");
    net11->finalize(ctx11);
    net12->finalize(ctx12);
    coll11->finalize(cctx11);
    coll12->finalize(cctx12);
    return failures == 0 ? 0 : 4;
  });
  EXPECT_EQ(why, "");
}

}  // namespace
}  // namespace tally::functional
