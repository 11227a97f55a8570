// SPDX-License-Identifier: Apache-2.0
// Entry points that need no network partner: error mapping, the reduceSupport matrix, logging
// through NCCL's logger, finalize of foreign contexts, argument validation, CollNet decline.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/coll_api.h"
#include "plugin/edge.h"
#include "plugin_test_util.h"

namespace tally::plugin {
namespace {

using testing::CapturedLine;
using testing::captureLogger;

TEST(PluginErrors, StatusCodesMapAsDocumented) {
  EXPECT_EQ(toNcclResult(StatusCode::kOk), ncclSuccess);
  EXPECT_EQ(toNcclResult(StatusCode::kRemote), ncclRemoteError);
  EXPECT_EQ(toNcclResult(StatusCode::kTimeout), ncclRemoteError);
  EXPECT_EQ(toNcclResult(StatusCode::kSystem), ncclSystemError);
  EXPECT_EQ(toNcclResult(StatusCode::kInternal), ncclInternalError);
  EXPECT_EQ(toNcclResult(StatusCode::kInvalidUsage), ncclInvalidUsage);
}

TEST(PluginErrors, GuardCatchesExceptions) {
  EXPECT_EQ(guard("t", []() -> Status { throw std::runtime_error("boom"); }), ncclInternalError);
  EXPECT_EQ(guard("t", []() -> Status { throw std::bad_alloc(); }), ncclSystemError);
  EXPECT_EQ(guard("t", []() -> Status { throw 7; }), ncclInternalError);
  EXPECT_EQ(guard("t", []() -> Status { return Status::remote("gone"); }), ncclRemoteError);
  EXPECT_EQ(guard("t", []() -> Status { return Status::ok(); }), ncclSuccess);
}

TEST(PluginConvert, TypesAndOps) {
  DataType t;
  ReduceOp o;
  EXPECT_TRUE(toDataType(ncclBfloat16, &t));
  EXPECT_EQ(t, DataType::kBfloat16);
  EXPECT_TRUE(toDataType(ncclFloat8e5m2, &t));
  EXPECT_EQ(t, DataType::kFloat8e5m2);
  EXPECT_FALSE(toDataType(ncclNumTypes, &t));
  EXPECT_FALSE(toDataType(static_cast<ncclDataType_t>(-1), &t));
  EXPECT_TRUE(toReduceOp(ncclMin, &o));
  EXPECT_EQ(o, ReduceOp::kMin);
  EXPECT_FALSE(toReduceOp(ncclAvg, &o));
  EXPECT_FALSE(toReduceOp(static_cast<ncclRedOp_t>(17), &o));
}

TEST(PluginCollNet, ReduceSupportMatrix) {
  for (int t = 0; t < 12; ++t) {
    for (int o = 0; o < 4; ++o) {
      int supported = -1;
      ASSERT_EQ(ncclCollNetPlugin_v11.reduceSupport(static_cast<ncclDataType_t>(t),
                                                    static_cast<ncclRedOp_t>(o), &supported),
                ncclSuccess);
      EXPECT_EQ(supported, 1) << "type " << t << " op " << o;
    }
  }
  // Everything else: success with "no" (an error is not a no).
  const std::pair<int, int> unsupported[] = {{0, ncclAvg}, {7, ncclAvg}, {7, 5}, {7, 1000},
                                             {12, 0},      {-1, 0},      {99, 2}};
  for (auto [t, o] : unsupported) {
    int supported = -1;
    ASSERT_EQ(ncclCollNetPlugin_v8.reduceSupport(static_cast<ncclDataType_t>(t),
                                                 static_cast<ncclRedOp_t>(o), &supported),
              ncclSuccess);
    EXPECT_EQ(supported, 0) << "type " << t << " op " << o;
  }
  EXPECT_EQ(ncclCollNetPlugin_v11.reduceSupport(ncclFloat, ncclSum, nullptr), ncclInternalError);
}

TEST(PluginNet, InitInstallsTheNcclLoggerWithPrefix) {
  testing::installLoopbackState();
  void* ctx = nullptr;
  ncclNetCommConfig_v11_t config = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
  ASSERT_EQ(ncclNetPlugin_v11.init(&ctx, 0x1234, &config, captureLogger, nullptr), ncclSuccess);
  ASSERT_NE(ctx, nullptr);
  // A misuse: logged as WARN with NCCL_ALL.
  int done = 0;
  EXPECT_EQ(ncclNetPlugin_v11.test(nullptr, &done, nullptr), ncclInternalError);
  {
    std::lock_guard<std::mutex> lock(testing::capturedMu());
    ASSERT_FALSE(testing::capturedLines().empty());
    bool saw_warn = false;
    for (const CapturedLine& c : testing::capturedLines()) {
      EXPECT_EQ(c.text.rfind("NET/Tally : ", 0), 0u) << c.text;
      if (c.level == NCCL_LOG_WARN) {
        saw_warn = true;
        EXPECT_EQ(c.flags, static_cast<unsigned long>(NCCL_ALL));
        EXPECT_NE(c.text.find("test"), std::string::npos) << c.text;
      } else {
        EXPECT_EQ(c.level, NCCL_LOG_INFO);
      }
    }
    EXPECT_TRUE(saw_warn);
  }
  EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx), ncclSuccess);
}

