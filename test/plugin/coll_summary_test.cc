// SPDX-License-Identifier: Apache-2.0
// CollNet's cluster-facing behaviour at the entry points: the per-communicator summary logged at
// close, the reducer-origin line at init, and CollNet's one device on a host that cannot join
// (no reducers, a malformed CLUSTER_SPEC: connect declines) while the net side keeps working.
// CollComm runs over a fake CollClient: no reducer needed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/log.h"
#include "plugin/coll_comm.h"
#include "plugin/state.h"
#include "plugin_test_util.h"
#include "test/plugin/fake_coll_client.h"

namespace tally::plugin {
namespace {

class FakeCall : public worker_client::CollCall {
 public:
  explicit FakeCall(Status result) : result_(std::move(result)) {}
  Status test(bool* done) override {
    if (!result_) return result_;
    // Not done on the first poll, so CollComm must not count bytes of unfinished calls.
    *done = polled_++ > 0;
    return Status::ok();
  }

 private:
  Status result_;
  int polled_ = 0;
};

// Posts succeed unless fail_post is set; a request fails its test when fail_test is set.
class FakeClient : public test::FakeCollClient {
 public:
  FakeClient(int rank, int nranks, int* closes) : rank_(rank), nranks_(nranks), closes_(closes) {}
  Status iallreduce(const void*, void*, size_t count, DataType type, ReduceOp,
                    worker_client::CollRequest* req) override {
    if (fail_post) return Status::remote("reducer r:1 closed the connection");
    *req = worker_client::CollRequest(
        std::make_shared<FakeCall>(fail_test ? Status::timeout("no progress for 10 s")
                                             : Status::ok()),
        count * dataTypeSize(type));
    return Status::ok();
  }
  void close() override { ++*closes_; }
  void abort(const Status&) override { ++*closes_; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }

  bool fail_post = false;
  bool fail_test = false;

 private:
  int rank_, nranks_;
  int* closes_;
};

std::mutex g_mu;
std::vector<std::pair<log::Level, std::string>> g_lines;

void captureSink(log::Level level, unsigned long, const char*, int, const char* message) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_lines.emplace_back(level, message);
}

std::vector<std::pair<log::Level, std::string>> takeLines() {
  std::lock_guard<std::mutex> lock(g_mu);
  return std::exchange(g_lines, {});
}

// Runs one all-reduce of `count` floats to the end; returns the Status of the first failure.
Status runOne(CollComm* comm, size_t count) {
  std::vector<float> buf(count);
  CollReq* req = nullptr;
  TALLY_RETURN_IF_ERROR(
      comm->iallreduce(buf.data(), buf.data(), count, DataType::kFloat32, ReduceOp::kSum, &req));
  if (req == nullptr) return Status::internal("no request slot");
  for (int i = 0; i < 10; ++i) {
    bool done = false;
    TALLY_RETURN_IF_ERROR(comm->test(req, &done, nullptr));
    if (done) return Status::ok();
  }
  return Status::internal("fake request never finished");
}

TEST(CollCommSummary, CountsCallsBytesErrorsAndTimeOpen) {
  int closes = 0;
  auto client = std::make_unique<FakeClient>(1, 4, &closes);
  FakeClient* fake = client.get();
  CollCommInfo info{true, 0xabc, "CLUSTER_SPEC workerpool2"};
  auto comm = std::make_unique<CollComm>(0, 4, std::move(client), info, 2);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(runOne(comm.get(), 1024).isOk());
  fake->fail_post = true;
  EXPECT_EQ(runOne(comm.get(), 1024).code(), StatusCode::kRemote);
  fake->fail_post = false;
  fake->fail_test = true;
  EXPECT_EQ(runOne(comm.get(), 1024).code(), StatusCode::kTimeout);

  CollCommStats before = comm->stats();
  EXPECT_EQ(before.allreduces, 4u);  // the failed post is not a call, the failed test is
  EXPECT_EQ(before.bytes, 3u * 4096);
  EXPECT_EQ(before.errors, 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));

