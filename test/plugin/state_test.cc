// PluginState built from injected parameters (MapParamSource, never setenv).
#include "plugin/state.h"

#include <gtest/gtest.h>

#include "plugin/request_pool.h"
#include "plugin_test_util.h"

namespace tally::plugin {
namespace {

using testing::paramsFrom;

TEST(PluginState, CollNetDisabledWithoutReducers) {
  PluginState state(paramsFrom({}), {});
  EXPECT_FALSE(state.collEnabled());
  EXPECT_EQ(state.collDeviceCount(), 0);
}

TEST(PluginState, CollNetMirrorsNetDevicesWithReducers) {
  std::unique_ptr<PluginState> state;
  Status st = PluginState::create(
      paramsFrom({{"TALLY_SOCKET_IFNAME", "lo"}, {"TALLY_REDUCERS", "a:1, b:2,"}}), &state);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_TRUE(state->collEnabled());
  EXPECT_GE(state->netDeviceCount(), 1);
  EXPECT_EQ(state->collDeviceCount(), state->netDeviceCount());
  EXPECT_EQ(state->collOptions().reducers, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(state->device(0)->properties().name, "lo");
  EXPECT_EQ(state->device(state->netDeviceCount()), nullptr);
  EXPECT_EQ(state->device(-1), nullptr);
}

TEST(PluginState, NoDevicesWithoutReducersGivesNoCollNet) {
  std::unique_ptr<PluginState> state;
  Status st = PluginState::create(paramsFrom({{"TALLY_SOCKET_IFNAME", "lo"}}), &state);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_GE(state->netDeviceCount(), 1);
  EXPECT_EQ(state->collDeviceCount(), 0);
}

TEST(PluginState, OptionsFollowParams) {
  PluginState state(paramsFrom({{"TALLY_SOCKET_NSOCKS", "4"},
                                {"TALLY_SLICE_BYTES", "1M"},
                                {"TALLY_CONNECT_TIMEOUT", "3s"}}),
                    {});
  EXPECT_EQ(state.tcpOptions().sockets, 4);
  EXPECT_EQ(state.tcpOptions().connect_timeout_ms, 3000);
  EXPECT_EQ(state.collOptions().slice_bytes, 1u << 20);
  EXPECT_EQ(state.collOptions().connect_timeout_ms, 3000);
  EXPECT_EQ(state.connectionOptions().max_requests, kMaxSendRequests);
}

TEST(PluginState, BadValuesAreInvalidUsageNamingTheVariable) {
  std::unique_ptr<PluginState> state;
  Status st = PluginState::create(paramsFrom({{"TALLY_SOCKET_NSOCKS", "0"}}), &state);
  EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(st.message().find("TALLY_SOCKET_NSOCKS"), std::string::npos);
  st = PluginState::create(paramsFrom({{"TALLY_SOCKET_IFNAME", "=no-such-interface0"}}), &state);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("TALLY_SOCKET_IFNAME"), std::string::npos) << st.toString();
}

TEST(PluginState, SplitList) {
  EXPECT_EQ(splitList(""), std::vector<std::string>{});
  EXPECT_EQ(splitList(" , ,"), std::vector<std::string>{});
  EXPECT_EQ(splitList("h:1"), std::vector<std::string>{"h:1"});
  EXPECT_EQ(splitList(" h:1 ,[::1]:2 "), (std::vector<std::string>{"h:1", "[::1]:2"}));
}

struct Slot {
  int value = 0;
};

TEST(RequestPool, FixedCapacity) {
  RequestPool<Slot> pool(3);
  Slot* a = pool.acquire();
  Slot* b = pool.acquire();
  Slot* c = pool.acquire();
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(pool.acquire(), nullptr);
  EXPECT_EQ(pool.inUse(), 3u);
  EXPECT_TRUE(pool.owns(b));
  Slot outside;
  EXPECT_FALSE(pool.owns(&outside));
  b->value = 5;
  pool.release(b);
  Slot* d = pool.acquire();
  EXPECT_EQ(d, b);
  EXPECT_EQ(d->value, 0);
}

}  // namespace
}  // namespace tally::plugin