TEST(PluginNet, FinalizeAcceptsAnyContext) {
  int not_a_ctx = 0;
  EXPECT_EQ(ncclNetPlugin_v11.finalize(nullptr), ncclSuccess);
  EXPECT_EQ(ncclNetPlugin_v11.finalize(&not_a_ctx), ncclSuccess);
  EXPECT_EQ(ncclCollNetPlugin_v11.finalize(nullptr), ncclSuccess);
  EXPECT_EQ(ncclCollNetPlugin_v11.finalize(&not_a_ctx), ncclSuccess);
}

TEST(PluginNet, ValidatesArguments) {
  testing::installLoopbackState();
  void* ctx = nullptr;
  ASSERT_EQ(ncclNetPlugin_v11.init(&ctx, 1, nullptr, nullptr, nullptr), ncclSuccess);
  int ndev = 0;
  ASSERT_EQ(ncclNetPlugin_v11.devices(&ndev), ncclSuccess);
  ncclNetProperties_v11_t props;
  EXPECT_EQ(ncclNetPlugin_v11.getProperties(ndev, &props), ncclInternalError);
  EXPECT_EQ(ncclNetPlugin_v11.getProperties(-1, &props), ncclInternalError);
  EXPECT_EQ(ncclNetPlugin_v11.devices(nullptr), ncclInternalError);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* comm = nullptr;
  EXPECT_EQ(ncclNetPlugin_v11.listen(ctx, ndev, handle, &comm), ncclInternalError);
  int bogus[16] = {};
  void* request = nullptr;
  EXPECT_EQ(ncclNetPlugin_v11.isend(bogus, handle, 8, 0, nullptr, nullptr, &request),
            ncclInternalError);
  EXPECT_EQ(ncclNetPlugin_v11.closeSend(bogus), ncclInternalError);
  EXPECT_EQ(ncclNetPlugin_v11.closeSend(nullptr), ncclSuccess);
  void* flush = reinterpret_cast<void*>(1);
  EXPECT_EQ(ncclNetPlugin_v11.iflush(nullptr, 1, nullptr, nullptr, nullptr, &flush),
            ncclInternalError);
  EXPECT_EQ(flush, nullptr);
  int sizes[1] = {8};
  void* data[1] = {handle};
  EXPECT_EQ(ncclNetPlugin_v11.iflush(bogus, 1, data, sizes, nullptr, &flush), ncclInternalError);
  void* mr = nullptr;
  EXPECT_EQ(ncclNetPlugin_v11.regMrDmaBuf(bogus, handle, 8, NCCL_PTR_CUDA, 0, 3, &mr),
            ncclInternalError);
  ncclNetAttr_v11_t attr;
  std::memset(&attr, 0xff, sizeof(attr));
  EXPECT_EQ(ncclNetPlugin_v11.setNetAttr(ctx, &attr), ncclSuccess);
  EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx), ncclSuccess);
}

// The WARN lines logged since `from`, joined.
std::string warnsSince(size_t from) {
  std::lock_guard<std::mutex> lock(testing::capturedMu());
  std::string text;
  const std::vector<CapturedLine>& lines = testing::capturedLines();
  for (size_t i = from; i < lines.size(); ++i) {
    if (lines[i].level == NCCL_LOG_WARN) text += lines[i].text + "\n";
  }
  return text;
}
size_t linesNow() {
  std::lock_guard<std::mutex> lock(testing::capturedMu());
  return testing::capturedLines().size();
}

