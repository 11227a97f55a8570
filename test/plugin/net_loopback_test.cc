// SPDX-License-Identifier: Apache-2.0
// Drives the net tables in-process over loopback the way NCCL does: init, devices,
// getProperties, listen, connect/accept until both are non-NULL, regMr, isend/irecv (tags and a
// grouped receive), test until done, close, finalize.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "plugin_test_util.h"

namespace tally::plugin {
namespace {

using testing::Clock;
using testing::connectPair;
using testing::kDeadline;
using testing::testAll;

int testV11(void* r, int* d, int* s) { return ncclNetPlugin_v11.test(r, d, s); }

TEST(PluginNetLoopback, V11EndToEnd) {
  testing::installLoopbackState();
  const ncclNet_v11_t& t = ncclNetPlugin_v11;
  void* ctx = nullptr;
  ncclNetCommConfig_v11_t config = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
  ASSERT_EQ(t.init(&ctx, 0xabcdef, &config, nullptr, nullptr), ncclSuccess);
  ASSERT_NE(ctx, nullptr);
  int ndev = 0;
  ASSERT_EQ(t.devices(&ndev), ncclSuccess);
  ASSERT_GE(ndev, 1);

  ncclNetProperties_v11_t props;
  std::memset(&props, 0x5a, sizeof(props));
  ASSERT_EQ(t.getProperties(0, &props), ncclSuccess);
  EXPECT_STREQ(props.name, "lo");
  EXPECT_EQ(props.ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(props.regIsGlobal, 0);
  EXPECT_EQ(props.forceFlush, 0);
  EXPECT_GT(props.speed, 0);
  EXPECT_EQ(props.port, 0);
  EXPECT_EQ(props.maxComms, 65536);
  EXPECT_EQ(props.maxRecvs, 8);
  EXPECT_EQ(props.netDeviceType, NCCL_NET_DEVICE_HOST);
  EXPECT_EQ(props.netDeviceVersion, 0);
  EXPECT_EQ(props.vProps.ndevs, 1);
  EXPECT_EQ(props.vProps.devs[0], 0);
  EXPECT_EQ(props.maxP2pBytes, NCCL_MAX_NET_SIZE_BYTES);
  EXPECT_GT(props.maxCollBytes, 0u);
  EXPECT_EQ(props.maxMultiRequestSize, 1);

  void* send = nullptr;
  void* recv = nullptr;
  connectPair(t, ctx, &send, &recv);
  if (HasFatalFailure()) return;

  std::vector<char> out(4096), in(4096, 0);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i * 7 + 3);
  void* send_mr = nullptr;
  void* recv_mr = nullptr;
  void* recv_mr_again = nullptr;
  ASSERT_EQ(t.regMr(send, out.data(), out.size(), NCCL_PTR_HOST, &send_mr), ncclSuccess);
  ASSERT_EQ(t.regMr(recv, in.data(), in.size(), NCCL_PTR_HOST, &recv_mr), ncclSuccess);
  // The same buffer is registered repeatedly in NCCL; that must work.
  ASSERT_EQ(t.regMr(recv, in.data(), in.size(), NCCL_PTR_HOST, &recv_mr_again), ncclSuccess);
  void* cuda_mr = nullptr;
  EXPECT_EQ(t.regMr(recv, in.data(), in.size(), NCCL_PTR_CUDA, &cuda_mr), ncclInternalError);

  // Sends: tag 1 (100 B), tag 2 (200 B), then tag 3 (50 B).
  char* o = out.data();
  std::vector<void*> sreq(3, nullptr);
  ASSERT_EQ(t.isend(send, o, 100, 1, send_mr, nullptr, &sreq[0]), ncclSuccess);
  ASSERT_EQ(t.isend(send, o + 100, 200, 2, send_mr, nullptr, &sreq[1]), ncclSuccess);
  ASSERT_EQ(t.isend(send, o + 300, 50, 3, send_mr, nullptr, &sreq[2]), ncclSuccess);
  for (void* r : sreq) ASSERT_NE(r, nullptr);

  // A grouped receive of the first two messages (tags pick the buffer), then one more with the
  // LL "optional completion" hint pre-set.
  char* i0 = in.data();
  void* data[2] = {i0, i0 + 1024};
  size_t sizes[2] = {1024, 1024};
  int tags[2] = {2, 1};
  void* mrs[2] = {recv_mr, recv_mr_again};
  std::vector<void*> rreq(2, nullptr);
  ASSERT_EQ(t.irecv(recv, 2, data, sizes, tags, mrs, nullptr, &rreq[0]), ncclSuccess);
  void* data3[1] = {i0 + 2048};
  size_t sizes3[1] = {512};
  int tags3[1] = {3};
  void* mrs3[1] = {recv_mr};
  rreq[1] = reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION);
  ASSERT_EQ(t.irecv(recv, 1, data3, sizes3, tags3, mrs3, nullptr, &rreq[1]), ncclSuccess);
  for (void* r : rreq) ASSERT_NE(r, nullptr);
  ASSERT_NE(rreq[1], reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION));

  std::vector<std::vector<int>> ssizes(3, std::vector<int>(8, -1));
  std::vector<std::vector<int>> rsizes(2, std::vector<int>(8, -1));
  ASSERT_TRUE(testAll(rreq, &rsizes, testV11));
  ASSERT_TRUE(testAll(sreq, &ssizes, testV11));
  EXPECT_EQ(ssizes[0][0], 100);
  EXPECT_EQ(ssizes[1][0], 200);
  EXPECT_EQ(ssizes[2][0], 50);
  EXPECT_EQ(rsizes[0][0], 200);  // tag 2 landed in buffer 0
  EXPECT_EQ(rsizes[0][1], 100);  // tag 1 in buffer 1
  EXPECT_EQ(rsizes[1][0], 50);
  EXPECT_EQ(0, std::memcmp(i0, o + 100, 200));
  EXPECT_EQ(0, std::memcmp(i0 + 1024, o, 100));
  EXPECT_EQ(0, std::memcmp(i0 + 2048, o + 300, 50));