  log::setSink(&captureSink, log::Level::kInfo);
  takeLines();
  // Through the entry point, as NCCL closes it.
  ASSERT_EQ(ncclCollNetPlugin_v11.closeColl(comm.release()), ncclSuccess);
  auto lines = takeLines();
  log::setSink(&log::stderrSink, log::Level::kWarn);
  EXPECT_EQ(closes, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].first, log::Level::kInfo);
  EXPECT_TRUE(std::regex_match(
      lines[0].second,
      std::regex(R"(CollNet comm 0xabc rank 1/4 closed: 4 all-reduces, 12\.00 KiB, )"
                 R"([0-9]+\.[0-9] s open, 2 reducers from CLUSTER_SPEC workerpool2, 2 errors)")))
      << lines[0].second;
  EXPECT_EQ(lines[0].second.find(" 0.0 s open"), std::string::npos) << lines[0].second;
}

// NCCL's send proxy holds up to kNcclUntestedRequests requests without testing them while it
// retries a NULL post: however small TALLY_COLL_MAX_REQUESTS (the client's bound on calls in
// flight), the plugin has a request for each of those, so a retry is never waiting on a test.
TEST(CollCommRequests, RoomForEveryRequestNcclHoldsUntested) {
  int closes = 0;
  CollComm comm(0, 2, std::make_unique<FakeClient>(0, 1, &closes), CollCommInfo{}, 1);
  std::vector<float> buf(4);
  std::vector<CollReq*> held;
  for (size_t i = 0; i < kNcclUntestedRequests; ++i) {
    CollReq* req = nullptr;
    ASSERT_TRUE(comm.iallreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32,
                                ReduceOp::kSum, &req)
                    .isOk());
    ASSERT_NE(req, nullptr) << "post " << i;
    held.push_back(req);
  }
  // More than NCCL can hold untested: the pool is bounded.
  CollReq* extra = reinterpret_cast<CollReq*>(1);
  ASSERT_TRUE(comm.iallreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32,
                              ReduceOp::kSum, &extra)
                  .isOk());
  EXPECT_EQ(extra, nullptr);
  for (CollReq* req : held) {
    bool done = false;
    for (int i = 0; i < 10 && !done; ++i) ASSERT_TRUE(comm.test(req, &done, nullptr).isOk());
    EXPECT_TRUE(done);
  }
  comm.close();
}

TEST(CollCommSummary, CloseIsIdempotentAndWordsAreSingular) {
  int closes = 0;
  CollComm comm(0, 2, std::make_unique<FakeClient>(0, 1, &closes), CollCommInfo{}, 1);
  ASSERT_TRUE(runOne(&comm, 1).isOk());
  EXPECT_NE(comm.summary().find(" open: "), std::string::npos) << comm.summary();
  comm.close();
  comm.close();
  EXPECT_EQ(closes, 1);
  double open = comm.stats().seconds_open;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(comm.stats().seconds_open, open);  // frozen at close
  EXPECT_TRUE(std::regex_match(comm.summary(),
                               std::regex(R"(CollNet comm rank 0/1 closed: 1 all-reduce, 4 B, )"
                                          R"([0-9]+\.[0-9] s open, 1 reducer, 0 errors)")))
      << comm.summary();
}

// ---- init through the tables, in a fresh process each (the plugin state is process-wide) ----

struct NcclLine {
  ncclDebugLogLevel level;
  std::string text;
};
std::vector<NcclLine> g_nccl;

void ncclCapture(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_mu);
  g_nccl.push_back({level, buf});
}

// Inside a death-test child: report and leave with status 1.
#define CHILD_CHECK(cond)                                                    \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "check failed: %s (line %d)\n", #cond, __LINE__); \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

void installState(std::map<std::string, std::string> cluster) {
  std::map<std::string, std::string> values = testing::loopbackValues();
  values.erase("TALLY_REDUCERS");
  std::unique_ptr<PluginState> state;
  Status st = PluginState::create(testing::paramsFrom(values),
                                  ClusterInput::load(MapParamSource(std::move(cluster))), &state);
  CHILD_CHECK(st.isOk());
  CHILD_CHECK(PluginState::installGlobal(std::move(state)));
}

