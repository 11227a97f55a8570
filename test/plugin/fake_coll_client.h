// SPDX-License-Identifier: Apache-2.0
// A base for the plugin tests' fake CollClients: all-gather and reduce-scatter post like an
// all-reduce of the window, so a fake only writes iallreduce (and what else it records).
#pragma once

#include "worker_client/coll_client.h"

namespace tally::plugin::test {

class FakeCollClient : public worker_client::CollClient {
 public:
  Status iallgather(const void*, void*, const worker_client::CollWindow& window,
                    worker_client::CollRequest* req) override {
    return iallreduce(nullptr, nullptr, window.count, DataType::kUint8, ReduceOp::kSum, req);
  }
  Status ireducescatter(const void*, void*, const worker_client::CollWindow& window, DataType type,
                        ReduceOp op, worker_client::CollRequest* req) override {
    return iallreduce(nullptr, nullptr, window.count, type, op, req);
  }
};

}  // namespace tally::plugin::test
