// SPDX-License-Identifier: Apache-2.0
// GPU memory on the verbs backend, on the software device (verbs_fake.h): the device properties
// that say whether it works, dma-buf registration, and a flush after receiving into it (the
// flush's failures are in verbs_flush_test.cc). A memfd stands in for a GPU's dma-buf, and host
// memory registered as kCuda for GPU memory reached through a peer-memory client.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "test/transport/verbs_test_util.h"

namespace tally::transport::test {
namespace {

constexpr int64_t kWaitMs = 5000;

// A memfd of `size` bytes mapped into this process, filled with `fill`: what the test sees of a
// "dma-buf" the fake device maps on its own.
class MemFd {
 public:
  MemFd(size_t size, uint8_t fill) : size_(size) {
    fd_ = memfd_create("tally-dmabuf", MFD_CLOEXEC);
    if (fd_ < 0 || ftruncate(fd_, static_cast<off_t>(size)) != 0) return;
    void* map = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (map == MAP_FAILED) return;
    map_ = static_cast<uint8_t*>(map);
    std::memset(map_, fill, size);
  }
  ~MemFd() {
    if (map_ != nullptr) munmap(map_, size_);
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return map_ != nullptr; }
  int fd() const { return fd_; }
  uint8_t* at(size_t offset) const { return map_ + offset; }

 private:
  size_t size_;
  int fd_ = -1;
  uint8_t* map_ = nullptr;
};

std::vector<uint8_t> pattern(size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 8));
  return bytes;
}

TEST(VerbsGpuMemory, PropertiesFollowPeerMemorySysfsAndDmaBufProbe) {
  struct Case {
    const char* sysfs_path;  // "" : no peer-memory client
    int dmabuf_errno;
    bool loader_has_dmabuf;
    bool cuda_memory;
    bool dmabuf;
  };
  const Case cases[] = {
      {"", EOPNOTSUPP, true, false, false},
      {"", EPROTONOSUPPORT, true, false, false},
      {"", 0, false, false, false},
      {"", 0, true, false, true},  // dma-buf alone: NCCL_PTR_DMABUF, not NCCL_PTR_CUDA
      {"/kernel/mm/memory_peers/nv_mem/version", EOPNOTSUPP, true, true, false},
      {"/module/nvidia_peermem/", EOPNOTSUPP, true, true, false},
      {"/module/nv_peer_mem/", 0, false, true, false},
      {"/module/nvidia_peermem/", 0, true, true, true},
      {"/module/some_other_module/", EOPNOTSUPP, true, false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string("sysfs \"") + c.sysfs_path + "\" dma-buf errno " +
                 std::to_string(c.dmabuf_errno) + (c.loader_has_dmabuf ? "" : " no symbol"));
    FakeSysfs sysfs(c.sysfs_path);
    ASSERT_FALSE(sysfs.root().empty());
    FakeVerbsConfig config;
    config.dmabuf_errno = c.dmabuf_errno;
    verbs::VerbsOptions options;
    options.sysfs_root = sysfs.root();
    std::shared_ptr<Network> network;
    ASSERT_TRUE(fakeVerbsNetwork(config, options, &network,
                                 c.loader_has_dmabuf ? fakeVerbsApi() : fakeVerbsApiWithoutDmaBuf())
                    .isOk());
    const DeviceProperties& properties = network->devices().at(0)->properties();
    EXPECT_EQ(properties.cuda_memory, c.cuda_memory);
    EXPECT_EQ(properties.dmabuf, c.dmabuf);
    EXPECT_EQ(fakeVerbsStats().live_mrs, 0) << "the probe left a registration behind";
  }
}

