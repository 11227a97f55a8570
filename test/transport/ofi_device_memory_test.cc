// SPDX-License-Identifier: Apache-2.0
// What the ofi backend does for CUDA memory, run on loopback without a GPU: iflush's read-back
// (fi_read of each buffer through the endpoint's own address), and payloads sent without the
// inline copy, as providers with FI_HMEM need. libfabric's tcp provider stands in for one with
// FI_HMEM through the test options read_back and no_inline; skips where libfabric is missing.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "common/log.h"
#include "test/transport/test_util.h"
#include "transport/ofi/ofi.h"

namespace tally::transport::test {
namespace {

struct Pair {
  std::shared_ptr<Network> network;
  std::unique_ptr<Connection> sender;
  std::unique_ptr<Connection> receiver;
};

// A connected pair on tcp loopback with the given test options; false (and a skip) without
// libfabric.
bool openPair(bool read_back, bool no_inline, Pair* out) {
  ofi::OfiOptions options;
  options.provider = "tcp";
  options.domains = "lo";
  options.read_back = read_back;
  options.no_inline = no_inline;
  Status status = ofi::createNetwork(options, &out->network);
  if (!status.isOk()) {
    ADD_FAILURE() << "ofi unavailable: " << status.toString();  // SetUp checked it is there
    return false;
  }
  Device& device = *out->network->devices().front();
  EXPECT_FALSE(device.properties().cuda_memory) << "tcp has no FI_HMEM";
  EXPECT_FALSE(device.properties().dmabuf);
  std::unique_ptr<Listener> listener;
  EXPECT_TRUE(device.listen(&listener).isOk());
  std::unique_ptr<PendingConnection> pending;
  EXPECT_TRUE(device.connect(listener->handle(), {}, &pending).isOk());
  status = finishConnect(pending.get(), listener.get(), &out->sender, &out->receiver);
  EXPECT_TRUE(status.isOk()) << status.toString();
  return status.isOk();
}

bool ofiPresent() {
  ofi::OfiOptions options;
  options.provider = "tcp";
  options.domains = "lo";
  std::shared_ptr<Network> network;
  return ofi::createNetwork(options, &network).isOk();
}

class OfiDeviceMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ofiPresent()) GTEST_SKIP() << "libfabric with the tcp provider is not available";
  }
};

std::vector<uint8_t> pattern(size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 9));
  return bytes;
}

// Sends `size` bytes from a registered buffer and receives them into a registered one; returns
// the receive side's buffer and region for a flush.
void roundTrip(Pair* pair, size_t size, std::vector<uint8_t>* got,
               std::unique_ptr<MemoryRegion>* recv_mr) {
  const std::vector<uint8_t> sent = pattern(size, static_cast<uint8_t>(size));
  got->assign(size + 16, 0xee);
  std::unique_ptr<MemoryRegion> send_mr;
  ASSERT_TRUE(pair->sender->registerMemory(const_cast<uint8_t*>(sent.data()), sent.size(),
                                           MemoryType::kHost, &send_mr)
                  .isOk());
  ASSERT_TRUE(
      pair->receiver->registerMemory(got->data(), got->size(), MemoryType::kHost, recv_mr).isOk());
  std::unique_ptr<Request> rreq;
  void* data = got->data();
  size_t capacity = got->size();
  int tag = 5;
  MemoryRegion* region = recv_mr->get();
  ASSERT_TRUE(pair->receiver->irecv(1, &data, &capacity, &tag, &region, &rreq).isOk());
  ASSERT_NE(rreq, nullptr);
  std::unique_ptr<Request> sreq;
  ASSERT_TRUE(pair->sender->isend(sent.data(), sent.size(), 5, send_mr.get(), &sreq).isOk());
  ASSERT_NE(sreq, nullptr);
  size_t received = 0;
  Status status = rreq->wait(kWaitMs, &received);
  ASSERT_TRUE(status.isOk()) << status.toString();
  ASSERT_TRUE(sreq->wait(kWaitMs, nullptr).isOk());
  ASSERT_EQ(received, size);
  if (size > 0) {  // never memcmp(null): an empty vector has no data()
    EXPECT_EQ(0, std::memcmp(got->data(), sent.data(), size));
  }
  EXPECT_EQ((*got)[size], 0xee) << "wrote past the message";
}

