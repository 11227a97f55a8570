// SPDX-License-Identifier: Apache-2.0
// The whole path NCCL takes for GPUDirect RDMA, on the software verbs device: the net table's
// getProperties advertises CUDA memory (a peer-memory client "loaded" in a sysfs tree of the
// test's own), regMr(NCCL_PTR_CUDA) and regMrDmaBuf register, isend/irecv move the bytes with RDMA
// writes, and iflush returns a request that test() finishes after the device served one RDMA
// read per CUDA buffer. Host memory stands in for GPU memory (the fake device cannot tell).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include "plugin_test_util.h"
#include "test/transport/verbs_test_util.h"

namespace tally::plugin {
namespace {

using testing::connectPair;
using testing::testAll;

int testV11(void* r, int* d, int* s) { return ncclNetPlugin_v11.test(r, d, s); }

// Installs a plugin state whose one device is the software verbs device, with the peer-memory
// client present (and dma-buf supported by the fake). Keeps the sysfs tree while it lives.
class VerbsGpuState {
 public:
  VerbsGpuState() : sysfs_("/module/nvidia_peermem/") {
    if (sysfs_.root().empty()) return;
    transport::test::FakeVerbsConfig config;
    transport::verbs::VerbsOptions options;
    options.sysfs_root = sysfs_.root();
    Status st = transport::test::fakeVerbsNetwork(config, options, &network_);
    EXPECT_TRUE(st.isOk()) << st.toString();
    if (!st.isOk()) return;
    auto state = std::make_unique<PluginState>(testing::paramsFrom(testing::loopbackValues()),
                                               network_->devices());
    ok_ = PluginState::installGlobal(std::move(state));
  }
  bool ok() const { return ok_; }

 private:
  transport::test::FakeSysfs sysfs_;
  std::shared_ptr<transport::Network> network_;
  bool ok_ = false;
};

TEST(PluginVerbsGpu, CudaBuffersEndToEndWithFlush) {
  VerbsGpuState state;
  ASSERT_TRUE(state.ok()) << "the plugin state was installed before this test";
  const ncclNet_v11_t& t = ncclNetPlugin_v11;
  void* ctx = nullptr;
  ncclNetCommConfig_v11_t config = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
  ASSERT_EQ(t.init(&ctx, 0x600d, &config, nullptr, nullptr), ncclSuccess);
  ncclNetProperties_v11_t props;
  ASSERT_EQ(t.getProperties(0, &props), ncclSuccess);
  EXPECT_EQ(props.ptrSupport, NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF);
  ncclNetProperties_v11_t coll;
  ASSERT_EQ(ncclCollNetPlugin_v11.getProperties(0, &coll), ncclSuccess);
  EXPECT_EQ(coll.ptrSupport, NCCL_PTR_HOST) << "CollNet stays host memory";

  void* send = nullptr;
  void* recv = nullptr;
  connectPair(t, ctx, &send, &recv);
  if (HasFatalFailure()) return;

  // The sender's "GPU" buffer through regMr(CUDA); the receiver's two through regMr(CUDA) and
  // regMrDmaBuf (a memfd stands in for the dma-buf; the fake maps it at the offset).
  std::vector<char> out(1 << 20);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i * 13 + (i >> 12));
  std::vector<char> in(1 << 20, 0);
  const size_t dmabuf_bytes = 1 << 16;
  const int fd = memfd_create("tally-plugin-dmabuf", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 2 * dmabuf_bytes), 0);
  auto* mapped = static_cast<char*>(
      mmap(nullptr, 2 * dmabuf_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(mapped, MAP_FAILED);
  char* dmabuf_view = mapped + dmabuf_bytes;  // the registration starts one page set in

  void* send_mr = nullptr;
  void* recv_mr = nullptr;
  void* dmabuf_mr = nullptr;
  ASSERT_EQ(t.regMr(send, out.data(), out.size(), NCCL_PTR_CUDA, &send_mr), ncclSuccess);
  ASSERT_EQ(t.regMr(recv, in.data(), in.size(), NCCL_PTR_CUDA, &recv_mr), ncclSuccess);
  ASSERT_EQ(t.regMrDmaBuf(recv, dmabuf_view, dmabuf_bytes, NCCL_PTR_CUDA, dmabuf_bytes, fd,
                          &dmabuf_mr),
            ncclSuccess);

  std::vector<void*> sreq(2, nullptr);
  ASSERT_EQ(t.isend(send, out.data(), 700000, 4, send_mr, nullptr, &sreq[0]), ncclSuccess);
  ASSERT_EQ(t.isend(send, out.data() + 800000, 5000, 5, send_mr, nullptr, &sreq[1]),
            ncclSuccess);
  void* data[2] = {in.data(), dmabuf_view};
  size_t sizes[2] = {in.size(), dmabuf_bytes};
  int tags[2] = {4, 5};
  void* mrs[2] = {recv_mr, dmabuf_mr};
  std::vector<void*> rreq(1, nullptr);
  ASSERT_EQ(t.irecv(recv, 2, data, sizes, tags, mrs, nullptr, &rreq[0]), ncclSuccess);
  for (void* r : sreq) ASSERT_NE(r, nullptr);
  ASSERT_NE(rreq[0], nullptr);
  std::vector<std::vector<int>> ssizes(2, std::vector<int>(8, -1));
  std::vector<std::vector<int>> rsizes(1, std::vector<int>(8, -1));
  ASSERT_TRUE(testAll(rreq, &rsizes, testV11));
  ASSERT_TRUE(testAll(sreq, &ssizes, testV11));
  EXPECT_EQ(rsizes[0][0], 700000);
  EXPECT_EQ(rsizes[0][1], 5000);
  EXPECT_EQ(0, std::memcmp(in.data(), out.data(), 700000));
  EXPECT_EQ(0, std::memcmp(dmabuf_view, out.data() + 800000, 5000));

  // The flush NCCL issues after a receive into GPU memory: one read per buffer.
  const int64_t reads_before = transport::test::fakeVerbsStats().rdma_reads;
  int got[2] = {rsizes[0][0], rsizes[0][1]};
  void* flush = nullptr;
  ASSERT_EQ(t.iflush(recv, 2, data, got, mrs, &flush), ncclSuccess);
  ASSERT_NE(flush, nullptr);
  std::vector<void*> freq = {flush};
  std::vector<std::vector<int>> fsizes(1, std::vector<int>(8, -1));
  ASSERT_TRUE(testAll(freq, &fsizes, testV11));
  EXPECT_EQ(transport::test::fakeVerbsStats().rdma_reads - reads_before, 2);

  EXPECT_EQ(t.deregMr(recv, dmabuf_mr), ncclSuccess);
  EXPECT_EQ(t.deregMr(recv, recv_mr), ncclSuccess);
  EXPECT_EQ(t.deregMr(send, send_mr), ncclSuccess);
  EXPECT_EQ(t.closeRecv(recv), ncclSuccess);
  EXPECT_EQ(t.closeSend(send), ncclSuccess);
  EXPECT_EQ(t.finalize(ctx), ncclSuccess);
  munmap(mapped, 2 * dmabuf_bytes);
  close(fd);
}

}  // namespace
}  // namespace tally::plugin