// The sender's buffer is a dma-buf: the device must read it through the dma-buf registration.
// The pointer passed along is only the device's address for it (a GPU pointer, in real life), so
// here it points at decoy host memory holding other bytes: a data path that registered the
// pointer as host memory instead would send the decoy.
TEST(VerbsGpuMemory, DmaBufRegionRoundTrip) {
  FakePair pair;
  ASSERT_NO_FATAL_FAILURE(makeFakePair({}, {}, &pair));
  constexpr size_t kOffset = 4096 + 100;  // not page aligned: a range inside an allocation
  constexpr size_t kSize = 300 * 1024;    // cut over the data queue pairs
  MemFd dmabuf(kOffset + kSize + 4096, 0xee);
  ASSERT_TRUE(dmabuf.ok());
  const std::vector<uint8_t> expected = pattern(kSize, 3);
  std::memcpy(dmabuf.at(kOffset), expected.data(), kSize);
  std::vector<uint8_t> decoy(kSize, 0x5a);

  std::unique_ptr<MemoryRegion> mr;
  Status status = pair.client->registerDmaBuf(decoy.data(), kSize, dmabuf.fd(), kOffset, &mr);
  ASSERT_TRUE(status.isOk()) << status.toString();
  EXPECT_EQ(mr->type, MemoryType::kCuda);
  const auto regs = fakeDmaBufRegistrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].fd, dmabuf.fd());
  EXPECT_EQ(regs[0].offset, kOffset);
  EXPECT_EQ(regs[0].length, kSize);
  EXPECT_EQ(regs[0].iova, reinterpret_cast<uintptr_t>(decoy.data()));
  const int rights = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  EXPECT_EQ(regs[0].access & rights, rights);

  std::vector<uint8_t> got(kSize, 0);
  void* data[1] = {got.data()};
  size_t sizes[1] = {kSize};
  int tags[1] = {7};
  std::unique_ptr<Request> recv;
  ASSERT_TRUE(pair.server->irecv(1, data, sizes, tags, nullptr, &recv).isOk());
  ASSERT_NE(recv, nullptr);
  ASSERT_NO_FATAL_FAILURE(sendAndWait(pair.client.get(), decoy.data(), kSize, 7, mr.get()));
  size_t received[1] = {0};
  status = recv->wait(kWaitMs, received);
  ASSERT_TRUE(status.isOk()) << status.toString();
  EXPECT_EQ(received[0], kSize);
  EXPECT_TRUE(got == expected) << "the bytes did not come from the dma-buf";

  const int mrs_before = fakeVerbsStats().live_mrs;
  mr.reset();
  EXPECT_EQ(fakeVerbsStats().live_mrs, mrs_before - 1) << "the region deregisters its own mr";
  recv.reset();  // requests hold their connection's device
  pair.client.reset();
  pair.server.reset();
  pair.network.reset();
  expectFakeVerbsClean();
}

TEST(VerbsGpuMemory, ReceiveIntoDmaBufThenFlushReadsEachCudaBufferOnce) {
  FakePair pair;
  ASSERT_NO_FATAL_FAILURE(makeFakePair({}, {}, &pair));
  constexpr size_t kSize = 8192;
  MemFd dmabuf(2 * kSize, 0);
  ASSERT_TRUE(dmabuf.ok());
  std::vector<uint8_t> cuda(kSize, 0);  // kCuda through the peer-memory path
  std::vector<uint8_t> cuda_empty(64, 0);
  std::vector<uint8_t> host(kSize, 0);
  std::unique_ptr<MemoryRegion> mrs_owned[4];
  ASSERT_TRUE(
      pair.server->registerDmaBuf(dmabuf.at(kSize), kSize, dmabuf.fd(), kSize, &mrs_owned[0])
          .isOk());
  ASSERT_TRUE(
      pair.server->registerMemory(cuda.data(), kSize, MemoryType::kCuda, &mrs_owned[1]).isOk());
  ASSERT_TRUE(
      pair.server
          ->registerMemory(cuda_empty.data(), cuda_empty.size(), MemoryType::kCuda, &mrs_owned[2])
          .isOk());
  ASSERT_TRUE(
      pair.server->registerMemory(host.data(), kSize, MemoryType::kHost, &mrs_owned[3]).isOk());
  MemoryRegion* mrs[4] = {mrs_owned[0].get(), mrs_owned[1].get(), mrs_owned[2].get(),
                          mrs_owned[3].get()};
  void* data[4] = {dmabuf.at(kSize), cuda.data(), cuda_empty.data(), host.data()};
  size_t capacity[4] = {kSize, kSize, cuda_empty.size(), kSize};
  int tags[4] = {1, 2, 3, 4};

  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::unique_ptr<Request> recv;
    ASSERT_TRUE(pair.server->irecv(4, data, capacity, tags, mrs, &recv).isOk());
    ASSERT_NE(recv, nullptr);
    const std::vector<uint8_t> a = pattern(kSize, static_cast<uint8_t>(10 + round));
    const std::vector<uint8_t> b = pattern(kSize - 5, static_cast<uint8_t>(20 + round));
    const std::vector<uint8_t> d = pattern(100, static_cast<uint8_t>(30 + round));
    ASSERT_NO_FATAL_FAILURE(sendAndWait(pair.client.get(), d.data(), d.size(), 4, nullptr));
    ASSERT_NO_FATAL_FAILURE(sendAndWait(pair.client.get(), nullptr, 0, 3, nullptr));
    ASSERT_NO_FATAL_FAILURE(sendAndWait(pair.client.get(), b.data(), b.size(), 2, nullptr));
    ASSERT_NO_FATAL_FAILURE(sendAndWait(pair.client.get(), a.data(), a.size(), 1, nullptr));
    size_t received[4] = {};
    Status status = recv->wait(kWaitMs, received);
    ASSERT_TRUE(status.isOk()) << status.toString();
    EXPECT_EQ(received[0], kSize);
    EXPECT_EQ(received[1], kSize - 5);
    EXPECT_EQ(received[2], 0u);
    EXPECT_EQ(received[3], 100u);
    EXPECT_EQ(std::memcmp(dmabuf.at(kSize), a.data(), kSize), 0);
    EXPECT_TRUE(std::equal(b.begin(), b.end(), cuda.begin()));
    EXPECT_TRUE(std::equal(d.begin(), d.end(), host.begin()));

    const int64_t reads_before = fakeVerbsStats().rdma_reads;
    std::unique_ptr<Request> flush;
    status = pair.server->iflush(4, data, received, mrs, &flush);
    ASSERT_TRUE(status.isOk()) << status.toString();
    ASSERT_NE(flush, nullptr);
    status = flush->wait(kWaitMs, nullptr);
    ASSERT_TRUE(status.isOk()) << status.toString();
    bool done = false;
    ASSERT_TRUE(flush->test(&done, nullptr).isOk());
    EXPECT_TRUE(done);
    // One read per kCuda buffer that received bytes: the empty one and the host one get none.
    EXPECT_EQ(fakeVerbsStats().rdma_reads - reads_before, 2);
    const auto addrs = fakeReadAddresses();
    ASSERT_EQ(addrs.size(), static_cast<size_t>(2 * (round + 1)));
    EXPECT_EQ(addrs[2 * round], reinterpret_cast<uintptr_t>(data[0]));
    EXPECT_EQ(addrs[2 * round + 1], reinterpret_cast<uintptr_t>(data[1]));
  }
  pair.client.reset();
  pair.server.reset();
  for (auto& mr : mrs_owned) mr.reset();
  pair.network.reset();
  expectFakeVerbsClean();
}

