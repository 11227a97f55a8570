// The value rules of common/params.cc: what Params::problems() refuses and how
// findParamProblems() reports every bad variable of a source at once.
#include <gtest/gtest.h>

#include <string>

#include "common/params.h"

namespace tally {
namespace {

Params loaded(std::map<std::string, std::string> values) {
  Params p;
  EXPECT_TRUE(Params::load(MapParamSource(std::move(values)), &p).isOk());
  return p;
}

TEST(ParamsCheck, DefaultsAreValid) {
  EXPECT_TRUE(Params::defaults().problems().empty());
  EXPECT_TRUE(Params::defaults().validate().isOk());
  EXPECT_TRUE(findParamProblems(MapParamSource()).empty());
}

TEST(ParamsCheck, EachRuleRefusesItsValue) {
  const struct {
    const char* name;
    const char* value;
    const char* message;
  } cases[] = {
      {"TALLY_SOCKET_NSOCKS", "99", "TALLY_SOCKET_NSOCKS=99 is not valid: expected 1 to 16"},
      {"TALLY_SOCKET_NSOCKS", "0", "TALLY_SOCKET_NSOCKS=0 is not valid: expected 1 to 16"},
      {"TALLY_TRANSPORT", "rdma",
       "TALLY_TRANSPORT=rdma is not valid: expected one of auto, tcp, ofi, verbs"},
      {"TALLY_IB_QPS_PER_CONNECTION", "17",
       "TALLY_IB_QPS_PER_CONNECTION=17 is not valid: expected 1 to 16"},
      {"TALLY_LINK_MBPS", "-1", "TALLY_LINK_MBPS=-1 is not valid: expected 0 to 10000000"},
      {"TALLY_LINK_MBPS", "10000001",
       "TALLY_LINK_MBPS=10000001 is not valid: expected 0 to 10000000"},
      {"TALLY_COLL_WINDOW", "0", "TALLY_COLL_WINDOW=0 is not valid: expected at least 1"},
      {"TALLY_COLL_PROGRESS", "busy",
       "TALLY_COLL_PROGRESS=busy is not valid: expected one of thread, poll, legacy"},
      {"TALLY_COLL_MAX_REQUESTS", "65537",
       "TALLY_COLL_MAX_REQUESTS=65537 is not valid: expected 1 to 65536"},
      {"TALLY_LINK_LATENCY_US", "1000001",
       "TALLY_LINK_LATENCY_US=1000001 is not valid: expected 0 to 1000000"},
      // The keeper's nanoseconds would overflow int64 past about 9.2 x 10^12 ms.
      {"TALLY_REDUCER_TIMEOUT_MS", "10000000000000",
       "TALLY_REDUCER_TIMEOUT_MS=10000000000000 is not valid: expected 0 to 86400000"},
  };
  for (const auto& c : cases) {
    const Params p = loaded({{c.name, c.value}});
    const Status st = p.validate();
    EXPECT_EQ(st.code(), StatusCode::kInvalidUsage) << c.name;
    EXPECT_EQ(st.message(), c.message);
    ASSERT_EQ(p.problems().size(), 1u) << c.name;
  }
  // The edges that are allowed.
  EXPECT_TRUE(loaded({{"TALLY_SOCKET_NSOCKS", "16"},
                      {"TALLY_TRANSPORT", " verbs"},
                      {"TALLY_COLL_MAX_REQUESTS", "65536"},
                      {"TALLY_COLL_PROGRESS", "poll"},
                      {"TALLY_LINK_LATENCY_US", "1000000"},
                      {"TALLY_REDUCER_TIMEOUT_MS", "24h"}})
                  .validate()
                  .isOk());
}

TEST(ParamsCheck, FindReportsEveryBadVariableInRegistryOrder) {
  const MapParamSource source({{"TALLY_TRANSPORT", "rdma"},
                               {"TALLY_SOCKET_NSOCKS", "99"},
                               {"TALLY_TIMEOUT_MS", "soon"},
                               {"TALLY_SLICE_BYTES", "64K"}});
  const std::vector<ParamProblem> found = findParamProblems(source);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].name, "TALLY_SOCKET_NSOCKS");
  EXPECT_EQ(found[1].name, "TALLY_TRANSPORT");
  EXPECT_EQ(found[2].name, "TALLY_TIMEOUT_MS");
  EXPECT_EQ(found[2].value, "'soon'");
  EXPECT_EQ(found[2].reason, "expected a non-negative number, got 'soon'");
  // load() agrees that the source is bad (it stops at the first value that does not parse).
  Params p;
  EXPECT_FALSE(Params::load(source, &p).isOk());
}

}  // namespace
}  // namespace tally
