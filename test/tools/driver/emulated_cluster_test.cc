// SPDX-License-Identifier: Apache-2.0
// Creation, teardown and cleanup of the emulated cluster: what exists after create(), that
// destroy() and a failed create() leave nothing, removeStale(), cleanup on SIGTERM, the refusal
// without root, and the tc commands that set a node's caps (checked without root) and setRate()
// changing them (as root).
#include "tools/driver/emulated_cluster.h"

#include <grp.h>
#include <net/if.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "test/tools/driver/emulation_test_util.h"

namespace tally::driver::test {
namespace {

// Waits up to timeout_ms for `pid`; its wait status, or -1 when it is still running (then killed).
int waitChild(pid_t pid, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return wstatus;
}

// The checks of the refusal without root, run as a non-root user: 0 when all hold.
int checkRefusedWithoutRoot() {
  std::string why;
  if (EmulatedCluster::canEmulate(&why)) return 10;
  if (why.find("--emulate needs root") == std::string::npos) return 11;
  EmulationOptions options;
  options.nodes = 2;
  std::unique_ptr<EmulatedCluster> cluster;
  Status s = EmulatedCluster::create(options, &cluster);
  if (s.code() != StatusCode::kInvalidUsage) return 12;
  if (s.message().find("--emulate needs root") == std::string::npos) return 13;
  if (cluster != nullptr) return 14;
  return 0;
}

TEST(EmulatedClusterRoot, RefusedWithoutRootAndCreatesNothing) {
  if (::geteuid() != 0) {
    EXPECT_EQ(checkRefusedWithoutRoot(), 0);
    EXPECT_FALSE(anyNamespaceOf(::getpid()));
    return;
  }
  // As root: drop to nobody in a child and check there.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0)
      ::_exit(20);
    ::_exit(checkRefusedWithoutRoot());
  }
  int wstatus = waitChild(pid, 10000);
  ASSERT_TRUE(WIFEXITED(wstatus)) << "status " << wstatus;
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "check number that failed (see checkRefusedWithoutRoot)";
  EXPECT_FALSE(anyNamespaceOf(pid));
}

TEST_F(EmulationTest, CreatesNamedNodesAndDestroyRemovesEverything) {
  const pid_t me = ::getpid();
  EmulationOptions options;
  options.nodes = 2;
  options.rate = "500mbit";
  options.tcp_congestion = "reno";  // built into every kernel, and not what hosts default to
  std::unique_ptr<EmulatedCluster> cluster;
  ASSERT_TRUE(EmulatedCluster::create(options, &cluster).isOk());
  ASSERT_EQ(cluster->nodes().size(), 2u);
  EXPECT_EQ(cluster->nodes()[0].netns, runPrefix(me) + "0");
  EXPECT_EQ(cluster->nodes()[0].address, "198.18.0.1");
  EXPECT_EQ(cluster->nodes()[1].address, "198.18.0.2");

  const std::string sw = cluster->switchNetns();
  const std::string veth0 = "tlv" + std::to_string(me) + "-0";
  std::string listed = shell("ip netns list");
  for (const auto& name : {sw, runPrefix(me) + "0", runPrefix(me) + "1"})
    EXPECT_NE(listed.find(name), std::string::npos) << name << " missing from\n" << listed;
  EXPECT_NE(shell("ip -n " + sw + " link show master tlybr" + std::to_string(me)).find(veth0),
            std::string::npos);
  EXPECT_NE(shell("tc -n " + sw + " qdisc show dev " + veth0).find("rate 500Mbit"),
            std::string::npos);
  std::string inside = shell("ip -n " + runPrefix(me) + "1 addr show dev eth0");
  EXPECT_NE(inside.find("198.18.0.2/15"), std::string::npos) << inside;
  EXPECT_NE(shell("tc -n " + runPrefix(me) + "1 qdisc show dev eth0").find("rate 500Mbit"),
            std::string::npos);

  // Each node has the congestion control asked for; the host keeps its own.
  const std::string host_cc = shell("cat /proc/sys/net/ipv4/tcp_congestion_control");
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(shell("ip netns exec " + runPrefix(me) + std::to_string(i) +
                    " cat /proc/sys/net/ipv4/tcp_congestion_control"),
              "reno\n");
  EXPECT_EQ(shell("cat /proc/sys/net/ipv4/tcp_congestion_control"), host_cc);

  // One cluster per process.
  std::unique_ptr<EmulatedCluster> second;
  EXPECT_EQ(EmulatedCluster::create(options, &second).code(), StatusCode::kInvalidUsage);

  // A process left inside node 0 loses its link when the cluster goes.
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(go[1]);
    if (!EmulatedCluster::enter(cluster->nodes()[0]).isOk()) ::_exit(2);
    if (::if_nametoindex("eth0") == 0) ::_exit(3);
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(4);
    for (int i = 0; i < 500 && ::if_nametoindex("eth0") != 0; ++i) ::usleep(10000);
    ::_exit(::if_nametoindex("eth0") == 0 ? 0 : 5);
  }
  ::close(go[0]);

