// SPDX-License-Identifier: Apache-2.0
// ServerOptions' defaults: the window is the named kDefaultReducerWindow (common/params.h), which
// admits the workers' default TALLY_COLL_WINDOW, and the timeouts are the registry's.
#include <gtest/gtest.h>

#include "common/params.h"
#include "reducer/server.h"

namespace tally::reducer {
namespace {

TEST(OptionDefaults, ServerOptionsAreTheRegistrys) {
  const Params params = Params::defaults();
  const ServerOptions options;
  EXPECT_EQ(options.window, kDefaultReducerWindow);
  EXPECT_GE(options.window, params.collWindow);
  EXPECT_EQ(options.timeouts.connect_ms, params.connectTimeout);
  EXPECT_EQ(options.timeouts.io_ms, params.timeout);
  EXPECT_EQ(options.join_timeout_ms, params.connectTimeout);
  EXPECT_EQ(options.zerocopy_min_bytes, params.zerocopyMinBytes);
}

}  // namespace
}  // namespace tally::reducer
