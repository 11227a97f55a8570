// SPDX-License-Identifier: Apache-2.0
// tally plan's all-reduce prediction (plan_predict.h): the formulas against hand-computed
// values, the parsers of --bucket, --link and --latency, and the built `tally plan` printing it.
#include "tools/commands/plan_predict.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "test/support/command_run.h"

namespace tally::plan {
namespace {

constexpr double kMiB64 = 67108864.0;
// 1448 payload bytes in every 1514-byte frame at MTU 1500, and half a 66-byte ACK frame for the
// data coming the other way.
constexpr double kPayload1500 = 1448.0 / 1547.0;
// 10 Gbit/s of frames: 1.25e9 B/s, of which 1170006464.1 B/s payload.
constexpr double kTenGbitPayload = 1.25e9 * kPayload1500;

// Links only: no CPU cost, so the link and latency terms can be checked by hand.
PredictInput linksOnly(int64_t hosts, int64_t reducers) {
  PredictInput in;
  in.hosts = hosts;
  in.reducers = reducers;
  in.host_gbps = 10;
  in.reducer_gbps = 10;
  in.latency_s = 50e-6;
  in.worker_cpu_s_per_gib = 0;
  in.reducer_cpu_s_per_gib = 0;
  in.ring_cpu_s_per_gib = 0;
  in.reducer_cpu_s_per_rank_call = 0;
  return in;
}

Prediction predict(const PredictInput& in) {
  Prediction p;
  Status s = predictAllReduce(in, &p);
  EXPECT_TRUE(s.isOk()) << s.toString();
  return p;
}

TEST(PlanPredict, RingIsTwoNMinusOneOverNBytesPlusALatencyPerStep) {
  Prediction p = predict(linksOnly(4, 0));
  EXPECT_DOUBLE_EQ(p.payload_fraction, kPayload1500);
  // 1.5 x 64 MiB / 1170006464.1 B/s = 86.0365 ms, plus 2(n-1) = 6 steps of 50 us.
  EXPECT_NEAR(p.ring.host_link_s, 0.0860365298, 1e-9);
  EXPECT_NEAR(p.ring.latency_s, 300e-6, 1e-12);
  EXPECT_NEAR(p.ring.seconds, 0.0863365298, 1e-9);
  EXPECT_EQ(p.ring.bound, "host link");
  EXPECT_NEAR(p.ring.algbw_gbs, kMiB64 / 0.0863365298 / 1e9, 1e-6);
  EXPECT_NEAR(p.ring.busbw_gbs, p.ring.algbw_gbs * 1.5, 1e-9);
  EXPECT_FALSE(p.has_rs);
  EXPECT_EQ(p.speedup, 0);
}

TEST(PlanPredict, EnoughReducersTakeOneBucketPerHost) {
  Prediction p = predict(linksOnly(8, 8));
  // Each host sends S and receives S: 64 MiB / 1170006464.1 B/s = 57.358 ms, plus 4 x 50 us (the
  // data's trip there and back, and the commit's), plus the first 32 KiB slice's bytes once more
  // (store and forward at the reducer): 57.358 / 2048 = 0.028 ms.
  EXPECT_NEAR(p.rs.host_link_s, kMiB64 / kTenGbitPayload, 1e-12);
  EXPECT_NEAR(p.rs.host_link_s, 0.0573576865, 1e-9);
  EXPECT_NEAR(p.rs.reducer_link_s, p.rs.host_link_s, 1e-12);  // n S / m = S
  EXPECT_NEAR(p.rs.seconds, 0.0573576865 + 200e-6 + 0.0573576865 / 2048, 1e-9);  // 57.586 ms
  EXPECT_NEAR(p.ring.seconds, 1.75 * 0.0573576865 + 14 * 50e-6, 1e-9);           // 101.076 ms
  EXPECT_NEAR(p.speedup, 0.1010759514 / 0.0575856932, 1e-6);                     // 1.755
  EXPECT_TRUE(p.has_rs);
}

TEST(PlanPredict, TooFewReducersAreBoundByTheirLinks) {
  Prediction p = predict(linksOnly(8, 2));
  // Each reducer takes n S / m = 4 x 64 MiB from the 8 workers at once: 229.431 ms,
  // plus 4 x 50 us, plus the first slice's share once more (1/2048 of it).
  EXPECT_NEAR(p.rs.reducer_link_s, 4 * 0.0573576865, 1e-9);
  EXPECT_NEAR(p.rs.seconds, 4 * 0.0573576865 * (1 + 1.0 / 2048) + 200e-6, 1e-9);
  EXPECT_EQ(p.rs.bound, "reducer link");
  EXPECT_LT(p.speedup, 0.45);  // the ring (101.1 ms) wins
  // A reducer twice as fast halves it.
  PredictInput faster = linksOnly(8, 2);
  faster.reducer_gbps = 20;
  EXPECT_NEAR(predict(faster).rs.reducer_link_s, 2 * 0.0573576865, 1e-9);
}

TEST(PlanPredict, CpuCostBoundsWhenTheLinksAreFast) {
  PredictInput in = linksOnly(2, 1);
  in.host_gbps = 10000;
  in.reducer_gbps = 10000;
  in.latency_s = 0;
  in.bucket_bytes = 1ull << 30;  // 1 GiB
  in.worker_cpu_s_per_gib = 1.5;
  in.worker_cores = 3;  // 0.5 s
  in.reducer_cpu_s_per_gib = 0.8;
  in.reducer_cores = 2;  // n S / m = 2 GiB: 0.8 s
  in.ring_cpu_s_per_gib = 0.6;
  in.reducer_cpu_s_per_rank_call = 0;
  Prediction p = predict(in);
  EXPECT_NEAR(p.rs.worker_cpu_s, 0.5, 1e-12);
  EXPECT_NEAR(p.rs.reducer_cpu_s, 0.8, 1e-12);
  EXPECT_NEAR(p.rs.seconds, 0.8 * (1 + 1.0 / 32768), 1e-12);  // and the first 32 KiB slice's
  EXPECT_EQ(p.rs.bound, "reducer CPU");
  // The ring sends 2(n-1)/n = 1 GiB at 0.6 CPU-s/GiB on 3 cores.
  EXPECT_NEAR(p.ring.worker_cpu_s, 0.2, 1e-12);
  EXPECT_EQ(p.ring.bound, "worker CPU");
  EXPECT_NEAR(p.speedup, 0.25, 1e-3);
}

TEST(PlanPredict, EmulatedTwoHundredMegabitLinks) {
  // What docs/plan.md compares with `tally bench --emulate 200mbit`: 25e6 B/s of frames.
  PredictInput in;
  in.hosts = 4;
  in.reducers = 4;
  in.host_gbps = 0.2;
  in.reducer_gbps = 0.2;
  in.latency_s = 0;
  Prediction p = predict(in);
  // The link's 2.86788433 s, the first slice's 1/2048 of it once more, and the reducer's 4 ranks x
  // 90 us on 16 cores for the one call.
  EXPECT_NEAR(p.rs.seconds, 2.86788433 * (1 + 1.0 / 2048) + 4 * 90e-6 / 16, 1e-6);
  EXPECT_NEAR(p.ring.seconds, 4.30182649, 1e-6);
  EXPECT_EQ(p.rs.bound, "host link");
}

TEST(PlanPredict, RefusesInputItCannotModel) {
  Prediction p;
  PredictInput one = linksOnly(1, 1);
  Status s = predictAllReduce(one, &p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(s.message().find("two or more hosts"), std::string::npos) << s.message();
  PredictInput no_rate = linksOnly(4, 4);
  no_rate.reducer_gbps = 0;
  EXPECT_FALSE(predictAllReduce(no_rate, &p).isOk());
  no_rate.reducers = 0;  // the ring alone needs no reducer rate
  EXPECT_TRUE(predictAllReduce(no_rate, &p).isOk());
  PredictInput empty = linksOnly(4, 4);
  empty.bucket_bytes = 0;
  EXPECT_FALSE(predictAllReduce(empty, &p).isOk());
  PredictInput cpu = linksOnly(4, 4);
  cpu.reducer_cpu_s_per_gib = -1;
  EXPECT_FALSE(predictAllReduce(cpu, &p).isOk());
  PredictInput cores = linksOnly(4, 4);
  cores.worker_cores = 0;
  EXPECT_FALSE(predictAllReduce(cores, &p).isOk());
  PredictInput mtu = linksOnly(4, 4);
  mtu.mtu = 100;
  EXPECT_FALSE(predictAllReduce(mtu, &p).isOk());
}

TEST(PlanPredict, ParsesBucketSizes) {
  uint64_t bytes = 0;
  ASSERT_TRUE(parseBucketBytes("64M", &bytes).isOk());
  EXPECT_EQ(bytes, 67108864u);
  ASSERT_TRUE(parseBucketBytes("512K", &bytes).isOk());
  EXPECT_EQ(bytes, 524288u);
  ASSERT_TRUE(parseBucketBytes("1G", &bytes).isOk());
  EXPECT_EQ(bytes, 1073741824u);
  ASSERT_TRUE(parseBucketBytes("4096", &bytes).isOk());
  EXPECT_EQ(bytes, 4096u);
  for (const char* bad : {"0", "", "64X", "-1", "1.5M", "M", "64M extra"}) {
    bytes = 7;
    Status s = parseBucketBytes(bad, &bytes);
    EXPECT_EQ(s.code(), StatusCode::kInvalidUsage) << bad;
    EXPECT_NE(s.message().find("--bucket"), std::string::npos) << s.message();
    EXPECT_EQ(bytes, 7u) << bad;
  }
}

TEST(PlanPredict, ParsesRatesAndLatencies) {
  double value = 0;
  ASSERT_TRUE(parseLinkRate("200mbit", &value).isOk());
  EXPECT_DOUBLE_EQ(value, 0.2);
  ASSERT_TRUE(parseLinkRate("100Gbit", &value).isOk());
  EXPECT_DOUBLE_EQ(value, 100);
  ASSERT_TRUE(parseLinkRate("500kbit", &value).isOk());
  EXPECT_DOUBLE_EQ(value, 0.0005);
  for (const char* bad : {"200", "1gbps", "-5mbit", "0mbit", "fast", ""}) {
    EXPECT_FALSE(parseLinkRate(bad, &value).isOk()) << bad;
  }
  ASSERT_TRUE(parseLatency("50us", &value).isOk());
  EXPECT_DOUBLE_EQ(value, 50e-6);
  ASSERT_TRUE(parseLatency("0.5ms", &value).isOk());
  EXPECT_DOUBLE_EQ(value, 0.5e-3);
  ASSERT_TRUE(parseLatency("0", &value).isOk());
  EXPECT_EQ(value, 0);
  ASSERT_TRUE(parseLatency("2m", &value).isOk());
  EXPECT_DOUBLE_EQ(value, 120);
  for (const char* bad : {"5", "-1us", "soon", "1 parsec"}) {
    EXPECT_FALSE(parseLatency(bad, &value).isOk()) << bad;
  }
  EXPECT_NE(std::string(parseLatency("50", &value).message()).find("'50' has no unit"),
            std::string::npos);
}

using TallyRun = test::CommandRun;

// `tally plan ARGS`, stdout and stderr together.
TallyRun runPlan(const std::string& args) {
  return test::runCommand(std::string("'") + TALLY_BIN + "' plan " + args);
}

TEST(PlanPredictCommand, PredictOnlyPrintsBothAlgorithms) {
  TallyRun run =
      runPlan("--predict-only --hosts 4 --reducers 4 --link 200mbit --latency 0 --bucket 64M");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("Predicted all-reduce of one 64 MiB bucket"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("4 hosts at 0.2 Gbps, 4 reducers at 0.2 Gbps"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("ring                  4.30 s       0.0156       0.0234  host link"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("reduction server      2.87 s       0.0234       0.0351  host link"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("rs/ring: 1.50"), std::string::npos) << run.out;

  TallyRun json = runPlan(
      "--predict-only --hosts 8 --reducers 2 --link 200mbit --latency 0 --bucket 64M --json");
  ASSERT_EQ(json.status, 0) << json.out;
  nlohmann::json doc = nlohmann::json::parse(json.out);
  // The reducer link's 4 x 2.86788433 s (and 1/2048 of it for the first slice), and 8 ranks x
  // 90 us on 16 reducer cores for the call.
  EXPECT_NEAR(doc["rs"]["seconds"].get<double>(),
              4 * 2.86788433 * (1 + 1.0 / 2048) + 8 * 90e-6 / 16, 1e-6);
  EXPECT_EQ(doc["rs"]["bound"], "reducer link");
  EXPECT_NEAR(doc["ring"]["seconds"].get<double>(), 1.75 * 2.86788433, 1e-6);
}

TEST(PlanPredictCommand, EveryPlanEndsWithThePrediction) {
  TallyRun run = runPlan(std::string("--spec '") + TALLY_SOURCE_DIR +
                         "/examples/customjob-reduction-server.json' --bucket 128M --json");
  ASSERT_EQ(run.status, 0) << run.out;
  nlohmann::json doc = nlohmann::json::parse(run.out);
  const nlohmann::json& p = doc["prediction"];
  EXPECT_EQ(p["bucketBytes"], 134217728);
  EXPECT_EQ(p["hosts"], 5);
  EXPECT_EQ(p["reducers"], 16);
  EXPECT_EQ(p["hostGbps"], 100);
  EXPECT_EQ(p["reducerGbps"], 32);
  EXPECT_EQ(p["reducerCores"], 16);  // n1-highcpu-16
  // The default worker CPU cost on 2 cores: 0.98 x 1/8 GiB / 2 = 61.25 ms, above the link's
  // 128 MiB / 11.70 GB/s = 11.5 ms.
  EXPECT_NEAR(p["rs"]["workerCpuSeconds"].get<double>(), 0.06125, 1e-9);
  EXPECT_EQ(p["rs"]["bound"], "worker CPU");

  TallyRun text = runPlan(std::string("--spec '") + TALLY_SOURCE_DIR +
                          "/examples/customjob-reduction-server.json' --worker-cores 64");
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("Predicted all-reduce of one 64 MiB bucket"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("5 hosts at 100 Gbps, 16 reducers at 32 Gbps"), std::string::npos)
      << text.out;
  // 1.61: the reduction server pays 4 L and 5 ranks x 90 us / 16 cores per call.
  EXPECT_NE(text.out.find("rs/ring: 1.61"), std::string::npos) << text.out;
}

TEST(PlanPredictCommand, BadPredictionFlagsExitTwo) {
  TallyRun bucket = runPlan("--predict-only --hosts 4 --link 1gbit --bucket 64X");
  EXPECT_EQ(bucket.status, 2);
  EXPECT_NE(bucket.out.find("--bucket: expected a size above 0"), std::string::npos) << bucket.out;
  TallyRun zero = runPlan("--predict-only --hosts 4 --link 1gbit --bucket 0");
  EXPECT_EQ(zero.status, 2) << zero.out;
  TallyRun link = runPlan("--predict-only --hosts 4 --link 1gbps");
  EXPECT_EQ(link.status, 2);
  EXPECT_NE(link.out.find("--link: expected a rate as tc writes it"), std::string::npos)
      << link.out;
  TallyRun missing = runPlan("--predict-only --hosts 4");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.out.find("needs --hosts N and --link RATE"), std::string::npos) << missing.out;
  TallyRun spec = runPlan("--predict-only --hosts 4 --link 1gbit --spec job.json");
  EXPECT_EQ(spec.status, 2);
  EXPECT_NE(spec.out.find("--spec does not apply to --predict-only"), std::string::npos)
      << spec.out;
  TallyRun hosts = runPlan("--primary-machine n1-highcpu-16 --hosts 4");
  EXPECT_EQ(hosts.status, 2);
  EXPECT_NE(hosts.out.find("--hosts is for --predict-only"), std::string::npos) << hosts.out;
  TallyRun cpu = runPlan("--predict-only --hosts 4 --link 1gbit --reducer-cpu-s-per-gib -1");
  EXPECT_EQ(cpu.status, 2) << cpu.out;
}

}  // namespace
}  // namespace tally::plan