int countLines(ncclDebugLogLevel level, const std::string& needle) {
  std::lock_guard<std::mutex> lock(g_mu);
  int n = 0;
  for (const NcclLine& l : g_nccl) {
    if (l.level == level && l.text.find(needle) != std::string::npos) ++n;
  }
  return n;
}

// CollNet connect on a host where it cannot form a group: listen works, connect declines at once
// with `why` (a WARN), and NCCL falls back to point-to-point.
void expectConnectDeclines(const std::string& why) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen_comm = nullptr;
  CHILD_CHECK(ncclCollNetPlugin_v8.listen(0, handle, &listen_comm) == ncclSuccess);
  void* handles[1] = {handle};
  void* coll_comm = reinterpret_cast<void*>(1);
  CHILD_CHECK(ncclCollNetPlugin_v8.connect(handles, 1, 0, listen_comm, &coll_comm) ==
              ncclInvalidUsage);
  CHILD_CHECK(coll_comm == nullptr);
  CHILD_CHECK(countLines(NCCL_LOG_WARN, "declining CollNet") == 1);
  CHILD_CHECK(countLines(NCCL_LOG_WARN, why) >= 1);
  CHILD_CHECK(ncclCollNetPlugin_v8.closeListen(listen_comm) == ncclSuccess);
}

// A malformed cluster variable: CollNet init succeeds with its one device (the count every host
// reports), the error is a WARN at init and again when connect declines; the net is unaffected.
void malformedClusterSpecChild() {
  installState({{"CLUSTER_SPEC", R"({"cluster": {"workerpool0": ["p:1"]}, "task": )"
                                 R"({"type": "workerpool0", "index": "one"}})"},
                {"TF_CONFIG", R"({"cluster": {"chief": ["c:1"], "ps": ["r:1"]}, "task": )"
                              R"({"type": "chief", "index": 0}})"}});
  CHILD_CHECK(ncclNetPlugin_v8.init(ncclCapture) == ncclSuccess);
  int ndev = 0;
  CHILD_CHECK(ncclNetPlugin_v8.devices(&ndev) == ncclSuccess && ndev >= 1);
  CHILD_CHECK(ncclCollNetPlugin_v8.init(ncclCapture) == ncclSuccess);
  const std::string error =
      "CLUSTER_SPEC: task.index: expected a non-negative integer, got \"one\"";
  CHILD_CHECK(countLines(NCCL_LOG_WARN, error) == 1);
  CHILD_CHECK(countLines(NCCL_LOG_WARN, "point-to-point is unaffected") == 1);
  CHILD_CHECK(countLines(NCCL_LOG_INFO, "CollNet reducers") == 0);
  int ncoll = -1;
  CHILD_CHECK(ncclCollNetPlugin_v8.devices(&ncoll) == ncclSuccess && ncoll == 1);
  expectConnectDeclines(error);
  CHILD_CHECK(ncclNetPlugin_v8.devices(&ndev) == ncclSuccess && ndev >= 1);
  std::exit(0);
}

void reducersFromClusterSpecChild() {
  installState(
      {{"CLUSTER_SPEC", R"({"cluster": {"workerpool0": ["p:1"], "workerpool1": ["w:1"], )"
                        R"("workerpool2": ["cmle-training-workerpool2-ab-0:2222"]}, "task": )"
                        R"({"type": "workerpool1", "index": 0}})"}});
  void* ctx1 = nullptr;
  void* ctx2 = nullptr;
  const size_t before = PluginState::globalIfLoaded()->contexts().size();
  CHILD_CHECK(ncclCollNetPlugin_v11.init(&ctx1, 1, ncclCapture) == ncclSuccess);
  CHILD_CHECK(ncclCollNetPlugin_v11.init(&ctx2, 2, ncclCapture) == ncclSuccess);
  CHILD_CHECK(ctx1 != nullptr && ctx2 != nullptr);
  CHILD_CHECK(PluginState::globalIfLoaded()->contexts().size() == before + 2);
  CHILD_CHECK(countLines(NCCL_LOG_INFO,
                         "NET/Tally : CollNet reducers from CLUSTER_SPEC "
                         "workerpool2: cmle-training-workerpool2-ab-0:2222") == 1);
  int ndev = 0, ncoll = 0;
  CHILD_CHECK(ncclNetPlugin_v11.devices(&ndev) == ncclSuccess);
  CHILD_CHECK(ncclCollNetPlugin_v11.devices(&ncoll) == ncclSuccess);
  CHILD_CHECK(ncoll == 1 && ndev >= 1);
  CHILD_CHECK(ncclCollNetPlugin_v11.finalize(ctx1) == ncclSuccess);
  CHILD_CHECK(ncclCollNetPlugin_v11.finalize(ctx2) == ncclSuccess);
  CHILD_CHECK(PluginState::globalIfLoaded()->contexts().size() == before);
  std::exit(0);
}

