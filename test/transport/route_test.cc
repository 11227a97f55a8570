// SPDX-License-Identifier: Apache-2.0
// The interface the kernel routes a peer to, checked against this host's own tables
// (/proc/net/route, getifaddrs through findInterfaces), and the link choice built on it, with a
// made-up route and sysfs.
#include "transport/route.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fake_sysfs.h"

namespace tally::transport {
namespace {

// The interface of the IPv4 default route, read from /proc/net/route; empty when there is none.
std::string defaultRouteInterface() {
  std::ifstream file("/proc/net/route");
  std::string line;
  std::getline(file, line);  // the header
  std::string best;
  long best_metric = -1;
  while (std::getline(file, line)) {
    std::istringstream fields(line);
    std::string iface, destination, gateway, flags, refcnt, use, metric, mask;
    if (!(fields >> iface >> destination >> gateway >> flags >> refcnt >> use >> metric >> mask)) {
      continue;
    }
    if (destination != "00000000" || mask != "00000000") continue;
    const long m = std::stol(metric);
    if (best_metric < 0 || m < best_metric) {
      best = iface;
      best_metric = m;
    }
  }
  return best;
}

TEST(RouteInterface, LoopbackAddressesGoOverLoopback) {
  Interface iface;
  ASSERT_TRUE(routeInterface("127.0.0.1", &iface).isOk());
  EXPECT_EQ(iface.name, "lo");
  EXPECT_TRUE(iface.loopback);
  ASSERT_TRUE(routeInterface("localhost", &iface).isOk());
  EXPECT_EQ(iface.name, "lo");
}

// The kernel delivers a packet to one of this host's own addresses through loopback, whichever
// interface holds the address.
TEST(RouteInterface, OwnAddressGoesOverLoopback) {
  std::vector<Interface> ifaces;
  ASSERT_TRUE(findInterfaces("", &ifaces).isOk());
  if (ifaces.empty() || ifaces[0].loopback) GTEST_SKIP() << "no interface but loopback";
  Interface iface;
  ASSERT_TRUE(routeInterface(ifaces[0].address, &iface).isOk()) << ifaces[0].address;
  EXPECT_TRUE(iface.loopback);
  EXPECT_EQ(iface.name, "lo");
}

TEST(RouteInterface, OtherAddressesFollowTheDefaultRoute) {
  const std::string expected = defaultRouteInterface();
  if (expected.empty()) GTEST_SKIP() << "no IPv4 default route";
  Interface iface;
  // TEST-NET-2: never a local address, so reached through the default route.
  Status st = routeInterface("198.51.100.1", &iface);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_EQ(iface.name, expected);
  EXPECT_FALSE(iface.loopback);
  EXPECT_FALSE(iface.address.empty());
}

TEST(RouteInterface, UnresolvableHostsAreInvalidUsage) {
  Interface iface;
  iface.name = "untouched";
  EXPECT_EQ(routeInterface("", &iface).code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(routeInterface("no-such-host.invalid", &iface).code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(iface.name, "untouched");
}

// ---- chooseLink over a made-up route and sysfs ------------------------------------------------

struct FakeRoute {
  Interface answer;
  Status status;
  std::string asked;  // the host chooseLink looked up
  int calls = 0;
  RouteLookup lookup() {
    return [this](const std::string& host, Interface* out) {
      ++calls;
      asked = host;
      if (status) *out = answer;
      return status;
    };
  }
};

class ChooseLink : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(sysfs_.root().empty());
    setSpeed("eth9", "25000\n");
    setSpeed("eth0", "1000\n");
    setSpeed("ens5", "-1\n");
    device_.name = "eth0";
    device_.speed_mbps = 1000;
    query_.sys_class_net = sysfs_.root() + "/class/net";
    query_.device = &device_;
    query_.peer = "10.1.2.3:5555";
    route_.answer = Interface{"eth9", "10.1.0.7", false};
    query_.route = route_.lookup();
  }
  void setSpeed(const std::string& name, const std::string& text) {
    const std::string dir = sysfs_.root() + "/class/net/" + name;
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/speed") << text;
  }

  test::FakeSysfs sysfs_{"/class/net/"};
  DeviceProperties device_;
  FakeRoute route_;
  LinkQuery query_;
};

TEST_F(ChooseLink, TheReducersRouteAndItsSpeed) {
  const LinkChoice c = chooseLink(query_);
  EXPECT_EQ(route_.asked, "10.1.2.3");
  EXPECT_EQ(c.interface, "eth9");
  EXPECT_EQ(c.speed_mbps, 25000);
  EXPECT_TRUE(c.speed_known);
  EXPECT_FALSE(c.loopback);
  EXPECT_NE(c.reason.find("routed over eth9"), std::string::npos) << c.reason;
}

TEST_F(ChooseLink, TheSettingWins) {
  query_.override_mbps = 400;
  const LinkChoice c = chooseLink(query_);
  EXPECT_EQ(c.interface, "eth9");
  EXPECT_EQ(c.speed_mbps, 400);
  EXPECT_TRUE(c.speed_known);
  EXPECT_NE(c.reason.find("TALLY_LINK_MBPS"), std::string::npos) << c.reason;
}

TEST_F(ChooseLink, LoopbackAndSilentInterfacesGetTheUnknownSpeed) {
  route_.answer = Interface{"lo", "127.0.0.1", true};
  LinkChoice c = chooseLink(query_);
  EXPECT_EQ(c.interface, "lo");
  EXPECT_TRUE(c.loopback);
  EXPECT_EQ(c.speed_mbps, kUnknownLinkMbps);
  EXPECT_FALSE(c.speed_known);
  EXPECT_NE(c.reason.find("loopback"), std::string::npos) << c.reason;

  route_.answer = Interface{"ens5", "10.1.0.7", false};  // a cloud NIC saying -1
  c = chooseLink(query_);
  EXPECT_EQ(c.interface, "ens5");
  EXPECT_FALSE(c.loopback);
  EXPECT_EQ(c.speed_mbps, kUnknownLinkMbps);
  EXPECT_FALSE(c.speed_known);
}

TEST_F(ChooseLink, NoRouteFallsBackToDeviceZero) {
  route_.status = Status::system("no route to 10.1.2.3");
  const LinkChoice c = chooseLink(query_);
  EXPECT_EQ(c.interface, "eth0");
  EXPECT_EQ(c.speed_mbps, 1000);  // eth0's sysfs speed
  EXPECT_NE(c.reason.find("no route to reducer 10.1.2.3:5555"), std::string::npos) << c.reason;
}

TEST_F(ChooseLink, WithoutReducersDeviceZero) {
  query_.peer.clear();
  const LinkChoice c = chooseLink(query_);
  EXPECT_EQ(route_.calls, 0);
  EXPECT_EQ(c.interface, "eth0");
  EXPECT_EQ(c.speed_mbps, 1000);
}

// Over verbs or ofi the reducer connections ride the fabric device, whatever IP routes say.
TEST_F(ChooseLink, FabricDeviceCarriesTheReducers) {
  query_.over_ip = false;
  query_.transport = "verbs";
  device_.name = "mlx5_0";
  device_.speed_mbps = 200000;
  const LinkChoice c = chooseLink(query_);
  EXPECT_EQ(route_.calls, 0);
  EXPECT_EQ(c.interface, "mlx5_0");
  EXPECT_EQ(c.speed_mbps, 200000);
  EXPECT_TRUE(c.speed_known);
  EXPECT_NE(c.reason.find("verbs device"), std::string::npos) << c.reason;
}

TEST_F(ChooseLink, NothingKnown) {
  query_.peer.clear();
  query_.device = nullptr;
  const LinkChoice c = chooseLink(query_);
  EXPECT_TRUE(c.interface.empty());
  EXPECT_EQ(c.speed_mbps, kUnknownLinkMbps);
  EXPECT_NE(describeLink(c).find("(none)"), std::string::npos);
}

}  // namespace
}  // namespace tally::transport