TEST_F(OfiDeviceMemory, ReadBackOfReceivedBuffersCompletes) {
  Pair pair;
  if (!openPair(/*read_back=*/true, /*no_inline=*/false, &pair)) return;
  for (size_t size : {size_t{1}, size_t{3000}, size_t{1} << 20}) {
    std::vector<uint8_t> got;
    std::unique_ptr<MemoryRegion> mr;
    roundTrip(&pair, size, &got, &mr);
    const std::vector<uint8_t> before = got;
    std::unique_ptr<Request> flush;
    void* data = got.data();
    MemoryRegion* region = mr.get();
    ASSERT_TRUE(pair.receiver->iflush(1, &data, &size, &region, &flush).isOk());
    ASSERT_NE(flush, nullptr) << "a domain with RMA reads reads back";
    Status status = flush->wait(kWaitMs, nullptr);
    ASSERT_TRUE(status.isOk()) << status.toString();
    EXPECT_EQ(got, before) << "a read-back only reads";
  }
}

TEST_F(OfiDeviceMemory, GroupedReadBackSkipsBuffersWithoutRegion) {
  Pair pair;
  if (!openPair(/*read_back=*/true, /*no_inline=*/false, &pair)) return;
  std::vector<std::vector<uint8_t>> buffers(kMaxRecvs, std::vector<uint8_t>(4096, 1));
  std::vector<std::unique_ptr<MemoryRegion>> owned(kMaxRecvs);
  void* data[kMaxRecvs];
  size_t sizes[kMaxRecvs];
  MemoryRegion* regions[kMaxRecvs];
  for (int i = 0; i < kMaxRecvs; ++i) {
    ASSERT_TRUE(pair.receiver
                    ->registerMemory(buffers[i].data(), buffers[i].size(), MemoryType::kHost,
                                     &owned[i])
                    .isOk());
    data[i] = buffers[i].data() + i;  // inside the region, not at its start
    sizes[i] = static_cast<size_t>(100 * i);  // buffer 0 received nothing: no read
    regions[i] = i % 2 == 0 ? owned[i].get() : nullptr;
  }
  std::unique_ptr<Request> flush;
  ASSERT_TRUE(pair.receiver->iflush(kMaxRecvs, data, sizes, regions, &flush).isOk());
  ASSERT_NE(flush, nullptr);
  EXPECT_TRUE(flush->wait(kWaitMs, nullptr).isOk());

  // Only buffers with no region or nothing received: nothing to do.
  regions[0] = owned[0].get();
  for (int i = 1; i < kMaxRecvs; ++i) regions[i] = nullptr;
  ASSERT_TRUE(pair.receiver->iflush(kMaxRecvs, data, sizes, regions, &flush).isOk());
  EXPECT_EQ(flush, nullptr);
}

TEST_F(OfiDeviceMemory, ReadBackOutsideItsRegionIsAnError) {
  Pair pair;
  if (!openPair(/*read_back=*/true, /*no_inline=*/false, &pair)) return;
  std::vector<uint8_t> buffer(4096), other(4096);
  std::unique_ptr<MemoryRegion> mr;
  ASSERT_TRUE(
      pair.receiver->registerMemory(buffer.data(), buffer.size(), MemoryType::kHost, &mr).isOk());
  void* data = other.data();
  size_t size = 64;
  MemoryRegion* region = mr.get();
  std::unique_ptr<Request> flush;
  Status status = pair.receiver->iflush(1, &data, &size, &region, &flush);
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find("not inside the ofi registration"), std::string::npos)
      << status.toString();
}

TEST_F(OfiDeviceMemory, WithoutRmaReadsThereIsNothingToFlush) {
  Pair pair;
  if (!openPair(/*read_back=*/false, /*no_inline=*/false, &pair)) return;
  std::vector<uint8_t> got;
  std::unique_ptr<MemoryRegion> mr;
  roundTrip(&pair, 5000, &got, &mr);
  void* data = got.data();
  size_t size = 5000;
  MemoryRegion* region = mr.get();
  std::unique_ptr<Request> flush;
  ASSERT_TRUE(pair.receiver->iflush(1, &data, &size, &region, &flush).isOk());
  EXPECT_EQ(flush, nullptr);
}

