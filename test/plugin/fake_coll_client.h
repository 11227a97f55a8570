// A base for the plugin tests' fake CollClients: all-gather and reduce-scatter post like an
// all-reduce of the window, so a fake only writes iallreduce (and what else it records).
#pragma once

#include "reducer/coll_client.h"

namespace tally::plugin::test {

class FakeCollClient : public reducer::CollClient {
 public:
  Status iallgather(const void*, void*, const reducer::CollWindow& window,
                    reducer::CollRequest* req) override {
    return iallreduce(nullptr, nullptr, window.count, DataType::kUint8, ReduceOp::kSum, req);
  }
  Status ireducescatter(const void*, void*, const reducer::CollWindow& window, DataType type,
                        ReduceOp op, reducer::CollRequest* req) override {
    return iallreduce(nullptr, nullptr, window.count, type, op, req);
  }
};

}  // namespace tally::plugin::test
