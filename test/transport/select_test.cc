// SPDX-License-Identifier: Apache-2.0
// TALLY_TRANSPORT: parsing, the config from Params, and the choice openNetwork makes, driven with
// fake backends so that every branch runs without RDMA hardware.
#include "transport/network.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "test/transport/fake_sysfs.h"

namespace tally::transport {
namespace {

// ---- Parsing and config ----

TEST(TransportKind, ParsesTheFourNames) {
  const std::vector<std::pair<std::string, TransportKind>> cases = {
      {"auto", TransportKind::kAuto},
      {"tcp", TransportKind::kTcp},
      {"ofi", TransportKind::kOfi},
      {" verbs ", TransportKind::kVerbs}};
  for (const auto& [text, want] : cases) {
    TransportKind got = TransportKind::kAuto;
    ASSERT_TRUE(parseTransportKind(text, &got).isOk()) << text;
    EXPECT_EQ(got, want) << text;
  }
  EXPECT_STREQ(transportKindName(TransportKind::kVerbs), "verbs");
  EXPECT_STREQ(transportKindName(TransportKind::kOfi), "ofi");
}

TEST(TransportKind, OtherValuesAreInvalidUsageNamingThem) {
  for (const std::string bad : {"", "TCP", "rdma", "ib", "tcp,ofi"}) {
    TransportKind got = TransportKind::kVerbs;
    Status st = parseTransportKind(bad, &got);
    EXPECT_EQ(st.code(), StatusCode::kInvalidUsage) << "'" << bad << "'";
    EXPECT_NE(st.message().find("'" + bad + "'"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("auto, tcp, ofi, verbs"), std::string::npos) << st.message();
    EXPECT_EQ(got, TransportKind::kVerbs) << "untouched on error";
  }
}

Params paramsFrom(std::map<std::string, std::string> values) {
  Params p;
  Status st = Params::load(MapParamSource(std::move(values)), &p);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return p;
}

TEST(NetworkConfigFromParams, DefaultsAreAutoAndTwoQps) {
  NetworkConfig c;
  c.kind = TransportKind::kVerbs;
  ASSERT_TRUE(networkConfigFromParams(Params::defaults(), &c).isOk());
  EXPECT_EQ(c.kind, TransportKind::kAuto);
  EXPECT_EQ(c.ib_qps_per_connection, 2);
  EXPECT_EQ(c.ib_hca, "");
  EXPECT_EQ(c.ifname_spec, "");
  EXPECT_EQ(c.tcp.sockets, 2);
  EXPECT_EQ(c.timeouts.connect_ms, 120000);
  EXPECT_EQ(c.timeouts.io_ms, 300000);
}

TEST(NetworkConfigFromParams, ValuesFlowThrough) {
  NetworkConfig c;
  Status st = networkConfigFromParams(paramsFrom({{"TALLY_TRANSPORT", "verbs"},
                                                  {"TALLY_IB_HCA", "^mlx5_1,mlx5_0:1"},
                                                  {"TALLY_IB_QPS_PER_CONNECTION", "4"},
                                                  {"NCCL_SOCKET_IFNAME", "eth"},
                                                  {"TALLY_SOCKET_NSOCKS", "5"},
                                                  {"TALLY_CONNECT_TIMEOUT_MS", "3s"},
                                                  {"TALLY_TIMEOUT_MS", "7s"}}),
                                      &c);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_EQ(c.kind, TransportKind::kVerbs);
  EXPECT_EQ(c.ib_hca, "^mlx5_1,mlx5_0:1");
  EXPECT_EQ(c.ib_qps_per_connection, 4);
  EXPECT_EQ(c.ifname_spec, "eth") << "NCCL_SOCKET_IFNAME when TALLY_SOCKET_IFNAME is empty";
  EXPECT_EQ(c.tcp.sockets, 5);
  EXPECT_EQ(c.timeouts.connect_ms, 3000);
  EXPECT_EQ(c.timeouts.io_ms, 7000);

  ASSERT_TRUE(networkConfigFromParams(
                  paramsFrom({{"TALLY_SOCKET_IFNAME", "=lo"}, {"NCCL_SOCKET_IFNAME", "eth"}}), &c)
                  .isOk());
  EXPECT_EQ(c.ifname_spec, "=lo");
}

TEST(NetworkConfigFromParams, BadValuesNameTheVariable) {
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {{{"TALLY_TRANSPORT", "infiniband"}}, "TALLY_TRANSPORT"},
      {{{"TALLY_IB_QPS_PER_CONNECTION", "0"}}, "TALLY_IB_QPS_PER_CONNECTION=0"},
      {{{"TALLY_IB_QPS_PER_CONNECTION", "17"}}, "TALLY_IB_QPS_PER_CONNECTION=17"},
      {{{"TALLY_SOCKET_NSOCKS", "0"}}, "TALLY_SOCKET_NSOCKS=0"}};
  for (const auto& [values, name] : cases) {
    NetworkConfig c;
    c.ib_hca = "untouched";
    Status st = networkConfigFromParams(paramsFrom(values), &c);
    EXPECT_EQ(st.code(), StatusCode::kInvalidUsage) << name;
    EXPECT_NE(st.message().find(name), std::string::npos) << st.message();
    EXPECT_EQ(c.ib_hca, "untouched");
  }
  NetworkConfig c;
  Status st = networkConfigFromParams(paramsFrom({{"TALLY_TRANSPORT", "infiniband"}}), &c);
  EXPECT_NE(st.message().find("'infiniband'"), std::string::npos) << st.message();
}

TEST(HighSpeedProvider, CoresDecide) {
  for (const char* fast : {"efa", "verbs;ofi_rxm", "cxi", "psm3", "opx", "ofi_rxm;verbs"}) {
    EXPECT_TRUE(isHighSpeedProvider(fast)) << fast;
  }
  for (const char* slow : {"", "tcp", "tcp;ofi_rxm", "udp;ofi_rxd", "sockets", "shm", "sm2",
                           "net", "ofi_rxm", ";", "shm;efa"}) {
    EXPECT_FALSE(isHighSpeedProvider(slow)) << slow;
  }
}

// ---- The choice, with fake backends ----

// A network that only has a name, a provider and one placeholder device.
class FakeDevice final : public Device {
 public:
  const DeviceProperties& properties() const override { return props_; }
  Status listen(std::unique_ptr<Listener>*) override { return Status::internal("fake"); }
  Status connect(const ConnectHandle&, const ConnectionOptions&,
                 std::unique_ptr<PendingConnection>*) override {
    return Status::internal("fake");
  }

