// SPDX-License-Identifier: Apache-2.0
// The run-time loading of libibverbs and the device list, on hosts with and without either.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "transport/verbs/loader.h"
#include "transport/verbs/ports.h"

namespace tally::transport::verbs {
namespace {

TEST(VerbsLoaderTest, MissingLibraryIsAClearError) {
  std::unique_ptr<VerbsApi> api;
  Status status = loadVerbsFrom("libtally-no-such-verbs.so.1", &api);
  EXPECT_EQ(status.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(status.message().find("cannot load libtally-no-such-verbs.so.1"), std::string::npos)
      << status.toString();
  EXPECT_NE(status.message().find("libibverbs"), std::string::npos) << status.toString();
  EXPECT_EQ(api, nullptr);
}

TEST(VerbsLoaderTest, LibraryWithoutVerbsNamesTheMissingSymbol) {
  // libm is on every glibc host and has none of the verbs functions.
  std::unique_ptr<VerbsApi> api;
  Status status = loadVerbsFrom("libm.so.6", &api);
  EXPECT_EQ(status.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(status.message().find("libm.so.6 has no ibv_get_device_list"), std::string::npos)
      << status.toString();
  EXPECT_EQ(api, nullptr);
}

// Whether this host has libibverbs at all, asked independently of the loader.
bool hostHasVerbs() {
  void* handle = dlopen(kVerbsLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return false;
  dlclose(handle);
  return true;
}

TEST(VerbsLoaderTest, ProcessTableMatchesTheHost) {
  const VerbsApi* api = nullptr;
  Status status = loadVerbs(&api);
  if (!hostHasVerbs()) {
    EXPECT_EQ(status.code(), StatusCode::kInvalidUsage);
    EXPECT_NE(status.message().find(kVerbsLibrary), std::string::npos) << status.toString();
    return;
  }
  ASSERT_TRUE(status.isOk()) << status.toString();
  ASSERT_NE(api, nullptr);
  EXPECT_NE(api->get_device_list, nullptr);
  EXPECT_NE(api->modify_qp, nullptr);
  EXPECT_NE(api->query_port_compat, nullptr);
  // Loaded once: a second call gives the same table.
  const VerbsApi* again = nullptr;
  ASSERT_TRUE(loadVerbs(&again).isOk());
  EXPECT_EQ(api, again);
}

TEST(VerbsLoaderTest, DeviceListOrNoDeviceError) {
  const VerbsApi* api = nullptr;
  if (!loadVerbs(&api).isOk()) GTEST_SKIP() << "no libibverbs on this host";
  std::vector<PortRecord> ports;
  Status status = listPorts(*api, &ports);
  // Count the devices the way libibverbs reports them, to know which answer is right.
  int count = 0;
  ibv_device** list = api->get_device_list(&count);
  if (list != nullptr) api->free_device_list(list);
  if (list == nullptr || count == 0) {
    EXPECT_EQ(status.code(), StatusCode::kInvalidUsage);
    EXPECT_NE(status.message().find("no RDMA device"), std::string::npos) << status.toString();
    EXPECT_TRUE(ports.empty());
  } else {
    ASSERT_TRUE(status.isOk()) << status.toString();
    EXPECT_FALSE(ports.empty());
    for (const PortRecord& port : ports) EXPECT_GE(port.port, 1);
  }
}

}  // namespace
}  // namespace tally::transport::verbs