TEST_F(OfiDeviceMemory, ReadBackAfterCloseFailsInsteadOfHanging) {
  Pair pair;
  if (!openPair(/*read_back=*/true, /*no_inline=*/false, &pair)) return;
  std::vector<uint8_t> buffer(4096);
  std::unique_ptr<MemoryRegion> mr;
  ASSERT_TRUE(
      pair.receiver->registerMemory(buffer.data(), buffer.size(), MemoryType::kHost, &mr).isOk());
  pair.receiver->close();
  void* data = buffer.data();
  size_t size = 64;
  MemoryRegion* region = mr.get();
  std::unique_ptr<Request> flush;
  Status status = pair.receiver->iflush(1, &data, &size, &region, &flush);
  if (status.isOk()) {
    ASSERT_NE(flush, nullptr);
    status = flush->wait(kWaitMs, nullptr);
  }
  EXPECT_EQ(status.code(), StatusCode::kRemote) << status.toString();
}

std::mutex g_log_mu;
std::vector<std::string> g_log;
void captureSink(log::Level, unsigned long, const char*, int, const char* message) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log.push_back(message);
}

// How many "inline up to 0 bytes" connection lines the log holds.
int connectionsWithoutInline() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  int count = 0;
  for (const std::string& line : g_log) {
    count += line.find("ofi: connection to peer") != std::string::npos &&
             line.find("inline up to 0 bytes") != std::string::npos;
  }
  return count;
}

// Without inline payloads every message, even a byte, travels as chunks straight into the
// receive buffer: what a CUDA buffer needs. Sizes around the old inline limit and empty ones.
TEST_F(OfiDeviceMemory, EveryPayloadAsChunksWhenInlineIsOff) {
  Pair pair;
  {
    std::lock_guard<std::mutex> lock(g_log_mu);
    g_log.clear();
  }
  log::setSink(&captureSink, log::Level::kInfo);
  const bool opened = openPair(/*read_back=*/false, /*no_inline=*/true, &pair);
  log::setSink(&log::stderrSink, log::Level::kWarn);
  if (!opened) return;
  EXPECT_EQ(connectionsWithoutInline(), 2);
  for (size_t size : {size_t{0}, size_t{1}, size_t{17}, size_t{4000}, size_t{4096},
                      size_t{65537}}) {
    SCOPED_TRACE(size);
    std::vector<uint8_t> got;
    std::unique_ptr<MemoryRegion> mr;
    roundTrip(&pair, size, &got, &mr);
  }
}

TEST_F(OfiDeviceMemory, OneSideWithoutInlineTurnsItOffForBoth) {
  // The sides' own settings differ: the connection agrees on none.
  ofi::OfiOptions plain;
  plain.provider = "tcp";
  plain.domains = "lo";
  ofi::OfiOptions strict = plain;
  strict.no_inline = true;
  std::shared_ptr<Network> a, b;
  ASSERT_TRUE(ofi::createNetwork(plain, &a).isOk());
  ASSERT_TRUE(ofi::createNetwork(strict, &b).isOk());
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(b->devices().front()->listen(&listener).isOk());
  std::unique_ptr<PendingConnection> pending;
  ASSERT_TRUE(a->devices().front()->connect(listener->handle(), {}, &pending).isOk());
  Pair pair;
  {
    std::lock_guard<std::mutex> lock(g_log_mu);
    g_log.clear();
  }
  log::setSink(&captureSink, log::Level::kInfo);
  Status status = finishConnect(pending.get(), listener.get(), &pair.sender, &pair.receiver);
  log::setSink(&log::stderrSink, log::Level::kWarn);
  ASSERT_TRUE(status.isOk()) << status.toString();
  EXPECT_EQ(connectionsWithoutInline(), 2) << "both ends agree on no inline payloads";
  for (size_t size : {size_t{1}, size_t{100}, size_t{3000}}) {
    std::vector<uint8_t> got;
    std::unique_ptr<MemoryRegion> mr;
    roundTrip(&pair, size, &got, &mr);
  }
}

}  // namespace
}  // namespace tally::transport::test
