// SPDX-License-Identifier: Apache-2.0
// The plugin's side of CUDA memory, against a recording transport: which NCCL_PTR_* bits a
// device's properties advertise, which MemoryType regMr and regMrDmaBuf ask the transport for,
// that types never advertised are refused, and that iflush hands the transport only the
// buffers registered as CUDA memory.
#include <gtest/gtest.h>

#include <vector>

#include "plugin/net_comm.h"
#include "plugin/state.h"

namespace tally::plugin {
namespace {

struct Recorded {
  std::vector<transport::MemoryType> registered;
  std::vector<int> dmabuf_fds;
  std::vector<uint64_t> dmabuf_offsets;
  int flushes = 0;
  std::vector<const void*> flushed;  // buffers passed with a region
  bool flush_pending = false;        // the transport's answer: a request, or nothing to do
};

class DoneRequest final : public transport::Request {
 public:
  Status test(bool* done, size_t*) override {
    *done = true;
    return Status::ok();
  }
  Status wait(int64_t, size_t*) override { return Status::ok(); }
};

class RecordingConnection final : public transport::Connection {
 public:
  explicit RecordingConnection(Recorded* r) : r_(r) {}
  Status isend(const void*, size_t, int, transport::MemoryRegion*,
               std::unique_ptr<transport::Request>*) override {
    return Status::internal("not used");
  }
  Status irecv(int, void* const*, const size_t*, const int*, transport::MemoryRegion* const*,
               std::unique_ptr<transport::Request>*) override {
    return Status::internal("not used");
  }
  Status registerMemory(void*, size_t, transport::MemoryType type,
                        std::unique_ptr<transport::MemoryRegion>* mr) override {
    r_->registered.push_back(type);
    *mr = std::make_unique<transport::MemoryRegion>();
    (*mr)->type = type;
    return Status::ok();
  }
  Status registerDmaBuf(void*, size_t, int fd, uint64_t offset,
                        std::unique_ptr<transport::MemoryRegion>* mr) override {
    r_->dmabuf_fds.push_back(fd);
    r_->dmabuf_offsets.push_back(offset);
    *mr = std::make_unique<transport::MemoryRegion>();
    (*mr)->type = transport::MemoryType::kCuda;
    return Status::ok();
  }
  Status iflush(int n, void* const* data, const size_t*, transport::MemoryRegion* const* mrs,
                std::unique_ptr<transport::Request>* req) override {
    ++r_->flushes;
    for (int i = 0; i < n; ++i) {
      if (mrs[i] != nullptr) r_->flushed.push_back(data[i]);
    }
    if (r_->flush_pending) {
      *req = std::make_unique<DoneRequest>();
    } else {
      *req = nullptr;
    }
    return Status::ok();
  }
  void close() override {}
  std::string peerName() const override { return "recording"; }

