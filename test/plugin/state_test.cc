// SPDX-License-Identifier: Apache-2.0
// PluginState built from injected parameters and cluster variables (MapParamSource, never
// setenv): reducer discovery, who joins CollNet, a malformed variable; the contexts and the
// connects in progress the state owns.
#include "plugin/state.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "plugin/requests.h"
#include "plugin_test_util.h"

namespace tally::plugin {
namespace {

using testing::paramsFrom;

// No net device: no CollNet device either (NCCL fails a net without devices anyway).
TEST(PluginState, CollNetDisabledWithoutReducers) {
  PluginState state(paramsFrom({}), {});
  EXPECT_FALSE(state.collEnabled());
  EXPECT_EQ(state.collDeviceCount(), 0);
}

TEST(PluginState, OneCollNetDeviceMirroringNetDeviceZero) {
  std::unique_ptr<PluginState> state;
  Status st = PluginState::create(
      paramsFrom({{"TALLY_SOCKET_IFNAME", "lo"}, {"TALLY_REDUCERS", "a:1, b:2,"}}), &state);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_TRUE(state->collEnabled());
  EXPECT_GE(state->netDeviceCount(), 1);
  EXPECT_EQ(state->collDeviceCount(), 1);
  EXPECT_EQ(state->collOptions().reducers, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(state->device(0)->properties().name, "lo");
  EXPECT_EQ(state->device(state->netDeviceCount()), nullptr);
  EXPECT_EQ(state->device(-1), nullptr);
}

// The CollNet device count is the same on every host of a job (NCCL 2.30 compares it across
// ranks): no reducers here change connect, not the count. Only TALLY_COLLNET=0 hides it.
TEST(PluginState, CollNetDeviceWithoutReducersAndItsSwitch) {
  std::unique_ptr<PluginState> state;
  Status st = PluginState::create(paramsFrom({{"TALLY_SOCKET_IFNAME", "lo"}}), &state);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_GE(state->netDeviceCount(), 1);
  EXPECT_FALSE(state->collEnabled());
  EXPECT_EQ(state->collDeviceCount(), 1);

  st = PluginState::create(
      paramsFrom(
          {{"TALLY_SOCKET_IFNAME", "lo"}, {"TALLY_REDUCERS", "a:1"}, {"TALLY_COLLNET", "0"}}),
      &state);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_TRUE(state->collEnabled());
  EXPECT_EQ(state->collDeviceCount(), 0);
}

TEST(PluginState, OptionsFollowParams) {
  PluginState state(paramsFrom({{"TALLY_SOCKET_NSOCKS", "4"},
                                {"TALLY_SLICE_BYTES", "1M"},
                                {"TALLY_CONNECT_TIMEOUT_MS", "3s"}}),
                    {});
  EXPECT_EQ(state.networkConfig().tcp.sockets, 4);
  EXPECT_EQ(state.networkConfig().timeouts.connect_ms, 3000);
  EXPECT_EQ(state.collOptions().slice_bytes, 1u << 20);
  EXPECT_EQ(state.collOptions().timeouts.connect_ms, 3000);
  EXPECT_EQ(state.connectionOptions().max_requests, kMaxSendRequests);
}

// TALLY_LINK_MBPS stands in for the speed an interface reports (a veth says 10 Gbit/s whatever
// its qdisc lets through), both in what NCCL is told and in the slice plan.
TEST(PluginState, LinkSpeedSettingOverridesTheInterface) {
  std::unique_ptr<PluginState> own, set;
  ASSERT_TRUE(PluginState::create(paramsFrom({{"TALLY_SOCKET_IFNAME", "lo"}}), &own).isOk());
  ASSERT_TRUE(PluginState::create(
                  paramsFrom({{"TALLY_SOCKET_IFNAME", "lo"}, {"TALLY_LINK_MBPS", "1000"}}), &set)
                  .isOk());
  EXPECT_EQ(own->collLink().interface, "lo");
  EXPECT_EQ(own->reportedSpeedMbps(0), transport::kUnknownLinkMbps);  // loopback has no speed
  EXPECT_EQ(set->reportedSpeedMbps(0), 1000);
  EXPECT_EQ(set->collLink().speed_mbps, 1000);
  // Loopback keeps the fast plan whatever the speed says.
  EXPECT_EQ(set->collOptions().min_slice_bytes, protocol::kFastMinSliceBytes);
  EXPECT_EQ(set->collOptions().slices_per_reducer, protocol::kFastSlicesPerReducer);
}

// Reducers on 127.0.0.1 are reached over loopback even when net device 0 is another interface:
// the link, NCCL's speed and the slice plan are loopback's, not the default interface's.
TEST(PluginState, ReducersOnLoopbackUseLoopbackWhateverDeviceZeroIs) {
  std::unique_ptr<PluginState> state;
  ASSERT_TRUE(
      PluginState::create(
          paramsFrom({{"TALLY_TRANSPORT", "tcp"}, {"TALLY_REDUCERS", "127.0.0.1:1"}}), &state)
          .isOk());
  if (state->device(0)->properties().loopback) GTEST_SKIP() << "no interface but loopback";
  EXPECT_EQ(state->collLink().interface, "lo");
  EXPECT_TRUE(state->collLink().loopback);
  EXPECT_EQ(state->reportedSpeedMbps(0), state->collLink().speed_mbps);
  EXPECT_EQ(state->collOptions().slices_per_reducer, protocol::kFastSlicesPerReducer);
  EXPECT_EQ(state->collOptions().min_slice_bytes, protocol::kFastMinSliceBytes);

  // A reducer off this host: the interface of its route (here the default one, device 0), and
  // that interface's speed for the plan.
  transport::Interface routed;
  if (!transport::routeInterface("198.51.100.1", &routed).isOk() || routed.loopback) {
    GTEST_SKIP() << "no route off this host";
  }
  ASSERT_TRUE(PluginState::create(paramsFrom({{"TALLY_TRANSPORT", "tcp"},
                                              {"TALLY_SOCKET_IFNAME", "=" + routed.name},
                                              {"TALLY_REDUCERS", "198.51.100.1:1"}}),
                                  &state)
                  .isOk());
  EXPECT_EQ(state->collLink().interface, routed.name);
  EXPECT_FALSE(state->collLink().loopback);
  const int speed = state->collLink().speed_mbps;
  EXPECT_EQ(state->reportedSpeedMbps(0), speed);
  const protocol::SlicePlan expected =
      protocol::choosePlan(state->params().sliceBytes, 0, 0, false, speed);
  EXPECT_EQ(state->collOptions().slices_per_reducer, expected.per_reducer);
  EXPECT_EQ(state->collOptions().min_slice_bytes, expected.min_slice_bytes);
}

// A replica that does not join CollNet (no reducers here) takes device 0 as it is.
TEST(PluginState, WithoutReducersDeviceZerosLink) {
  std::unique_ptr<PluginState> state;
  ASSERT_TRUE(PluginState::create(
                  paramsFrom({{"TALLY_TRANSPORT", "tcp"}, {"TALLY_SOCKET_IFNAME", "lo"}}), &state)
                  .isOk());
  EXPECT_EQ(state->collLink().interface, "lo");
  EXPECT_NE(state->collLink().reason.find("no reducers"), std::string::npos)
      << state->collLink().reason;
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

// The plugin refuses exactly what findParamProblems (and so `tally env` and `tally doctor`)
// reports, with the same message.
TEST(PluginState, RefusesWhatTallyEnvReports) {
  const std::map<std::string, std::string> bad[] = {
      {{"TALLY_SOCKET_NSOCKS", "99"}},        {{"TALLY_TRANSPORT", "rdma"}},
      {{"TALLY_IB_QPS_PER_CONNECTION", "0"}}, {{"TALLY_COLL_WINDOW", "0"}},
      {{"TALLY_COLL_PROGRESS", "busy"}},      {{"TALLY_COLL_MAX_REQUESTS", "0"}},
  };
  // Each parses, but a connect would refuse it: refused at start-up instead.
  const std::map<std::string, std::string> refused_at_connect[] = {
      {{"TALLY_COLL_WINDOW", "100000"}},
      {{"TALLY_REDUCERS", "host-without-port"}},
      {{"TALLY_JOB_TOKEN_FILE", "/nonexistent/tally-token"}},
  };
  auto expectRefused = [](const std::map<std::string, std::string>& values) {
    SCOPED_TRACE(values.begin()->first);
    const std::vector<ParamProblem> found = findParamProblems(MapParamSource(values));
    ASSERT_EQ(found.size(), 1u);
    std::unique_ptr<PluginState> state;
    const Status st = PluginState::create(paramsFrom(values), &state);
    EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
    EXPECT_EQ(st.message(), found[0].toString());
    EXPECT_EQ(state, nullptr);
  };
  for (const auto& values : bad) expectRefused(values);
  for (const auto& values : refused_at_connect) expectRefused(values);
}

// A Vertex-AI-shaped job: primary, one worker, two reducers, one evaluator.
const char* const kPools = R"({"workerpool0": ["cmle-training-workerpool0-ab-0:2222"],)"
                           R"( "workerpool1": ["cmle-training-workerpool1-ab-0:2222"],)"
                           R"( "workerpool2": ["cmle-training-workerpool2-ab-0:2222",)"
                           R"( "cmle-training-workerpool2-ab-1:2222"],)"
                           R"( "workerpool3": ["cmle-training-workerpool3-ab-0:2222"]})";

std::string clusterSpecFor(const std::string& type) {
  return R"({"cluster": )" + std::string(kPools) + R"(, "task": {"type": ")" + type +
         R"(", "index": 0}})";
}