 private:
  DeviceProperties props_;
};

int g_live_networks = 0;

class FakeNetwork final : public Network {
 public:
  FakeNetwork(const char* name, std::string provider, bool with_device)
      : name_(name), provider_(std::move(provider)) {
    if (with_device) devices_.push_back(std::make_shared<FakeDevice>());
    ++g_live_networks;
  }
  ~FakeNetwork() override { --g_live_networks; }
  const char* name() const override { return name_; }
  std::string description() const override { return std::string("fake ") + name_; }
  std::string provider() const override { return provider_; }
  const std::vector<std::shared_ptr<Device>>& devices() const override { return devices_; }
  Status listenAt(const std::string&, std::unique_ptr<Listener>*) override {
    return Status::internal("fake");
  }
  Status connectTo(const std::string&, const ConnectionOptions&,
                   std::unique_ptr<PendingConnection>*) override {
    return Status::internal("fake");
  }

 private:
  const char* name_;
  std::string provider_;
  std::vector<std::shared_ptr<Device>> devices_;
};

// What each fake factory does in the current test. Factories are plain function pointers, so
// they read this script.
struct Script {
  Status verbs = Status::system("libibverbs.so.1 not found");
  Status ofi = Status::system("fi_getinfo: no provider");
  Status tcp = Status::ok();
  std::string ofi_provider = "efa";
  bool verbs_has_device = true;
  std::map<std::string, int> calls;
};
Script g_script;

Status fakeOpen(const char* name, const Status& result, const std::string& provider,
                bool with_device, std::shared_ptr<Network>* out) {
  ++g_script.calls[name];
  if (!result.isOk()) return result;
  *out = std::make_shared<FakeNetwork>(name, provider, with_device);
  return Status::ok();
}
Status fakeVerbs(const NetworkConfig&, std::shared_ptr<Network>* out) {
  return fakeOpen("verbs", g_script.verbs, "", g_script.verbs_has_device, out);
}
Status fakeOfi(const NetworkConfig&, std::shared_ptr<Network>* out) {
  return fakeOpen("ofi", g_script.ofi, g_script.ofi_provider, true, out);
}
Status fakeTcp(const NetworkConfig&, std::shared_ptr<Network>* out) {
  return fakeOpen("tcp", g_script.tcp, "", true, out);
}

class OpenNetworkChoice : public ::testing::Test {
 protected:
  void SetUp() override { g_script = Script(); }
  void TearDown() override {
    network_.reset();
    EXPECT_EQ(g_live_networks, 0) << "a network openNetwork did not hand out was not closed";
  }

