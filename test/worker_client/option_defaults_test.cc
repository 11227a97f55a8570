// SPDX-License-Identifier: Apache-2.0
// CollOptions and SlicePlan default to what the parameter registry (common/params.h) says, so a
// worker built without the plugin's Params (tests, tally doctor, benches) behaves as an unset
// environment does: a number restated in a struct that differs from the registry fails here.
#include <gtest/gtest.h>

#include "common/params.h"
#include "protocol/slicing.h"
#include "worker_client/coll_client.h"

namespace tally::worker_client {
namespace {

TEST(OptionDefaults, CollOptionsAreTheRegistrys) {
  const Params params = Params::defaults();
  const CollOptions options;
  EXPECT_EQ(options.slice_bytes, params.sliceBytes);
  EXPECT_EQ(options.window, params.collWindow);
  EXPECT_EQ(options.max_requests, params.collMaxRequests);
  EXPECT_EQ(options.timeouts.connect_ms, params.connectTimeout);
  EXPECT_EQ(options.timeouts.io_ms, params.timeout);
  EXPECT_EQ(options.checksum, params.checksum);
  EXPECT_EQ(options.zerocopy_min_bytes, params.zerocopyMinBytes);
  EXPECT_EQ(options.reducer_timeout_ms, params.reducerTimeout);
  EXPECT_EQ(options.min_reducers, params.minReducers);
  EXPECT_EQ(options.rejoin_interval_ms, params.rejoinInterval);
}

TEST(OptionDefaults, SlicePlanIsTheRegistrys) {
  EXPECT_EQ(protocol::SlicePlan().max_slice_bytes, Params::defaults().sliceBytes);
}

}  // namespace
}  // namespace tally::worker_client
