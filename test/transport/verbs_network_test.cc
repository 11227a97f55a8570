// SPDX-License-Identifier: Apache-2.0
// createNetwork without a device and over the software one: options, errors, properties.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "test/transport/verbs_fake.h"
#include "transport/verbs/internal.h"
#include "transport/verbs/verbs.h"

namespace tally::transport::test {
namespace {

TEST(VerbsNetworkTest, BadOptionsAreRefusedBeforeAnythingLoads) {
  verbs::VerbsOptions options;
  options.qps_per_connection = 0;
  std::shared_ptr<Network> network;
  Status status = verbs::createNetwork(options, &network);
  EXPECT_EQ(status.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(status.message().find("TALLY_IB_QPS_PER_CONNECTION is 0"), std::string::npos)
      << status.toString();
  options.qps_per_connection = 16;
  EXPECT_EQ(verbs::createNetwork(options, &network).code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(network, nullptr);
}

TEST(VerbsNetworkTest, EmptyDeviceListIsNoRdmaDevice) {
  FakeVerbsConfig config;
  config.no_devices = true;
  resetFakeVerbs(config);
  std::shared_ptr<Network> network;
  Status status = verbs::createNetworkWith(fakeVerbsApi(), {}, &network);
  EXPECT_EQ(status.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(status.message().find("no RDMA device"), std::string::npos) << status.toString();
  EXPECT_EQ(network, nullptr);
  resetFakeVerbs({});
}

TEST(VerbsNetworkTest, HcaSpecMatchingNothingNamesWhatExists) {
  resetFakeVerbs({});
  verbs::VerbsOptions options;
  options.hca = "mlx5";
  std::shared_ptr<Network> network;
  Status status = verbs::createNetworkWith(fakeVerbsApi(), options, &network);
  EXPECT_EQ(status.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(status.message().find("(have: fake0:1 IB active)"), std::string::npos)
      << status.toString();
}

TEST(VerbsNetworkTest, FakeDeviceProperties) {
  resetFakeVerbs({});
  verbs::VerbsOptions options;
  options.side_ifname = "lo";
  std::shared_ptr<Network> network;
  ASSERT_TRUE(verbs::createNetworkWith(fakeVerbsApi(), options, &network).isOk());
  EXPECT_STREQ(network->name(), "verbs");
  ASSERT_EQ(network->devices().size(), 1u);
  const DeviceProperties& props = network->devices()[0]->properties();
  EXPECT_EQ(props.name, "fake0:1");
  EXPECT_EQ(props.address, "127.0.0.1");
  EXPECT_EQ(props.speed_mbps, 100000);  // 4x EDR
  EXPECT_EQ(props.guid, 0x7a11e00000000001ull);
  EXPECT_NE(network->description().find("verbs InfiniBand fake0:1"), std::string::npos)
      << network->description();
}

TEST(VerbsNetworkTest, NoDeviceIsAClearInvalidUsage) {
  std::shared_ptr<Network> network;
  Status status = verbs::createNetwork({}, &network);
  if (status.isOk()) GTEST_SKIP() << "this host has an RDMA device: " << network->description();
  EXPECT_EQ(status.code(), StatusCode::kInvalidUsage) << status.toString();
  void* library = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    EXPECT_NE(status.message().find("cannot load libibverbs.so.1"), std::string::npos)
        << status.toString();
  } else {
    dlclose(library);
    EXPECT_NE(status.message().find("no RDMA device"), std::string::npos) << status.toString();
  }
  EXPECT_EQ(network, nullptr);
}

}  // namespace
}  // namespace tally::transport::test