std::string tfConfigFor(const std::string& type) {
  return R"({"cluster": {"chief": ["tf-chief-0:2222"], "worker": ["tf-worker-0:2222"],)"
         R"( "ps": ["tf-ps-0:2222"]}, "task": {"type": ")" +
         type + R"(", "index": 0}})";
}

ClusterInput clusterFrom(std::map<std::string, std::string> values) {
  return ClusterInput::load(MapParamSource(std::move(values)));
}

std::unique_ptr<PluginState> loopbackState(std::map<std::string, std::string> params,
                                           ClusterInput cluster) {
  params["TALLY_SOCKET_IFNAME"] = "lo";
  std::unique_ptr<PluginState> state;
  Status st = PluginState::create(paramsFrom(std::move(params)), std::move(cluster), &state);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return state;
}

TEST(PluginState, ReducerDiscoveryOrder) {
  struct Case {
    std::map<std::string, std::string> params;
    std::map<std::string, std::string> cluster;
    std::string summary;
  };
  const Case cases[] = {
      {{{"TALLY_REDUCERS", "r:1, r:2"}},
       {{"CLUSTER_SPEC", clusterSpecFor("workerpool1")}, {"TF_CONFIG", tfConfigFor("worker")}},
       "CollNet reducers from TALLY_REDUCERS: r:1,r:2"},
      {{},
       {{"CLUSTER_SPEC", clusterSpecFor("workerpool1")}, {"TF_CONFIG", tfConfigFor("worker")}},
       "CollNet reducers from CLUSTER_SPEC workerpool2: cmle-training-workerpool2-ab-0:2222,"
       "cmle-training-workerpool2-ab-1:2222"},
      {{},
       {{"TF_CONFIG", tfConfigFor("chief")}},
       "CollNet reducers from TF_CONFIG ps: tf-ps-0:2222"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.summary);
    std::unique_ptr<PluginState> state = loopbackState(c.params, clusterFrom(c.cluster));
    ASSERT_TRUE(state);
    EXPECT_TRUE(state->collEnabled());
    EXPECT_TRUE(state->collStatus().isOk());
    EXPECT_EQ(state->collDeviceCount(), 1);
    EXPECT_EQ(state->collOptions().reducers, state->reducers().addresses);
    EXPECT_EQ(state->collNetSummary(), c.summary);
  }
}