  // A finished request is gone: testing it again is the core's misuse.
  int d = 0;
  EXPECT_EQ(t.test(rreq[1], &d, nullptr), ncclInternalError);

  // NCCL_NET_MAX_REQUESTS receives fit; the next one gets a NULL request (retry later).
  std::vector<void*> pending;
  for (int k = 0; k < NCCL_NET_MAX_REQUESTS; ++k) {
    void* r = nullptr;
    ASSERT_EQ(t.irecv(recv, 1, data3, sizes3, tags3, mrs3, nullptr, &r), ncclSuccess);
    ASSERT_NE(r, nullptr) << "receive " << k;
    pending.push_back(r);
  }
  void* extra = reinterpret_cast<void*>(1);
  ASSERT_EQ(t.irecv(recv, 1, data3, sizes3, tags3, mrs3, nullptr, &extra), ncclSuccess);
  EXPECT_EQ(extra, nullptr);

  // Host memory needs no flush; a dma-buf is refused where it was not advertised.
  void* flush = reinterpret_cast<void*>(1);
  int flush_sizes[1] = {50};
  EXPECT_EQ(t.iflush(recv, 1, data3, flush_sizes, mrs3, &flush), ncclSuccess);
  EXPECT_EQ(flush, nullptr);
  void* dmabuf_mr = nullptr;
  EXPECT_EQ(t.regMrDmaBuf(recv, in.data(), in.size(), NCCL_PTR_CUDA, 0, 3, &dmabuf_mr),
            ncclInternalError);
  EXPECT_EQ(dmabuf_mr, nullptr);

  EXPECT_EQ(t.deregMr(send, send_mr), ncclSuccess);
  EXPECT_EQ(t.deregMr(recv, recv_mr_again), ncclSuccess);
  EXPECT_EQ(t.deregMr(recv, recv_mr), ncclSuccess);
  // Closing with receives still pending is how NCCL tears down after an abort.
  EXPECT_EQ(t.closeRecv(recv), ncclSuccess);
  EXPECT_EQ(t.closeSend(send), ncclSuccess);
  EXPECT_EQ(t.finalize(ctx), ncclSuccess);
}

int testV8(void* r, int* d, int* s) { return ncclNetPlugin_v8.test(r, d, s); }

TEST(PluginNetLoopback, V8IntSizes) {
  testing::installLoopbackState();
  const ncclNet_v8_t& t = ncclNetPlugin_v8;
  ASSERT_EQ(t.init(nullptr), ncclSuccess);
  ncclNetProperties_v8_t props;
  ASSERT_EQ(t.getProperties(0, &props), ncclSuccess);
  EXPECT_STREQ(props.name, "lo");
  EXPECT_EQ(props.maxRecvs, 8);

  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen_comm = nullptr;
  ASSERT_EQ(t.listen(0, handle, &listen_comm), ncclSuccess);
  void* send = nullptr;
  void* recv = nullptr;
  auto start = Clock::now();
  while ((send == nullptr || recv == nullptr) && Clock::now() - start < kDeadline) {
    if (send == nullptr) {
      ASSERT_EQ(t.connect(0, handle, &send, nullptr), ncclSuccess);
    }
    if (recv == nullptr) {
      ASSERT_EQ(t.accept(listen_comm, &recv, nullptr), ncclSuccess);
    }
  }
  ASSERT_TRUE(send != nullptr && recv != nullptr);
  ASSERT_EQ(t.closeListen(listen_comm), ncclSuccess);

  std::vector<int> out(1000), in(1000, 0);
  std::iota(out.begin(), out.end(), 1);
  void* smr = nullptr;
  void* rmr = nullptr;
  ASSERT_EQ(t.regMr(send, out.data(), 4000, NCCL_PTR_HOST, &smr), ncclSuccess);
  ASSERT_EQ(t.regMr(recv, in.data(), 4000, NCCL_PTR_HOST, &rmr), ncclSuccess);
  std::vector<void*> reqs(2, nullptr);
  void* rdata[1] = {in.data()};
  int rsize[1] = {4000};
  int rtag[1] = {9};
  void* rmrs[1] = {rmr};
  ASSERT_EQ(t.irecv(recv, 1, rdata, rsize, rtag, rmrs, &reqs[0]), ncclSuccess);
  ASSERT_EQ(t.isend(send, out.data(), 4000, 9, smr, &reqs[1]), ncclSuccess);
  ASSERT_TRUE(reqs[0] != nullptr && reqs[1] != nullptr);
  std::vector<std::vector<int>> sizes(2, std::vector<int>(8, -1));
  ASSERT_TRUE(testAll(reqs, &sizes, testV8));
  EXPECT_EQ(sizes[0][0], 4000);
  EXPECT_EQ(sizes[1][0], 4000);
  EXPECT_EQ(in, out);
  EXPECT_EQ(t.isend(send, out.data(), -1, 9, smr, &reqs[1]), ncclInternalError);
  EXPECT_EQ(t.deregMr(send, smr), ncclSuccess);
  EXPECT_EQ(t.deregMr(recv, rmr), ncclSuccess);
  EXPECT_EQ(t.closeSend(send), ncclSuccess);
  EXPECT_EQ(t.closeRecv(recv), ncclSuccess);
}

}  // namespace
}  // namespace tally::plugin