  ASSERT_TRUE(cluster->destroy().isOk());
  EXPECT_TRUE(cluster->destroy().isOk());  // idempotent
  EXPECT_FALSE(anyNamespaceOf(me)) << shell("ip netns list");
  std::string links = shell("ip link show");
  EXPECT_EQ(links.find("tlv" + std::to_string(me)), std::string::npos) << links;
  EXPECT_EQ(links.find("tlybr" + std::to_string(me)), std::string::npos) << links;

  ASSERT_EQ(::write(go[1], "x", 1), 1);
  ::close(go[1]);
  int wstatus = waitChild(child, 10000);
  ASSERT_TRUE(WIFEXITED(wstatus)) << "status " << wstatus;
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "3: no eth0 in the node, 5: eth0 outlived destroy()";
}

// What create() and setRate() run on each end of a node's link, without running it.
TEST(EmulatedClusterCommands, CapsOnBothEndsWithTheCreatedBurstAndLatency) {
  EmulationOptions options;
  options.rate = "400mbit";
  options.burst = "64kb";
  options.latency = "20ms";
  using Argv = std::vector<std::string>;
  const std::vector<Argv> change =
      EmulatedCluster::capCommands("change", 1234, 3, "40mbit", options);
  ASSERT_EQ(change.size(), 2u);
  EXPECT_EQ(change[0], (Argv{"tc", "-n", "tly1234-sw", "qdisc", "change", "dev", "tlv1234-3",
                             "root", "tbf", "rate", "40mbit", "burst", "64kb", "latency", "20ms"}));
  EXPECT_EQ(change[1], (Argv{"tc", "-n", "tly1234-3", "qdisc", "change", "dev", "eth0", "root",
                             "tbf", "rate", "40mbit", "burst", "64kb", "latency", "20ms"}));
  const std::vector<Argv> add = EmulatedCluster::capCommands("add", 1234, 3, "400mbit", options);
  ASSERT_EQ(add.size(), 2u);
  EXPECT_EQ(add[0][4], "add");
  EXPECT_EQ(add[0][10], "400mbit");
  EXPECT_EQ(add[1][2], "tly1234-3");
}

TEST(EmulatedClusterCommands, ReadsTcByteCounts) {
  uint64_t n = 0;
  const std::pair<const char*, uint64_t> cases[] = {
      {"16kb", 16384}, {"256k", 262144}, {"1mb", 1048576}, {"1500b", 1500},
      {"1500", 1500},  {"128kbit", 16384}, {"1gb", 1073741824}, {"16KB", 16384}};
  for (const auto& [text, bytes] : cases) {
    ASSERT_TRUE(tcBytes(text, &n).isOk()) << text;
    EXPECT_EQ(n, bytes) << text;
  }
  for (const char* bad : {"", "kb", "16 kb", "-1kb", "16kbits", "1234567890kb"}) {
    EXPECT_EQ(tcBytes(bad, &n).code(), StatusCode::kInvalidUsage) << bad;
  }
}