// No reducers: connect declines, and the device count stays the one every host reports.
TEST(PluginState, NoReducersAnywhereTurnsCollNetOff) {
  std::unique_ptr<PluginState> state = loopbackState(
      {}, clusterFrom({{"TF_CONFIG", R"({"cluster": {"chief": ["c:1"], "worker": ["w:1"]},)"
                                     R"( "task": {"type": "worker", "index": 0}})"}}));
  ASSERT_TRUE(state);
  EXPECT_FALSE(state->collEnabled());
  EXPECT_EQ(state->collDeviceCount(), 1);
  EXPECT_GE(state->netDeviceCount(), 1);
  EXPECT_EQ(state->reducers().origin, "none");
  EXPECT_EQ(state->collNetSummary().rfind("CollNet disabled: no reducers configured", 0), 0u)
      << state->collNetSummary();
}

TEST(PluginState, ReducersAndEvaluatorsNeverJoinCollNet) {
  const std::pair<const char*, std::string> cases[] = {
      {"a reducer", clusterSpecFor("workerpool2")},
      {"an evaluator", clusterSpecFor("workerpool3")},
  };
  for (const auto& [what, spec] : cases) {
    SCOPED_TRACE(what);
    // Reducers are known (from the spec and from TALLY_REDUCERS), yet connect declines; the
    // device count is the workers' (one), as on every host.
    std::unique_ptr<PluginState> state =
        loopbackState({{"TALLY_REDUCERS", "r:1"}}, clusterFrom({{"CLUSTER_SPEC", spec}}));
    ASSERT_TRUE(state);
    EXPECT_FALSE(state->reducers().addresses.empty());
    EXPECT_FALSE(state->collEnabled());
    EXPECT_EQ(state->collDeviceCount(), 1);
    EXPECT_GE(state->netDeviceCount(), 1);
    EXPECT_NE(state->collNetSummary().find(std::string("this replica is ") + what),
              std::string::npos)
        << state->collNetSummary();
  }
  for (const char* type : {"ps", "evaluator"}) {
    SCOPED_TRACE(type);
    std::unique_ptr<PluginState> state =
        loopbackState({}, clusterFrom({{"TF_CONFIG", tfConfigFor(type)}}));
    ASSERT_TRUE(state);
    EXPECT_FALSE(state->collEnabled());
    EXPECT_EQ(state->collDeviceCount(), 1);
    EXPECT_NE(state->collNetSummary().find("TF_CONFIG task " + std::string(type)),
              std::string::npos)
        << state->collNetSummary();
  }
}

