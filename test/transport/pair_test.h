// SPDX-License-Identifier: Apache-2.0
// The fixture base of the conformance suites (conformance_test.cc, verbs_conformance_test.cc): a
// connected pair, a_ and b_, which the suite's SetUp makes, and the request helpers its tests use.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "test/transport/test_util.h"
#include "transport/transport.h"

namespace tally::transport::test {

template <class Param>
class PairTest : public ::testing::TestWithParam<Param> {
 protected:
  // Posts a send that must be accepted (not refused for the in-flight limit).
  static std::unique_ptr<Request> send(Connection* conn, const void* data, size_t size, int tag) {
    std::unique_ptr<Request> req;
    Status status = conn->isend(data, size, tag, nullptr, &req);
    EXPECT_TRUE(status.isOk()) << status.toString();
    EXPECT_NE(req, nullptr);
    return req;
  }

  // Posts a one-buffer receive that must be accepted.
  static std::unique_ptr<Request> recv(Connection* conn, void* data, size_t size, int tag) {
    std::unique_ptr<Request> req;
    void* buffers[1] = {data};
    Status status = conn->irecv(1, buffers, &size, &tag, nullptr, &req);
    EXPECT_TRUE(status.isOk()) << status.toString();
    EXPECT_NE(req, nullptr);
    return req;
  }

  // Waits (at most kWaitMs) for a request that must succeed; *sizes gets what it reports.
  static void expectDone(Request* req, size_t* sizes = nullptr) {
    ASSERT_NE(req, nullptr);
    Status status = req->wait(kWaitMs, sizes);
    ASSERT_TRUE(status.isOk()) << status.toString();
  }

  // What receive buffers are filled with before a test, to see bytes written past a message.
  static constexpr uint8_t kUnwritten = 0xee;

  // Waits for the send `s` of `data` and the receive `r` into `got` that took it: both report
  // data.size() bytes, the bytes arrived intact, and the byte after them is still kUnwritten.
  static void expectDelivered(Request* s, Request* r, const std::vector<uint8_t>& data,
                              const std::vector<uint8_t>& got) {
    ASSERT_GT(got.size(), data.size());
    size_t sent = 0;
    size_t received = 0;
    expectDone(s, &sent);
    expectDone(r, &received);
    EXPECT_EQ(sent, data.size());
    EXPECT_EQ(received, data.size());
    EXPECT_TRUE(std::equal(data.begin(), data.end(), got.begin()));  // memcmp: UB on size 0
    EXPECT_EQ(got[data.size()], kUnwritten) << "wrote past the message";
  }

  // Waits for a request that must fail, and not by timing out; returns its status.
  static Status expectFailure(Request* req) {
    EXPECT_NE(req, nullptr);
    if (req == nullptr) return Status::internal("no request");
    Status status = req->wait(kWaitMs, nullptr);
    EXPECT_FALSE(status.isOk());
    EXPECT_NE(status.code(), StatusCode::kTimeout) << "request hung: " << status.toString();
    return status;
  }

  // A failed request's buffers may be touched until its connection is closed (transport.h):
  // tests that end with failed requests close both sides before their buffers go away.
  void closeBoth() {
    a_->close();
    b_->close();
  }

  std::unique_ptr<Connection> a_;
  std::unique_ptr<Connection> b_;
};

}  // namespace tally::transport::test