// No reducers: CollNet has its one device and a context per init (finalized as usual), and
// connect declines.
void noReducersChild() {
  installState({});
  CHILD_CHECK(PluginState::globalIfLoaded()->collDeviceCount() == 1);
  const size_t before = PluginState::globalIfLoaded()->contexts().size();
  std::vector<void*> contexts;
  for (uint64_t id = 1; id <= 3; ++id) {
    void* ctx = nullptr;
    CHILD_CHECK(ncclCollNetPlugin_v11.init(&ctx, id, ncclCapture) == ncclSuccess);
    CHILD_CHECK(ctx != nullptr);
    contexts.push_back(ctx);
  }
  CHILD_CHECK(ncclCollNetPlugin_v8.init(ncclCapture) == ncclSuccess);
  CHILD_CHECK(PluginState::globalIfLoaded()->contexts().size() == before + 3);
  int ncoll = -1;
  CHILD_CHECK(ncclCollNetPlugin_v11.devices(&ncoll) == ncclSuccess && ncoll == 1);
  CHILD_CHECK(countLines(NCCL_LOG_WARN, "") == 0);
  CHILD_CHECK(countLines(NCCL_LOG_INFO, "CollNet disabled: no reducers configured") == 1);
  expectConnectDeclines("no reducers configured");
  for (void* ctx : contexts) CHILD_CHECK(ncclCollNetPlugin_v11.finalize(ctx) == ncclSuccess);
  CHILD_CHECK(ncclCollNetPlugin_v11.finalize(nullptr) == ncclSuccess);
  CHILD_CHECK(PluginState::globalIfLoaded()->contexts().size() == before);
  std::exit(0);
}

// TALLY_COLLNET=0: no CollNet device, and init makes no context, since NCCL never finalizes a
// CollNet whose devices() is 0.
void collNetOffChild() {
  std::map<std::string, std::string> values = testing::loopbackValues();
  values["TALLY_COLLNET"] = "0";
  std::unique_ptr<PluginState> state;
  CHILD_CHECK(PluginState::create(testing::paramsFrom(values), &state).isOk());
  CHILD_CHECK(PluginState::installGlobal(std::move(state)));
  const size_t before = PluginState::globalIfLoaded()->contexts().size();
  void* ctx = reinterpret_cast<void*>(1);
  CHILD_CHECK(ncclCollNetPlugin_v11.init(&ctx, 7, ncclCapture) == ncclSuccess);
  CHILD_CHECK(ctx == nullptr);
  CHILD_CHECK(PluginState::globalIfLoaded()->contexts().size() == before);
  int ncoll = -1;
  CHILD_CHECK(ncclCollNetPlugin_v11.devices(&ncoll) == ncclSuccess && ncoll == 0);
  std::exit(0);
}

TEST(CollNetInitDeathTest, CollNetOffMakesNoContext) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(collNetOffChild(), ::testing::ExitedWithCode(0), "");
}

TEST(CollNetInitDeathTest, NoReducersDeclinesAtConnect) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(noReducersChild(), ::testing::ExitedWithCode(0), "");
}

TEST(CollNetInitDeathTest, MalformedClusterSpecDeclinesAtConnect) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(malformedClusterSpecChild(), ::testing::ExitedWithCode(0), "");
}

TEST(CollNetInitDeathTest, LogsWhereReducersCameFromOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(reducersFromClusterSpecChild(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace tally::plugin