TEST(PluginState, MalformedClusterVariableKeepsTheNetSide) {
  std::unique_ptr<PluginState> state = loopbackState(
      {{"TALLY_REDUCERS", "r:1"}},
      clusterFrom({{"CLUSTER_SPEC", R"({"cluster": {"workerpool0": ["p:1"]},)"
                                    R"( "task": {"type": "workerpool0", "index": "one"}})"}}));
  ASSERT_TRUE(state);
  EXPECT_GE(state->netDeviceCount(), 1);
  EXPECT_FALSE(state->collEnabled());
  EXPECT_EQ(state->collDeviceCount(), 1);
  EXPECT_EQ(state->collStatus().code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(state->collStatus().message(),
            "CLUSTER_SPEC: task.index: expected a non-negative integer, got \"one\"");
}

struct LogLine {
  log::Level level;
  std::string text;
};
std::mutex g_log_mu;
std::vector<LogLine> g_log;

void captureSink(log::Level level, unsigned long, const char*, int, const char* message) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log.push_back({level, message});
}

std::vector<LogLine> takeLog() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  return std::exchange(g_log, {});
}

TEST(PluginState, LogsWhereReducersCameFromOnce) {
  log::setSink(&captureSink, log::Level::kInfo);
  takeLog();
  PluginState state(paramsFrom({}), clusterFrom({{"CLUSTER_SPEC", clusterSpecFor("workerpool0")}}),
                    {});
  state.logCollNetOnce();
  state.logCollNetOnce();
  std::vector<LogLine> lines = takeLog();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].level, log::Level::kInfo);
  EXPECT_EQ(lines[0].text,
            "CollNet reducers from CLUSTER_SPEC workerpool2: cmle-training-workerpool2-ab-0:2222,"
            "cmle-training-workerpool2-ab-1:2222");

  // A malformed variable is a WARN, once: CollNet connect will decline with it.
  PluginState bad(paramsFrom({}), clusterFrom({{"TF_CONFIG", "[]"}}), {});
  bad.logCollNetOnce();
  bad.logCollNetOnce();
  lines = takeLog();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].level, log::Level::kWarn);
  EXPECT_NE(lines[0].text.find("TF_CONFIG"), std::string::npos) << lines[0].text;
  log::setSink(&log::stderrSink, log::Level::kWarn);
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

