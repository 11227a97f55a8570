// SPDX-License-Identifier: Apache-2.0
// Traffic through the emulated cluster: a TCP transfer between two nodes runs near the cap and
// not above it, and a tally-reducer started in a node listens on the node's address and is
// reached from another node.
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <new>
#include <vector>

#include "test/tools/driver/emulation_test_util.h"
#include "tools/driver/process.h"

namespace tally::driver::test {
namespace {

using Clock = std::chrono::steady_clock;

// Lives in a shared anonymous mapping, written by the forked children.
struct TransferResult {
  std::atomic<int> port{0};
  std::atomic<int64_t> bytes{0};   // received after the first read
  std::atomic<int64_t> micros{0};  // from the first read to EOF
};

constexpr double kCapMbit = 200;
constexpr auto kSendFor = std::chrono::milliseconds(1500);

int receive(const EmulatedNode& node, TransferResult* result) {
  if (!EmulatedCluster::enter(node).isOk()) return 10;
  int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = ipv4(node.address, 0);
  socklen_t len = sizeof(a);
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(ls, 1) != 0 ||
      ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return 11;
  result->port.store(ntohs(a.sin_port));
  pollfd p = {ls, POLLIN, 0};
  if (::poll(&p, 1, 10000) != 1) return 12;
  int fd = ::accept(ls, nullptr, nullptr);
  if (fd < 0) return 13;
  std::vector<char> buf(1 << 18);
  int64_t bytes = 0;
  bool first = true;
  Clock::time_point start;
  for (;;) {
    pollfd q = {fd, POLLIN, 0};
    if (::poll(&q, 1, 10000) != 1) return 14;
    ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return 15;
    if (n == 0) break;
    if (first) {
      first = false;
      start = Clock::now();
    } else {
      bytes += n;
    }
  }
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
  result->bytes.store(bytes);
  result->micros.store(us.count());
  ::close(fd);
  ::close(ls);
  return 0;
}

int send(const EmulatedNode& node, const EmulatedNode& to, TransferResult* result) {
  if (!EmulatedCluster::enter(node).isOk()) return 20;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (result->port.load() == 0) {
    if (Clock::now() >= deadline) return 21;
    ::usleep(1000);
  }
  int fd = connectWithin(to.address, result->port.load(), 5000);
  if (fd < 0) return 22;
  timeval tv = {5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  std::vector<char> buf(1 << 16, 'x');
  auto stop = Clock::now() + kSendFor;
  while (Clock::now() < stop) {
    ssize_t n = ::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL);
    if (n < 0 && errno != EINTR) return 23;
  }
  ::close(fd);  // queued data still goes out, then EOF
  return 0;
}

TEST_F(EmulationTest, TransferBetweenNodesRunsAtTheCap) {
  EmulationOptions options;
  options.nodes = 3;
  options.rate = "200mbit";
  std::unique_ptr<EmulatedCluster> cluster;
  Status s = EmulatedCluster::create(options, &cluster);
  ASSERT_TRUE(s.isOk()) << s.toString();
  const auto& nodes = cluster->nodes();

  void* mem = ::mmap(nullptr, sizeof(TransferResult), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* result = new (mem) TransferResult();
  std::vector<WorkerExit> exits;
  ASSERT_TRUE(runWorkers(
                  2,
                  [&](int rank) {
                    return rank == 0 ? receive(nodes[2], result) : send(nodes[0], nodes[2], result);
                  },
                  20000, &exits)
                  .isOk());
  std::string why;
  ASSERT_TRUE(allWorkersOk(exits, &why)) << why;

  double seconds = static_cast<double>(result->micros.load()) / 1e6;
  double mbit = static_cast<double>(result->bytes.load()) * 8 / 1e6 / seconds;
  ::munmap(mem, sizeof(TransferResult));
  EXPECT_GT(seconds, 1.0);
  EXPECT_LT(mbit, 1.25 * kCapMbit) << "the cap did not hold";
  EXPECT_GT(mbit, 0.5 * kCapMbit) << "far below the cap";
  std::printf("transfer node 0 -> node 2 at a %.0f Mbit/s cap: %.1f Mbit/s over %.2f s\n", kCapMbit,
              mbit, seconds);
  EXPECT_TRUE(cluster->destroy().isOk());
}

TEST_F(EmulationTest, ReducerInANodeIsReachedFromAnotherNode) {
  EmulationOptions options;
  options.nodes = 3;
  options.rate = "1gbit";
  std::unique_ptr<EmulatedCluster> cluster;
  Status s = EmulatedCluster::create(options, &cluster);
  ASSERT_TRUE(s.isOk()) << s.toString();
  const auto& nodes = cluster->nodes();

  std::vector<std::unique_ptr<ReducerProcess>> reducers;
  s = startReducers(TALLY_REDUCER_BIN, {reducerInNode(nodes[1], {"--threads", "1"})}, 10000,
                    &reducers);
  ASSERT_TRUE(s.isOk()) << s.toString();
  const std::string address = reducers[0]->address();
  ASSERT_EQ(address.rfind(nodes[1].address + ":", 0), 0u) << address;
  int port = std::stoi(address.substr(nodes[1].address.size() + 1));
  ASSERT_GT(port, 0);

  std::vector<WorkerExit> exits;
  ASSERT_TRUE(runWorkers(
                  1,
                  [&](int) {
                    if (!EmulatedCluster::enter(nodes[0]).isOk()) return 10;
                    int fd = connectWithin(nodes[1].address, port, 5000);
                    if (fd < 0) return 11;
                    ::close(fd);
                    // Not on this node's loopback: the reducer lives in another namespace.
                    int local = connectWithin("127.0.0.1", port, 1000);
                    if (local >= 0) return 12;
                    return 0;
                  },
                  15000, &exits)
                  .isOk());
  std::string why;
  EXPECT_TRUE(allWorkersOk(exits, &why)) << why << "(11: unreachable, 12: also on loopback)";

  // A namespace that does not exist: the child cannot enter it and launch() says so.
  ReducerOptions bad = reducerInNode(nodes[2]);
  bad.netns = "tly-no-such-namespace";
  std::unique_ptr<ReducerProcess> none;
  EXPECT_FALSE(ReducerProcess::launch(TALLY_REDUCER_BIN, bad, 10000, &none).isOk());
  EXPECT_EQ(none, nullptr);

  EXPECT_TRUE(reducers[0]->stop().isOk());
  EXPECT_TRUE(cluster->destroy().isOk());
}

}  // namespace
}  // namespace tally::driver::test