 private:
  Recorded* r_;
};

std::unique_ptr<NetComm> recvComm(int ptr_support, Recorded* r) {
  return std::make_unique<NetComm>(NetComm::Kind::kRecv, 0, ptr_support,
                                   std::make_unique<RecordingConnection>(r));
}

TEST(PluginDeviceMemory, PropertiesPickThePointerTypes) {
  transport::DeviceProperties p;
  EXPECT_EQ(netPtrSupport(p), NCCL_PTR_HOST);
  p.cuda_memory = true;
  EXPECT_EQ(netPtrSupport(p), NCCL_PTR_HOST | NCCL_PTR_CUDA);
  p.dmabuf = true;
  EXPECT_EQ(netPtrSupport(p), NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF);
}

TEST(PluginDeviceMemory, HostOnlyDeviceRefusesCudaAndDmaBuf) {
  Recorded r;
  auto comm = recvComm(NCCL_PTR_HOST, &r);
  std::vector<char> buffer(256);
  NetMr* mr = nullptr;
  Status st = comm->registerMemory(buffer.data(), buffer.size(), NCCL_PTR_CUDA, &mr);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("was not advertised"), std::string::npos) << st.toString();
  st = comm->registerDmaBuf(buffer.data(), buffer.size(), NCCL_PTR_CUDA, 0, 7, &mr);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_TRUE(r.registered.empty());
  EXPECT_TRUE(r.dmabuf_fds.empty());
  st = comm->registerMemory(buffer.data(), buffer.size(), 0x10, &mr);  // no such type
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  ASSERT_TRUE(comm->registerMemory(buffer.data(), buffer.size(), NCCL_PTR_HOST, &mr).isOk());
  ASSERT_EQ(r.registered.size(), 1u);
  EXPECT_EQ(r.registered[0], transport::MemoryType::kHost);
  EXPECT_TRUE(NetComm::deregister(mr).isOk());
}

TEST(PluginDeviceMemory, CudaAndDmaBufReachTheTransportAsCudaMemory) {
  Recorded r;
  auto comm = recvComm(NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF, &r);
  std::vector<char> buffer(256);
  NetMr* cuda = nullptr;
  NetMr* dmabuf = nullptr;
  ASSERT_TRUE(comm->registerMemory(buffer.data(), buffer.size(), NCCL_PTR_CUDA, &cuda).isOk());
  ASSERT_TRUE(
      comm->registerDmaBuf(buffer.data(), buffer.size(), NCCL_PTR_CUDA, 4096, 9, &dmabuf).isOk());
  ASSERT_EQ(r.registered.size(), 1u);
  EXPECT_EQ(r.registered[0], transport::MemoryType::kCuda);
  ASSERT_EQ(r.dmabuf_fds.size(), 1u);
  EXPECT_EQ(r.dmabuf_fds[0], 9);
  EXPECT_EQ(r.dmabuf_offsets[0], 4096u);
  // regMr is never asked for NCCL_PTR_DMABUF itself, and a dma-buf of host memory is refused.
  NetMr* bad = nullptr;
  EXPECT_FALSE(comm->registerMemory(buffer.data(), buffer.size(), NCCL_PTR_DMABUF, &bad).isOk());
  EXPECT_FALSE(
      comm->registerDmaBuf(buffer.data(), buffer.size(), NCCL_PTR_HOST, 0, 9, &bad).isOk());
  EXPECT_TRUE(NetComm::deregister(cuda).isOk());
  EXPECT_TRUE(NetComm::deregister(dmabuf).isOk());
}

TEST(PluginDeviceMemory, FlushPassesOnlyCudaBuffersAndReportsTheRequest) {
  Recorded r;
  auto comm = recvComm(NCCL_PTR_HOST | NCCL_PTR_CUDA, &r);
  std::vector<char> host(64), gpu(64);
  NetMr* host_mr = nullptr;
  NetMr* gpu_mr = nullptr;
  ASSERT_TRUE(comm->registerMemory(host.data(), host.size(), NCCL_PTR_HOST, &host_mr).isOk());
  ASSERT_TRUE(comm->registerMemory(gpu.data(), gpu.size(), NCCL_PTR_CUDA, &gpu_mr).isOk());

  // Host buffers only: done at once, the transport is not asked.
  void* data1[1] = {host.data()};
  int sizes1[1] = {64};
  void* mrs1[1] = {host_mr};
  NetRequest* req = reinterpret_cast<NetRequest*>(1);
  ASSERT_TRUE(comm->iflush(1, data1, sizes1, mrs1, &req).isOk());
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(r.flushes, 0);

  // A host and a CUDA buffer: the transport sees the CUDA one alone.
  void* data2[2] = {host.data(), gpu.data()};
  int sizes2[2] = {64, 32};
  void* mrs2[2] = {host_mr, gpu_mr};
  ASSERT_TRUE(comm->iflush(2, data2, sizes2, mrs2, &req).isOk());
  EXPECT_EQ(req, nullptr) << "the transport said nothing to do";
  ASSERT_EQ(r.flushes, 1);
  ASSERT_EQ(r.flushed.size(), 1u);
  EXPECT_EQ(r.flushed[0], gpu.data());

  // A transport request comes back as an NCCL request that test() finishes, with no sizes.
  r.flush_pending = true;
  ASSERT_TRUE(comm->iflush(2, data2, sizes2, mrs2, &req).isOk());
  ASSERT_NE(req, nullptr);
  EXPECT_TRUE(comm->ownsRequest(req));
  bool done = false;
  size_t got[kMaxRecvs] = {99, 99};
  ASSERT_TRUE(comm->test(req, &done, got).isOk());
  EXPECT_TRUE(done);
  EXPECT_EQ(got[0], 99u) << "a flush reports no sizes";

  // Every request slot taken: the flush finishes in place and reports done.
  std::vector<NetRequest*> held;
  for (;;) {
    NetRequest* more = nullptr;
    ASSERT_TRUE(comm->iflush(1, data2 + 1, sizes2 + 1, mrs2 + 1, &more).isOk());
    if (more == nullptr) break;
    held.push_back(more);
    ASSERT_LE(held.size(), static_cast<size_t>(kMaxNetRequests)) << "slots never ran out";
  }
  EXPECT_EQ(held.size(), static_cast<size_t>(kMaxNetRequests));
  for (NetRequest* h : held) ASSERT_TRUE(comm->test(h, &done, nullptr).isOk());

  EXPECT_EQ(comm->iflush(0, data2, sizes2, mrs2, &req).code(), StatusCode::kInternal);
  EXPECT_TRUE(NetComm::deregister(host_mr).isOk());
  EXPECT_TRUE(NetComm::deregister(gpu_mr).isOk());
}

TEST(PluginDeviceMemory, SendCommRefusesFlush) {
  Recorded r;
  auto send = std::make_unique<NetComm>(NetComm::Kind::kSend, 0, NCCL_PTR_HOST | NCCL_PTR_CUDA,
                                        std::make_unique<RecordingConnection>(&r));
  std::vector<char> buffer(8);
  void* data[1] = {buffer.data()};
  int sizes[1] = {8};
  void* mrs[1] = {nullptr};
  NetRequest* req = nullptr;
  EXPECT_EQ(send->iflush(1, data, sizes, mrs, &req).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace tally::plugin