TEST(ContextRegistry, DestroysOnlyContextsItCreated) {
  ContextRegistry contexts;
  CommContext* a = contexts.create(7, 3, /*coll=*/false);
  CommContext* b = contexts.create(8, -1, /*coll=*/true);
  ASSERT_NE(a, b);
  EXPECT_EQ(a->comm_id, 7u);
  EXPECT_EQ(a->traffic_class, 3);
  EXPECT_TRUE(b->coll);
  EXPECT_EQ(contexts.size(), 2u);
  int stranger = 0;
  EXPECT_FALSE(contexts.destroy(&stranger));
  EXPECT_FALSE(contexts.destroy(nullptr));
  EXPECT_TRUE(contexts.contains(a));
  EXPECT_TRUE(contexts.destroy(a));
  EXPECT_FALSE(contexts.contains(a));
  EXPECT_FALSE(contexts.destroy(a));  // a second finalize of the same ctx
  EXPECT_EQ(contexts.size(), 1u);
}

// A connection that never finishes and reports its destruction.
class StuckConnection : public transport::PendingConnection {
 public:
  explicit StuckConnection(int* destroyed) : destroyed_(destroyed) {}
  ~StuckConnection() override { ++*destroyed_; }
  Status step(std::unique_ptr<transport::Connection>* /*conn*/) override { return Status::ok(); }

 private:
  int* destroyed_;
};

TEST(PendingConnects, TakeReturnsWhatWasParkedOnce) {
  int destroyed = 0;
  PendingConnects pending;
  auto first = std::make_unique<StuckConnection>(&destroyed);
  transport::PendingConnection* first_raw = first.get();
  const uint64_t a = pending.park(std::move(first));
  const uint64_t b = pending.park(std::make_unique<StuckConnection>(&destroyed));
  EXPECT_NE(a, b);
  EXPECT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending.take(b + a + 1), nullptr);  // an id never handed out
  std::unique_ptr<transport::PendingConnection> back = pending.take(a);
  EXPECT_EQ(back.get(), first_raw);
  EXPECT_EQ(pending.take(a), nullptr);
  EXPECT_EQ(pending.size(), 1u);
  back.reset();
  EXPECT_EQ(destroyed, 1);
}

// The state owns what its entry points left behind: connects NCCL never resumed go with it.
TEST(PluginState, OwnsItsContextsAndPendingConnects) {
  int destroyed = 0;
  {
    PluginState state(paramsFrom({}), {});
    state.pendingConnects().park(std::make_unique<StuckConnection>(&destroyed));
    state.pendingConnects().park(std::make_unique<StuckConnection>(&destroyed));
    CommContext* ctx = state.contexts().create(1, -1, /*coll=*/false);
    EXPECT_TRUE(state.contexts().contains(ctx));
    EXPECT_EQ(state.pendingConnects().size(), 2u);
    EXPECT_EQ(destroyed, 0);
  }
  EXPECT_EQ(destroyed, 2);
}

}  // namespace
}  // namespace tally::plugin