  Status open(TransportKind kind, const NetworkBackends& backends = {fakeTcp, fakeOfi,
                                                                     fakeVerbs}) {
    NetworkConfig config;
    config.kind = kind;
    config.sysfs_root = sysfs_.root();
    why_.clear();
    return openNetwork(backends, config, &network_, &why_);
  }
  int calls(const char* name) { return g_script.calls[name]; }
  // What auto's log line starts with on the fake sysfs with one InfiniBand device.
  std::string ibSeen() const {
    return "auto: RDMA devices in " + sysfs_.root() + "/class/infiniband: mlx5_0; ";
  }

  // One InfiniBand device, so that auto tries the RDMA backends; tests that want another tree
  // replace it.
  test::FakeSysfs sysfs_{"/class/infiniband/mlx5_0/"};
  std::shared_ptr<Network> network_;
  std::string why_;
};

TEST_F(OpenNetworkChoice, ExplicitTcpOpensOnlyTcp) {
  g_script.verbs = Status::ok();
  ASSERT_TRUE(open(TransportKind::kTcp).isOk());
  EXPECT_STREQ(network_->name(), "tcp");
  EXPECT_EQ(why_, "tcp as asked; using tcp (fake tcp)");
  EXPECT_EQ(calls("verbs") + calls("ofi"), 0);
}

TEST_F(OpenNetworkChoice, ExplicitOfiIsUsedEvenOnASlowProvider) {
  g_script.ofi = Status::ok();
  g_script.ofi_provider = "tcp;ofi_rxm";
  ASSERT_TRUE(open(TransportKind::kOfi).isOk());
  EXPECT_STREQ(network_->name(), "ofi");
  EXPECT_EQ(why_, "ofi as asked; using ofi (fake ofi)");
}

TEST_F(OpenNetworkChoice, ExplicitVerbsThatCannotOpenIsAnErrorNeverTcp) {
  Status st = open(TransportKind::kVerbs);
  EXPECT_EQ(st.code(), StatusCode::kSystem);
  EXPECT_EQ(st.message(),
            "transport verbs was asked for but cannot be used: libibverbs.so.1 not found");
  EXPECT_EQ(network_, nullptr);
  EXPECT_EQ(why_, "");
  EXPECT_EQ(calls("tcp"), 0);
}

TEST_F(OpenNetworkChoice, ExplicitBackendNotBuiltIn) {
  Status st = open(TransportKind::kOfi, {fakeTcp, nullptr, nullptr});
  EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(st.message(),
            "transport ofi was asked for but cannot be used: not built into this library");
  EXPECT_EQ(network_, nullptr);
  EXPECT_EQ(calls("tcp"), 0);
}

TEST_F(OpenNetworkChoice, ExplicitVerbsWithoutDevicesIsAnError) {
  g_script.verbs = Status::ok();
  g_script.verbs_has_device = false;
  Status st = open(TransportKind::kVerbs);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("no devices"), std::string::npos) << st.message();
  EXPECT_EQ(network_, nullptr);
}

TEST_F(OpenNetworkChoice, AutoTakesVerbsWhenItOpens) {
  g_script.verbs = Status::ok();
  g_script.ofi = Status::ok();
  ASSERT_TRUE(open(TransportKind::kAuto).isOk());
  EXPECT_STREQ(network_->name(), "verbs");
  EXPECT_EQ(why_, ibSeen() + "using verbs (fake verbs)");
  EXPECT_EQ(calls("ofi") + calls("tcp"), 0);
}

TEST_F(OpenNetworkChoice, AutoTakesOfiOnAHighSpeedProvider) {
  g_script.ofi = Status::ok();
  g_script.ofi_provider = "efa";
  ASSERT_TRUE(open(TransportKind::kAuto).isOk());
  EXPECT_STREQ(network_->name(), "ofi");
  EXPECT_EQ(why_, ibSeen() +
                      "verbs unavailable (libibverbs.so.1 not found); ofi provider efa is "
                      "high-speed; using ofi (fake ofi)");
  EXPECT_EQ(calls("tcp"), 0);
}

TEST_F(OpenNetworkChoice, AutoSkipsASlowOfiProviderForTcp) {
  g_script.ofi = Status::ok();
  g_script.ofi_provider = "tcp;ofi_rxm";
  ASSERT_TRUE(open(TransportKind::kAuto).isOk());
  EXPECT_STREQ(network_->name(), "tcp");
  EXPECT_EQ(why_, ibSeen() +
                      "verbs unavailable (libibverbs.so.1 not found); ofi provider tcp;ofi_rxm "
                      "is not high-speed; using tcp (fake tcp)");
  EXPECT_EQ(g_live_networks, 1) << "the ofi network was closed again";
}

TEST_F(OpenNetworkChoice, AutoSkipsAnOfiNetworkThatNamesNoProvider) {
  g_script.ofi = Status::ok();
  g_script.ofi_provider = "";
  ASSERT_TRUE(open(TransportKind::kAuto).isOk());
  EXPECT_STREQ(network_->name(), "tcp");
  EXPECT_NE(why_.find("ofi provider (unnamed) is not high-speed"), std::string::npos) << why_;
}

TEST_F(OpenNetworkChoice, AutoFallsBackToTcpWhenNeitherRdmaBackendOpens) {
  ASSERT_TRUE(open(TransportKind::kAuto).isOk());
  EXPECT_EQ(why_, ibSeen() +
                      "verbs unavailable (libibverbs.so.1 not found); ofi unavailable "
                      "(fi_getinfo: no provider); using tcp (fake tcp)");
  ASSERT_TRUE(open(TransportKind::kAuto, {fakeTcp, nullptr, nullptr}).isOk());
  EXPECT_EQ(why_, ibSeen() +
                      "verbs unavailable (not built into this library); ofi unavailable (not "
                      "built into this library); using tcp (fake tcp)");
}

TEST_F(OpenNetworkChoice, AutoReportsEveryStepWhenTcpFailsToo) {
  g_script.tcp = Status::invalidUsage("no interface matches '=eth9'");
  Status st = open(TransportKind::kAuto);
  EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(st.message(), ibSeen() +
                              "verbs unavailable (libibverbs.so.1 not found); ofi unavailable "
                              "(fi_getinfo: no provider); tcp: no interface matches '=eth9'");
  EXPECT_EQ(network_, nullptr);
}

TEST_F(OpenNetworkChoice, AutoWithoutAnRdmaDeviceTriesNoFabricLibrary) {
  g_script.verbs = Status::ok();
  g_script.ofi = Status::ok();
  sysfs_ = test::FakeSysfs("/class/net/eth0/");  // a NIC, but no RDMA device
  ASSERT_TRUE(open(TransportKind::kAuto).isOk());
  EXPECT_STREQ(network_->name(), "tcp");
  EXPECT_EQ(why_, "auto: no RDMA device in " + sysfs_.root() + "/class/infiniband or " +
                      sysfs_.root() + "/class/cxi; using tcp (fake tcp)");
  EXPECT_EQ(calls("verbs") + calls("ofi"), 0);
}

TEST_F(OpenNetworkChoice, AutoOnlyCxiTriesOfiButNotVerbs) {
  g_script.verbs = Status::ok();
  g_script.ofi = Status::ok();
  g_script.ofi_provider = "cxi";
  sysfs_ = test::FakeSysfs("/class/cxi/cxi0/");
  ASSERT_TRUE(open(TransportKind::kAuto).isOk());
  EXPECT_STREQ(network_->name(), "ofi");
  const std::string root = sysfs_.root();
  EXPECT_EQ(why_, "auto: RDMA devices in " + root +
                      "/class/cxi: cxi0; verbs not tried (no device in " + root +
                      "/class/infiniband); ofi provider cxi is high-speed; using ofi (fake ofi)");
  EXPECT_EQ(calls("verbs"), 0);
}

TEST_F(OpenNetworkChoice, AutoListsEveryInfinibandDeviceSorted) {
  g_script.verbs = Status::ok();
  sysfs_ = test::FakeSysfs("/class/infiniband/mlx5_1/");
  std::filesystem::create_directories(sysfs_.root() + "/class/infiniband/efa_0");
  std::filesystem::create_directories(sysfs_.root() + "/class/infiniband/mlx5_0");
  ASSERT_TRUE(open(TransportKind::kAuto).isOk());
  EXPECT_EQ(why_, "auto: RDMA devices in " + sysfs_.root() +
                      "/class/infiniband: efa_0, mlx5_0, mlx5_1; using verbs (fake verbs)");
}

bool libraryMapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("/" + name) != std::string::npos) return true;
  }
  return false;
}

