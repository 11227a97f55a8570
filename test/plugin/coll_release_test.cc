// SPDX-License-Identifier: Apache-2.0
// CollNet deregMr with calls in flight, at the plugin layer: CollComm records the bytes each
// unfinished call reads and writes, and a deregMr of memory any of them uses aborts the client
// (once per deregMr, with the count in the sticky error) before it returns. Calls that are done,
// or that use other memory, leave the communicator alone. A fake CollClient stands in for the
// reducers.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "plugin/coll_comm.h"
#include "plugin_test_util.h"
#include "test/plugin/fake_coll_client.h"

namespace tally::plugin {
namespace {

// A call whose state the test sets: running, done, or failed with the client's sticky error.
struct CallState {
  bool done = false;
  Status error;  // ok: no error yet
};

class ScriptedCall : public worker_client::CollCall {
 public:
  explicit ScriptedCall(std::shared_ptr<CallState> state) : state_(std::move(state)) {}
  Status test(bool* done) override {
    if (state_->done) {
      *done = true;
      return Status::ok();
    }
    if (!state_->error.isOk()) return state_->error;
    *done = false;
    return Status::ok();
  }

 private:
  std::shared_ptr<CallState> state_;
};

class AbortRecordingClient : public test::FakeCollClient {
 public:
  Status iallreduce(const void*, void*, size_t count, DataType type, ReduceOp,
                    worker_client::CollRequest* req) override {
    calls.push_back(std::make_shared<CallState>());
    *req = worker_client::CollRequest(std::make_shared<ScriptedCall>(calls.back()),
                                count * dataTypeSize(type));
    return Status::ok();
  }
  void close() override { ++closes; }
  // As the real client: the first error sticks to every unfinished call.
  void abort(const Status& why) override {
    aborts.push_back(why);
    for (auto& c : calls) {
      if (!c->done && c->error.isOk()) c->error = why;
    }
  }
  int rank() const override { return 0; }
  int nranks() const override { return 2; }

  std::vector<std::shared_ptr<CallState>> calls;
  std::vector<Status> aborts;
  int closes = 0;
};

class CollReleaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto client = std::make_unique<AbortRecordingClient>();
    client_ = client.get();
    comm_ = std::make_unique<CollComm>(0, 8, std::move(client));
    buf_.assign(4096, 0);
  }

  CollReq* post(size_t send_off, size_t recv_off, size_t count) {
    CollReq* req = nullptr;
    Status st = comm_->iallreduce(buf_.data() + send_off, buf_.data() + recv_off, count,
                                  DataType::kFloat32, ReduceOp::kSum, &req);
    EXPECT_TRUE(st.isOk()) << st.toString();
    EXPECT_NE(req, nullptr);
    return req;
  }

  // Through the entry point, as NCCL does it.
  void* reg(size_t off, size_t bytes) {
    void* mh = nullptr;
    EXPECT_EQ(ncclCollNetPlugin_v11.regMr(comm_.get(), buf_.data() + off, bytes, NCCL_PTR_HOST,
                                          &mh),
              ncclSuccess);
    return mh;
  }
  ncclResult_t dereg(void* mh) { return ncclCollNetPlugin_v11.deregMr(comm_.get(), mh); }

  AbortRecordingClient* client_ = nullptr;
  std::unique_ptr<CollComm> comm_;
  std::vector<char> buf_;
};

TEST_F(CollReleaseTest, MemoryNoUnfinishedCallUsesIsReleasedWithoutAbort) {
  // Send [0, 400), recv [400, 800).
  post(0, 400, 100);
  // Right next to both ranges, touching neither.
  void* after = reg(800, 200);
  EXPECT_EQ(dereg(after), ncclSuccess);
  EXPECT_TRUE(client_->aborts.empty());
  // The call is done but not yet tested: its memory is free to go.
  client_->calls[0]->done = true;
  void* all = reg(0, 4096);
  EXPECT_EQ(dereg(all), ncclSuccess);
  EXPECT_TRUE(client_->aborts.empty());
}

TEST_F(CollReleaseTest, DeregOfMemoryACallWritesAbortsFirstAndItsTestFails) {
  CollReq* a = post(0, 400, 100);  // reads [0, 400), writes [400, 800)
  CollReq* b = post(800, 1200, 100);
  CollReq* other = post(2000, 2400, 100);
  // The last byte of a's recv buffer and the first of b's send buffer.
  void* mh = reg(799, 2);
  EXPECT_EQ(dereg(mh), ncclSuccess);
  ASSERT_EQ(client_->aborts.size(), 1u);
  EXPECT_EQ(client_->aborts[0].message(),
            "CollNet comm aborted: memory deregistered with 2 calls in flight");
  for (CollReq* r : {a, b, other}) {
    int done = -1;
    EXPECT_EQ(ncclCollNetPlugin_v11.test(r, &done, nullptr), ncclInternalError);
  }
  // The failed calls still count as in flight (a thread could be in them had abort not run):
  // deregistering more of their memory aborts again, which the client takes as a no-op.
  void* rest = reg(0, 4096);
  EXPECT_EQ(dereg(rest), ncclSuccess);
  ASSERT_EQ(client_->aborts.size(), 2u);
  EXPECT_EQ(client_->aborts[1].message(),
            "CollNet comm aborted: memory deregistered with 3 calls in flight");
}

TEST_F(CollReleaseTest, TestedCallsAreForgotten) {
  CollReq* a = post(0, 0, 100);  // in place: [0, 400)
  client_->calls[0]->done = true;
  int done = 0;
  ASSERT_EQ(ncclCollNetPlugin_v11.test(a, &done, nullptr), ncclSuccess);
  ASSERT_EQ(done, 1);
  // The slot is reused by a call elsewhere; the old range is gone with the old call.
  post(1000, 1000, 10);
  void* mh = reg(0, 400);
  EXPECT_EQ(dereg(mh), ncclSuccess);
  EXPECT_TRUE(client_->aborts.empty());
  void* in_use = reg(1000, 1);
  EXPECT_EQ(dereg(in_use), ncclSuccess);
  ASSERT_EQ(client_->aborts.size(), 1u);
  EXPECT_EQ(client_->aborts[0].message(),
            "CollNet comm aborted: memory deregistered with 1 call in flight");
}

TEST_F(CollReleaseTest, DeregNeedsTheCommunicator) {
  void* mh = reg(0, 16);
  EXPECT_EQ(ncclCollNetPlugin_v11.deregMr(nullptr, mh), ncclInternalError);
  EXPECT_EQ(dereg(mh), ncclSuccess);
}

TEST(MemRange, OverlapIsHalfOpenAndEmptyRangesOverlapNothing) {
  char b[16];
  EXPECT_TRUE(MemRange::of(b, 8).overlaps(MemRange::of(b + 7, 1)));
  EXPECT_FALSE(MemRange::of(b, 8).overlaps(MemRange::of(b + 8, 8)));
  EXPECT_FALSE(MemRange::of(b + 8, 8).overlaps(MemRange::of(b, 8)));
  EXPECT_FALSE(MemRange::of(b, 0).overlaps(MemRange::of(b, 16)));
  EXPECT_FALSE(MemRange::of(b, 16).overlaps(MemRange::of(b + 4, 0)));
  EXPECT_TRUE(MemRange::of(b + 4, 2).overlaps(MemRange::of(b, 16)));
}

}  // namespace
}  // namespace tally::plugin