// A bucket smaller than TCP's largest segment: the nodes' packets fit in it, so tbf never cuts
// them into frames (which costs the host CPU for every node); a large bucket leaves them alone.
TEST_F(EmulationTest, SmallBurstCapsTheNodesPackets) {
  const pid_t me = ::getpid();
  auto gsoOf = [&](const std::string& netns, const std::string& dev) {
    const std::string shown = shell("ip -d -n " + netns + " link show dev " + dev);
    const size_t at = shown.find("gso_max_size ");
    return at == std::string::npos ? std::string("?")
                                   : shown.substr(at + 13, shown.find(' ', at + 13) - at - 13);
  };
  for (const auto& [burst, want] : std::vector<std::pair<std::string, std::string>>{
           {"16kb", "14336"}, {"1kb", "1514"}, {"256kb", "65536"}}) {
    EmulationOptions options;
    options.nodes = 1;
    options.rate = "1gbit";
    options.burst = burst;
    std::unique_ptr<EmulatedCluster> cluster;
    Status s = EmulatedCluster::create(options, &cluster);
    ASSERT_TRUE(s.isOk()) << burst << ": " << s.toString();
    EXPECT_EQ(gsoOf(runPrefix(me) + "0", "eth0"), want) << burst;
    EXPECT_EQ(gsoOf(cluster->switchNetns(), "tlv" + std::to_string(me) + "-0"), want) << burst;
    ASSERT_TRUE(cluster->destroy().isOk());
  }
  EmulationOptions bad;
  bad.nodes = 1;
  bad.burst = "lots";
  std::unique_ptr<EmulatedCluster> cluster;
  EXPECT_EQ(EmulatedCluster::create(bad, &cluster).code(), StatusCode::kInvalidUsage);
  EXPECT_FALSE(anyNamespaceOf(me)) << shell("ip netns list");
}

TEST_F(EmulationTest, SetRateChangesOneNodeBothWays) {
  EmulationOptions options;
  options.nodes = 2;
  options.rate = "500mbit";
  std::unique_ptr<EmulatedCluster> cluster;
  ASSERT_TRUE(EmulatedCluster::create(options, &cluster).isOk());
  const pid_t me = ::getpid();
  const std::string sw =
      "tc -n " + cluster->switchNetns() + " qdisc show dev tlv" + std::to_string(me) + "-";
  auto toNode = [&](int i) { return shell(sw + std::to_string(i)); };
  auto fromNode = [&](int i) {
    return shell("tc -n " + runPrefix(me) + std::to_string(i) + " qdisc show dev eth0");
  };

  Status s = cluster->setRate(1, "50mbit");
  ASSERT_TRUE(s.isOk()) << s.toString();
  for (const std::string& shown : {toNode(1), fromNode(1)}) {
    EXPECT_NE(shown.find("rate 50Mbit"), std::string::npos) << shown;
    EXPECT_NE(shown.find("burst 256Kb"), std::string::npos) << shown;  // as created
  }
  for (const std::string& shown : {toNode(0), fromNode(0)})
    EXPECT_NE(shown.find("rate 500Mbit"), std::string::npos) << shown;  // untouched

  ASSERT_TRUE(cluster->setRate(1, "500mbit").isOk());
  EXPECT_NE(fromNode(1).find("rate 500Mbit"), std::string::npos) << fromNode(1);

  EXPECT_EQ(cluster->setRate(2, "50mbit").code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(cluster->setRate(-1, "50mbit").code(), StatusCode::kInvalidUsage);
  s = cluster->setRate(0, "notarate");
  EXPECT_EQ(s.code(), StatusCode::kSystem);
  EXPECT_NE(s.message().find("qdisc change"), std::string::npos) << s.toString();
  EXPECT_NE(toNode(0).find("rate 500Mbit"), std::string::npos) << toNode(0);

  ASSERT_TRUE(cluster->destroy().isOk());
  EXPECT_FALSE(cluster->setRate(0, "50mbit").isOk());
}

TEST_F(EmulationTest, UnknownCongestionControlFailsAndLeavesNothing) {
  EmulationOptions options;
  options.nodes = 2;
  options.tcp_congestion = "nosuchcc";
  std::unique_ptr<EmulatedCluster> cluster;
  Status s = EmulatedCluster::create(options, &cluster);
  EXPECT_EQ(s.code(), StatusCode::kSystem);
  EXPECT_NE(s.message().find("TCP congestion control nosuchcc"), std::string::npos)
      << s.toString();
  EXPECT_EQ(cluster, nullptr);
  EXPECT_FALSE(anyNamespaceOf(::getpid())) << shell("ip netns list");
}

TEST_F(EmulationTest, RejectsBadNodeCounts) {
  EmulationOptions options;
  std::unique_ptr<EmulatedCluster> cluster;
  options.nodes = 0;
  EXPECT_EQ(EmulatedCluster::create(options, &cluster).code(), StatusCode::kInvalidUsage);
  options.nodes = EmulatedCluster::kMaxNodes + 1;
  EXPECT_EQ(EmulatedCluster::create(options, &cluster).code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(cluster, nullptr);
  EXPECT_FALSE(anyNamespaceOf(::getpid()));
}

TEST_F(EmulationTest, FailedCreateLeavesNothingBehind) {
  EmulationOptions options;
  options.nodes = 3;
  options.rate = "notarate";  // tc refuses it after the switch and node 0 exist
  std::unique_ptr<EmulatedCluster> cluster;
  Status s = EmulatedCluster::create(options, &cluster);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), StatusCode::kSystem);
  EXPECT_NE(s.message().find("tc -n"), std::string::npos) << s.toString();
  EXPECT_NE(s.message().find("notarate"), std::string::npos) << s.toString();
  EXPECT_EQ(cluster, nullptr);
  EXPECT_FALSE(anyNamespaceOf(::getpid())) << shell("ip netns list");
}