// The real backends: with no RDMA device in sysfs, auto opens tcp and loads neither libfabric
// nor libibverbs into the process (ctest runs each test in a process of its own).
TEST_F(OpenNetworkChoice, AutoWithoutAnRdmaDeviceLoadsNoFabricLibrary) {
  ASSERT_FALSE(libraryMapped("libfabric.so")) << "this test binary must not link libfabric";
  ASSERT_FALSE(libraryMapped("libibverbs.so"));
  sysfs_ = test::FakeSysfs("");
  NetworkConfig config;
  config.kind = TransportKind::kAuto;
  config.sysfs_root = sysfs_.root();
  config.ifname_spec = "=lo";
  Status st = openNetwork(config, &network_, &why_);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_STREQ(network_->name(), "tcp");
  EXPECT_EQ(why_.rfind("auto: no RDMA device in " + sysfs_.root() + "/class/infiniband", 0), 0u)
      << why_;
  EXPECT_FALSE(libraryMapped("libfabric.so"));
  EXPECT_FALSE(libraryMapped("libibverbs.so"));
  EXPECT_FALSE(libraryMapped("libpsm2.so"));
  EXPECT_FALSE(libraryMapped("librdmacm.so"));
}

// The check above can fail: with a device in sysfs, auto does load the fabric libraries this
// build uses (where they are installed).
TEST_F(OpenNetworkChoice, AutoWithAnRdmaDeviceLoadsTheFabricLibraries) {
  if (builtinBackends().ofi == nullptr) GTEST_SKIP() << "ofi is not built into this library";
  if (!std::filesystem::exists("/usr/lib/x86_64-linux-gnu/libfabric.so.1") &&
      !std::filesystem::exists("/usr/lib/libfabric.so.1")) {
    GTEST_SKIP() << "libfabric.so.1 is not installed";
  }
  NetworkConfig config;
  config.kind = TransportKind::kAuto;
  config.sysfs_root = sysfs_.root();  // one (fake) mlx5_0
  config.ifname_spec = "=lo";
  Status st = openNetwork(config, &network_, &why_);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_TRUE(libraryMapped("libfabric.so")) << why_;
}

// The table holds exactly the backends this build compiled (TALLY_WITH_OFI/VERBS found their
// headers); asking for one left out says so.
TEST_F(OpenNetworkChoice, BuiltInTableHasWhatWasBuilt) {
  EXPECT_NE(builtinBackends().tcp, nullptr);
  EXPECT_EQ(builtinBackends().ofi != nullptr, TALLY_HAVE_TRANSPORT_OFI == 1);
  EXPECT_EQ(builtinBackends().verbs != nullptr, TALLY_HAVE_TRANSPORT_VERBS == 1);
  for (TransportKind kind : {TransportKind::kOfi, TransportKind::kVerbs}) {
    const bool built = kind == TransportKind::kOfi ? builtinBackends().ofi != nullptr
                                                   : builtinBackends().verbs != nullptr;
    if (built) continue;
    NetworkConfig config;
    config.kind = kind;
    Status st = openNetwork(config, &network_, &why_);
    EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
    EXPECT_NE(st.message().find("not built into this library"), std::string::npos);
  }
}

}  // namespace
}  // namespace tally::transport
