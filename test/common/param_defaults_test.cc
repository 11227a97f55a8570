// SPDX-License-Identifier: Apache-2.0
// The compile-time reading of the registry's defaults (paramDefaultNumber, paramDefaultBytes) that
// option structs take their defaults from, checked against what Params::load parses from the
// same text, and the reducer's default window against the worker's. The structs themselves are
// checked next to their own tests (test/worker_client, test/reducer, test/tools/commands).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "common/params.h"
#include "common/sizes.h"

namespace tally {
namespace {

static_assert(paramDefaultNumber("TALLY_COLL_WINDOW") == 8);
static_assert(paramDefaultNumber("TALLY_NO_SUCH_VARIABLE") == -1);
static_assert(paramDefaultNumber("TALLY_SLICE_BYTES") == -1);  // "256K": not plain digits
static_assert(paramDefaultNumber("TALLY_TRANSPORT") == -1);    // "auto"
static_assert(paramDefaultBytes("TALLY_SLICE_BYTES") == 256 * 1024);
static_assert(paramDefaultBytes("NCCL_BUFFSIZE") == 4 * 1024 * 1024);
static_assert(paramDefaultBytes("TALLY_MIN_SLICE_BYTES") == 0);
static_assert(paramDefaultBytes("TALLY_NO_SUCH_VARIABLE") == -1);
static_assert(paramDefaultBytes("TALLY_TRANSPORT") == -1);

// Every byte-valued default reads at compile time as parseBytes reads it at run time.
TEST(ParamDefaults, BytesMatchParseBytes) {
  int checked = 0;
  for (const ParamInfo& info : paramRegistry()) {
    if (info.type != ParamType::kBytes) continue;
    uint64_t parsed = 0;
    ASSERT_TRUE(parseBytes(info.default_value, &parsed).isOk()) << info.name;
    EXPECT_EQ(paramDefaultBytes(info.name), static_cast<int64_t>(parsed)) << info.name;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// Every plain-digit default of a number reads at compile time as Params::load reads it.
TEST(ParamDefaults, NumbersMatchLoad) {
  const Params defaults = Params::defaults();
  EXPECT_EQ(paramDefaultNumber("TALLY_COLL_WINDOW"), defaults.collWindow);
  EXPECT_EQ(paramDefaultNumber("TALLY_COLL_MAX_REQUESTS"), defaults.collMaxRequests);
  EXPECT_EQ(paramDefaultNumber("TALLY_REDUCER_TIMEOUT_MS"), defaults.reducerTimeout);
  EXPECT_EQ(paramDefaultNumber("TALLY_MIN_REDUCERS"), defaults.minReducers);
  EXPECT_EQ(paramDefaultNumber("TALLY_REJOIN_INTERVAL_MS"), defaults.rejoinInterval);
  EXPECT_EQ(paramDefaultNumber("TALLY_CONNECT_TIMEOUT_MS"), defaults.connectTimeout);
  EXPECT_EQ(paramDefaultNumber("TALLY_TIMEOUT_MS"), defaults.timeout);
  EXPECT_EQ(paramDefaultBytes("TALLY_SLICE_BYTES"), static_cast<int64_t>(defaults.sliceBytes));
  EXPECT_EQ(paramDefaultBytes("TALLY_ZEROCOPY_MIN_BYTES"),
            static_cast<int64_t>(defaults.zerocopyMinBytes));
}

// The reducer's default window admits the worker's default, and TALLY_COLL_WINDOW's
// documentation (docs/env.md) states it as it is.
TEST(ParamDefaults, ReducerWindowIsTheOneTheDocsState) {
  EXPECT_GE(kDefaultReducerWindow, Params::defaults().collWindow);
  std::string doc;
  for (const ParamInfo& info : paramRegistry()) {
    if (std::string(info.name) == "TALLY_COLL_WINDOW") doc = info.doc;
  }
  const std::string stated =
      "the reducer's --window, " + std::to_string(kDefaultReducerWindow) + " by default";
  EXPECT_NE(doc.find(stated), std::string::npos) << doc;
}

}  // namespace
}  // namespace tally
