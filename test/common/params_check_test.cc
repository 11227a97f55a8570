// SPDX-License-Identifier: Apache-2.0
// The value rules of common/param_check.cc: what Params::problems() refuses, how
// findParamProblems() reports every bad variable and unknown TALLY_ name of a source at once, and
// how the start-up log warns of unknown names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/log.h"
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
      {"TALLY_COLL_WINDOW", "0", "TALLY_COLL_WINDOW=0 is not valid: expected 1 to 4096"},
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

// Every duration variable is named *_MS: a bare number is milliseconds, as the name says, and a
// duration with its unit is read as one.
TEST(ParamsCheck, MillisecondVariablesReadABareNumberAsMilliseconds) {
  int millis_variables = 0;
  for (const ParamInfo& info : paramRegistry()) {
    if (info.type != ParamType::kMillis) continue;
    ++millis_variables;
    EXPECT_TRUE(std::string(info.name).ends_with("_MS")) << info.name;
  }
  EXPECT_GE(millis_variables, 4);
  const Params p = loaded({{"TALLY_TIMEOUT_MS", "5000"},
                           {"TALLY_CONNECT_TIMEOUT_MS", "30s"},
                           {"TALLY_REDUCER_TIMEOUT_MS", "1.5s"},
                           {"TALLY_REJOIN_INTERVAL_MS", "0"}});
  EXPECT_EQ(p.timeout, 5000);
  EXPECT_EQ(p.connectTimeout, 30000);
  EXPECT_EQ(p.reducerTimeout, 1500);
  EXPECT_EQ(p.rejoinInterval, 0);
  Params bad;
  const Status st = Params::load(
      MapParamSource(std::map<std::string, std::string>{{"TALLY_TIMEOUT_MS", "1.5ms"}}), &bad);
  EXPECT_EQ(st.message(),
            "TALLY_TIMEOUT_MS='1.5ms' is not valid: expected a whole number of milliseconds, got "
            "'1.5ms'");
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
  EXPECT_EQ(found[2].reason,
            "expected a duration such as 500ms, 5s or 2m (units ns, us, ms, s, m, h), got 'soon'");
  // load() agrees that the source is bad (it stops at the first value that does not parse).
  Params p;
  EXPECT_FALSE(Params::load(source, &p).isOk());
}

using Values = std::map<std::string, std::string>;

// Values each of which parses alone but that a CollNet connect would refuse: the window the wire
// carries, a reducer address without its port, a job token file that cannot be read. The plugin
// refuses them at start-up and `tally env` and `tally doctor` report them, all from this list.
TEST(ParamsCheck, RefusesWhatAConnectWouldRefuse) {
  const struct {
    const char* name;
    const char* value;
    const char* message;  // the start of the problem's text
  } cases[] = {
      {"TALLY_COLL_WINDOW", "100000", "TALLY_COLL_WINDOW=100000 is not valid: expected 1 to 4096"},
      {"TALLY_REDUCERS", "host-without-port",
       "TALLY_REDUCERS=host-without-port is not valid: bad address \"host-without-port\": "
       "expected host:port"},
      {"TALLY_REDUCERS", "a:1,b", "TALLY_REDUCERS=a:1,b is not valid: bad address \"b\""},
      {"TALLY_REDUCERS", "r:0", "TALLY_REDUCERS=r:0 is not valid: bad address \"r:0\""},
      {"TALLY_SPARE_REDUCERS", "spare",
       "TALLY_SPARE_REDUCERS=spare is not valid: bad address \"spare\""},
      {"TALLY_JOB_TOKEN_FILE", "/nonexistent/tally-token",
       "TALLY_JOB_TOKEN_FILE=/nonexistent/tally-token is not valid: "},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.name) + "=" + c.value);
    const Params p = loaded({{c.name, c.value}});
    const Status st = p.validate();
    EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
    EXPECT_EQ(st.message().rfind(c.message, 0), 0u) << st.message();
    const std::vector<ParamProblem> found =
        findParamProblems(MapParamSource(Values{{c.name, c.value}}));
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].toString(), st.message());
  }
  EXPECT_TRUE(loaded({{"TALLY_COLL_WINDOW", "4096"},
                      {"TALLY_REDUCERS", "a:1, [fe80::1%eth0]:2,"},
                      {"TALLY_SPARE_REDUCERS", "10.0.0.9:5555"}})
                  .validate()
                  .isOk());
}

// A TALLY_ name that is no variable (a typo that would silently leave a setting at its default)
// is reported with the nearest variable, its value never shown: it may be a misspelled secret.
// Names that are not Tally's, and the scheduler variables `tally launch` reads, are not.
TEST(ParamsCheck, UnknownTallyNamesAreReportedWithTheNearestVariable) {
  std::vector<ParamProblem> found =
      findParamProblems(MapParamSource({{"TALLY_REDUCER", "r:1"}, {"TALLY_JOB_TOKN", "secret"}}));
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].toString(),
            "TALLY_JOB_TOKN is not a Tally variable; did you mean TALLY_JOB_TOKEN?");
  EXPECT_EQ(found[1].toString(),
            "TALLY_REDUCER is not a Tally variable; did you mean TALLY_REDUCERS?");
  found = findParamProblems(MapParamSource(Values{{"TALLY_XYZZY_PLUGH_QUUX", "1"}}));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].toString(), "TALLY_XYZZY_PLUGH_QUUX is not a Tally variable");
  EXPECT_TRUE(findParamProblems(MapParamSource({{"NCCL_ALGO", "ring"},
                                                {"TALLY_JOBSET_NAME", "train"},
                                                {"TALLY_SLURM_HET_GROUP", "1"}}))
                  .empty());
}

std::vector<std::string> g_warnings;

void captureWarning(log::Level, unsigned long, const char*, int, const char* message) {
  g_warnings.emplace_back(message);
}

// The plugin and tally-reducer do not refuse an unknown TALLY_ name (a newer job script may set
// one an older plugin lacks): load() keeps it, and the start-up log warns of it.
TEST(ParamsCheck, UnknownNamesAreWarnedOfAtStartUp) {
  Params p;
  ASSERT_TRUE(Params::load(MapParamSource(Values{{"TALLY_REDUCER", "r:1"}}), &p).isOk());
  ASSERT_EQ(p.unknown_names.size(), 1u);
  EXPECT_EQ(p.unknown_names[0].nearest, "TALLY_REDUCERS");
  EXPECT_TRUE(p.validate().isOk());
  g_warnings.clear();
  log::setSink(&captureWarning, log::Level::kWarn);
  p.logProvenance();
  log::setSink(&log::stderrSink, log::Level::kWarn);
  ASSERT_EQ(g_warnings.size(), 1u);
  EXPECT_EQ(g_warnings[0],
            "TALLY_REDUCER is not a Tally variable; did you mean TALLY_REDUCERS? (ignored)");
}

// Each variable read alone: one that does not parse stays at its default and is reported; the
// others keep their values (what `tally doctor` goes on with).
TEST(ParamsCheck, LoadEachKeepsTheVariablesThatParse) {
  std::vector<ParamProblem> unparsed;
  const Params p = Params::loadEach(
      MapParamSource(Values{{"TALLY_SLICE_BYTES", "lots"}, {"TALLY_REDUCERS", "r:1"}}), &unparsed);
  EXPECT_EQ(p.reducers, "r:1");
  EXPECT_EQ(p.sliceBytes, Params::defaults().sliceBytes);
  ASSERT_EQ(unparsed.size(), 1u);
  EXPECT_EQ(unparsed[0].name, "TALLY_SLICE_BYTES");
}

}  // namespace
}  // namespace tally