TEST_F(EmulationTest, RemoveStaleRemovesOnlyDeadRuns) {
  // A pid that no longer exists: a child that has exited and been reaped.
  pid_t dead = ::fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) ::_exit(0);
  ASSERT_EQ(waitChild(dead, 5000), 0);
  const std::string d = std::to_string(dead);
  const pid_t me = ::getpid();
  // Leftovers as a killed run would leave them, made by hand, plus one of a live run (us).
  std::string made = shell("ip netns add tly" + d + "-sw && ip netns add tly" + d + "-0 && " +
                           "ip -n tly" + d + "-sw link add tlv" + d + "-0 type veth peer name " +
                           "eth0 netns tly" + d + "-0 && ip netns add " + runPrefix(me) + "7");
  ASSERT_TRUE(anyNamespaceOf(dead)) << made;
  ASSERT_TRUE(anyNamespaceOf(me)) << made;

  Status s = EmulatedCluster::removeStale();
  EXPECT_TRUE(s.isOk()) << s.toString();
  EXPECT_FALSE(anyNamespaceOf(dead)) << shell("ip netns list");
  EXPECT_TRUE(anyNamespaceOf(me)) << "a live run's namespace was removed";

  EXPECT_TRUE(EmulatedCluster::removeRun(me).isOk());
  EXPECT_FALSE(anyNamespaceOf(me));
}

TEST_F(EmulationTest, SigtermRemovesTheClusterAndEndsTheProcess) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    if (!EmulatedCluster::cleanUpOnSignals().isOk()) ::_exit(2);
    EmulationOptions options;
    options.nodes = 2;
    std::unique_ptr<EmulatedCluster> cluster;
    if (!EmulatedCluster::create(options, &cluster).isOk()) ::_exit(3);
    if (::write(ready[1], "r", 1) != 1) ::_exit(4);
    for (int i = 0; i < 1000; ++i) ::usleep(10000);  // killed long before this ends
    ::_exit(5);
  }
  ::close(ready[1]);
  char c = 0;
  pollfd p = {ready[0], POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 15000), 1);
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "the child could not create its cluster";
  ::close(ready[0]);
  ASSERT_TRUE(anyNamespaceOf(child));
  ::kill(child, SIGTERM);
  int wstatus = waitChild(child, 15000);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "status " << wstatus;
  EXPECT_EQ(WTERMSIG(wstatus), SIGTERM);
  EXPECT_FALSE(anyNamespaceOf(child)) << shell("ip netns list");
  (void)EmulatedCluster::removeRun(child);  // in case the check above failed
}

}  // namespace
}  // namespace tally::driver::test