// v8's irecv (int sizes) refuses what v9+ refuse, with the same error code and the same WARN.
TEST(PluginNet, V8IrecvRefusesBadArgumentsWithAWarnLikeV9) {
  testing::installLoopbackState();
  void* ctx = nullptr;
  ncclNetCommConfig_v11_t config = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
  ASSERT_EQ(ncclNetPlugin_v11.init(&ctx, 0x88, &config, captureLogger, nullptr), ncclSuccess);
  void* send = nullptr;
  void* recv = nullptr;
  ASSERT_NO_FATAL_FAILURE(testing::connectPair(ncclNetPlugin_v11, ctx, &send, &recv));
  char buf[64];
  void* mr = nullptr;
  ASSERT_EQ(ncclNetPlugin_v11.regMr(recv, buf, sizeof(buf), NCCL_PTR_HOST, &mr), ncclSuccess);
  constexpr int kTooMany = 9;
  void* data[kTooMany];
  int sizes8[kTooMany];
  size_t sizes9[kTooMany];
  int tags[kTooMany];
  void* mrs[kTooMany];
  for (int i = 0; i < kTooMany; ++i) {
    data[i] = buf;
    sizes8[i] = 8;
    sizes9[i] = 8;
    tags[i] = i;
    mrs[i] = mr;
  }
  struct Case {
    int n;
    bool null_sizes;
    const char* warn;
  };
  for (const Case& c :
       {Case{kTooMany, false, "irecv of 9 buffers; maxRecvs is 8"},
        Case{0, false, "irecv of 0 buffers; maxRecvs is 8"}, Case{1, true, "sizes is NULL"}}) {
    void* request = reinterpret_cast<void*>(1);
    size_t before = linesNow();
    EXPECT_EQ(ncclNetPlugin_v9.irecv(recv, c.n, data, c.null_sizes ? nullptr : sizes9, tags, mrs,
                                     &request),
              ncclInternalError);
    const std::string v9_warns = warnsSince(before);
    EXPECT_NE(v9_warns.find(c.warn), std::string::npos) << v9_warns;

    request = reinterpret_cast<void*>(1);
    before = linesNow();
    EXPECT_EQ(ncclNetPlugin_v8.irecv(recv, c.n, data, c.null_sizes ? nullptr : sizes8, tags, mrs,
                                     &request),
              ncclInternalError);
    EXPECT_EQ(request, nullptr);
    EXPECT_EQ(warnsSince(before), v9_warns) << "v8 warns as v9 does for n=" << c.n;
  }
  // A negative int size, which only v8 can be given.
  sizes8[0] = -5;
  size_t before = linesNow();
  void* request = nullptr;
  EXPECT_EQ(ncclNetPlugin_v8.irecv(recv, 1, data, sizes8, tags, mrs, &request), ncclInternalError);
  EXPECT_NE(warnsSince(before).find("irecv of a negative size (-5) for buffer 0"),
            std::string::npos)
      << warnsSince(before);
  EXPECT_EQ(ncclNetPlugin_v11.deregMr(recv, mr), ncclSuccess);
  EXPECT_EQ(ncclNetPlugin_v11.closeSend(send), ncclSuccess);
  EXPECT_EQ(ncclNetPlugin_v11.closeRecv(recv), ncclSuccess);
  EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx), ncclSuccess);
}

// One CollNet device, the same on every host, mirroring net device 0.
TEST(PluginCollNet, OneDeviceMirroringNetDeviceZero) {
  testing::installLoopbackState();  // TALLY_REDUCERS set
  void* ctx = nullptr;
  ASSERT_EQ(ncclCollNetPlugin_v11.init(&ctx, 7, nullptr), ncclSuccess);
  ASSERT_NE(ctx, nullptr);
  int ndev = 0, ncoll = 0;
  ASSERT_EQ(ncclNetPlugin_v11.devices(&ndev), ncclSuccess);
  ASSERT_EQ(ncclCollNetPlugin_v11.devices(&ncoll), ncclSuccess);
  EXPECT_EQ(ncoll, 1);
  ASSERT_GE(ndev, 1);
  ncclNetProperties_v11_t net, coll;
  ASSERT_EQ(ncclNetPlugin_v11.getProperties(0, &net), ncclSuccess);
  ASSERT_EQ(ncclCollNetPlugin_v11.getProperties(0, &coll), ncclSuccess);
  EXPECT_STREQ(net.name, coll.name);
  EXPECT_EQ(coll.ptrSupport, NCCL_PTR_HOST);
  EXPECT_GT(coll.maxCollBytes, 0u);
  EXPECT_LE(coll.maxCollBytes, NCCL_MAX_NET_SIZE_BYTES);
  EXPECT_EQ(coll.vProps.ndevs, 1);
  EXPECT_EQ(coll.vProps.devs[0], 0);
  ncclNetProperties_v8_t v8;
  ASSERT_EQ(ncclCollNetPlugin_v8.getProperties(0, &v8), ncclSuccess);
  EXPECT_STREQ(v8.name, net.name);
  EXPECT_EQ(v8.maxRecvs, net.maxRecvs);
  EXPECT_EQ(ncclCollNetPlugin_v11.getProperties(ncoll, &coll), ncclInternalError);
  EXPECT_EQ(ncclCollNetPlugin_v11.finalize(ctx), ncclSuccess);
}