TEST(VerbsGpuMemory, DmaBufWhereUnsupportedIsAClearError) {
  MemFd dmabuf(8192, 0);
  ASSERT_TRUE(dmabuf.ok());
  struct Case {
    int dmabuf_errno;
    const verbs::VerbsApi* api;
    const char* why;
  };
  const Case cases[] = {{EOPNOTSUPP, fakeVerbsApi(), "kernel"},
                        {0, fakeVerbsApiWithoutDmaBuf(), "libibverbs has no ibv_reg_dmabuf_mr"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    FakeVerbsConfig config;
    config.dmabuf_errno = c.dmabuf_errno;
    std::shared_ptr<Network> network;
    ASSERT_TRUE(fakeVerbsNetwork(config, {}, &network, c.api).isOk());
    std::unique_ptr<Connection> client;
    std::unique_ptr<Connection> server;
    ASSERT_TRUE(verbsPair(network.get(), {}, &client, &server).isOk());
    std::unique_ptr<MemoryRegion> mr;
    Status status = client->registerDmaBuf(dmabuf.at(0), 4096, dmabuf.fd(), 0, &mr);
    EXPECT_EQ(status.code(), StatusCode::kInvalidUsage) << status.toString();
    EXPECT_NE(status.message().find("dma-buf"), std::string::npos) << status.toString();
    EXPECT_NE(status.message().find(c.why), std::string::npos) << status.toString();
    EXPECT_EQ(mr, nullptr);
  }
}

TEST(VerbsGpuMemory, DmaBufRegistrationFailureNamesTheCause) {
  FakePair pair;
  ASSERT_NO_FATAL_FAILURE(makeFakePair({}, {}, &pair));
  MemFd dmabuf(8192, 0);
  ASSERT_TRUE(dmabuf.ok());
  std::unique_ptr<MemoryRegion> mr;
  Status status = pair.client->registerDmaBuf(dmabuf.at(0), 4096, -1, 0, &mr);
  EXPECT_EQ(status.code(), StatusCode::kSystem) << status.toString();
  EXPECT_NE(status.message().find("dma-buf"), std::string::npos) << status.toString();
  EXPECT_NE(status.message().find(std::strerror(EBADF)), std::string::npos) << status.toString();
  // A range past the end of the dma-buf.
  status = pair.client->registerDmaBuf(dmabuf.at(0), 8192, dmabuf.fd(), 4096, &mr);
  EXPECT_EQ(status.code(), StatusCode::kSystem) << status.toString();
  EXPECT_NE(status.message().find(std::strerror(EINVAL)), std::string::npos) << status.toString();
  EXPECT_EQ(mr, nullptr);
  EXPECT_TRUE(fakeDmaBufRegistrations().empty());
}

}  // namespace
}  // namespace tally::transport::test