// NCCL keeps one speed for the topology node net device 0 and the CollNet device share: both
// tables report the speed of the link to the reducers, and the slices are cut for that link.
TEST(PluginCollNet, BothTablesReportTheReducerLinksSpeed) {
  testing::installLoopbackState();  // reducer 127.0.0.1:1
  PluginState* state = PluginState::globalIfLoaded();
  ASSERT_NE(state, nullptr);
  ncclNetProperties_v11_t net, coll;
  ASSERT_EQ(ncclNetPlugin_v11.getProperties(0, &net), ncclSuccess);
  ASSERT_EQ(ncclCollNetPlugin_v11.getProperties(0, &coll), ncclSuccess);
  ncclNetProperties_v8_t net8, coll8;
  ASSERT_EQ(ncclNetPlugin_v8.getProperties(0, &net8), ncclSuccess);
  ASSERT_EQ(ncclCollNetPlugin_v8.getProperties(0, &coll8), ncclSuccess);
  const transport::LinkChoice& link = state->collLink();
  EXPECT_EQ(link.interface, "lo");
  EXPECT_EQ(net.speed, link.speed_mbps);
  EXPECT_EQ(coll.speed, link.speed_mbps);
  EXPECT_EQ(net8.speed, link.speed_mbps);
  EXPECT_EQ(coll8.speed, link.speed_mbps);
  const protocol::SlicePlan plan =
      protocol::choosePlan(state->params().sliceBytes, 0, 0, link.loopback, coll.speed);
  EXPECT_EQ(state->collOptions().slices_per_reducer, plan.per_reducer);
  EXPECT_EQ(state->collOptions().min_slice_bytes, plan.min_slice_bytes);
}

TEST(PluginCollNet, ConnectToADeadReducerDeclines) {
  testing::installLoopbackState();  // reducer 127.0.0.1:1, connect timeout 1 s
  void* ctx = nullptr;
  ASSERT_EQ(ncclCollNetPlugin_v11.init(&ctx, 9, nullptr), ncclSuccess);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen_comm = nullptr;
  ASSERT_EQ(ncclCollNetPlugin_v11.listen(ctx, 0, handle, &listen_comm), ncclSuccess);
  ASSERT_NE(listen_comm, nullptr);
  void* handles[1] = {handle};
  void* coll_comm = reinterpret_cast<void*>(1);
  auto start = std::chrono::steady_clock::now();
  ncclResult_t r = ncclCollNetPlugin_v11.connect(handles, 1, 0, listen_comm, &coll_comm);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_NE(r, ncclSuccess);
  EXPECT_EQ(coll_comm, nullptr);
  EXPECT_LT(took, std::chrono::seconds(30));
  // Bad rank / nranks are the core's misuse.
  EXPECT_EQ(ncclCollNetPlugin_v11.connect(handles, 1, 1, listen_comm, &coll_comm),
            ncclInternalError);
  EXPECT_EQ(ncclCollNetPlugin_v11.closeListen(listen_comm), ncclSuccess);
  void* flush = reinterpret_cast<void*>(1);
  EXPECT_EQ(ncclCollNetPlugin_v11.iflush(nullptr, nullptr, 0, nullptr, &flush), ncclSuccess);
  EXPECT_EQ(flush, nullptr);
  EXPECT_EQ(ncclCollNetPlugin_v11.finalize(ctx), ncclSuccess);
}

}  // namespace
}  // namespace tally::plugin
