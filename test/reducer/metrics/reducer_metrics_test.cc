// SPDX-License-Identifier: Apache-2.0
// The Prometheus side without a server: LatencyHistogram's buckets and ReducerMetrics' exposition.
#include "reducer/metrics/reducer_metrics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "test/support/scrape.h"
#include "reducer/metrics/latency_histogram.h"

namespace tally::metrics::test {
namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST(LatencyHistogramTest, BucketsAreCumulativeWithBoundsInclusive) {
  LatencyHistogram h("x_seconds", "help", {50e-6, 100e-6, 1.0});
  h.observe(microseconds(30));
  h.observe(microseconds(50));  // exactly on a bound: counts in it (le means <=)
  h.observe(microseconds(60));
  h.observe(seconds(2));       // past the last bound: +Inf only
  h.observe(nanoseconds(-5));  // clamped to 0
  const auto families = h.Collect();
  ASSERT_EQ(families.size(), 1u);
  EXPECT_EQ(families[0].name, "x_seconds");
  EXPECT_EQ(families[0].type, prometheus::MetricType::Histogram);
  const auto& hist = families[0].metric.at(0).histogram;
  ASSERT_EQ(hist.bucket.size(), 4u);
  EXPECT_EQ(hist.bucket[0].cumulative_count, 3u);
  EXPECT_EQ(hist.bucket[1].cumulative_count, 4u);
  EXPECT_EQ(hist.bucket[2].cumulative_count, 4u);
  EXPECT_EQ(hist.bucket[3].cumulative_count, 5u);
  EXPECT_TRUE(std::isinf(hist.bucket[3].upper_bound));
  EXPECT_EQ(hist.sample_count, 5u);
  EXPECT_NEAR(hist.sample_sum, 2.00014, 1e-9);
}

TEST(ReducerMetricsTest, RendersEveryMetricWithItsValue) {
  ReducerMetrics m;
  reducer::ServerObserver& obs = m;
  for (int i = 0; i < 3; ++i) obs.connectionOpened();
  obs.connectionClosed();
  obs.communicatorOpened();
  obs.memoryReserved(3 << 20);
  obs.memoryReserved(1 << 20);
  obs.memoryReleased(1 << 20);
  obs.sliceReduced(4 * 65536, microseconds(80));
  obs.sliceReduced(4 * 1000, std::chrono::milliseconds(3));
  obs.error(reducer::ServerError::kRejectedHello);
  obs.error(reducer::ServerError::kPeerLost);
  obs.error(reducer::ServerError::kPeerLost);
  obs.communicatorFailed();
  const std::string text = m.render();

  EXPECT_EQ(seriesValue(text, "tally_reducer_bytes_reduced_total"), 4.0 * 65536 + 4000) << text;
  EXPECT_EQ(seriesValue(text, "tally_reducer_slices_total"), 2.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_connections"), 2.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_communicators"), 1.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_reserved_bytes"), double{3 << 20});
  EXPECT_EQ(seriesValue(text, "tally_reducer_communicator_failures_total"), 1.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_errors_total{cause=\"rejected_hello\"}"), 1.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_errors_total{cause=\"peer_lost\"}"), 2.0);
  // Causes that never happened are there too, at 0.
  for (const char* cause : {"accept", "protocol", "mismatch", "internal"}) {
    EXPECT_EQ(seriesValue(text, std::string("tally_reducer_errors_total{cause=\"") + cause + "\"}"),
              0.0)
        << cause;
  }
  EXPECT_EQ(seriesValue(text, "tally_reducer_slice_latency_seconds_count"), 2.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_slice_latency_seconds_bucket{le=\"5e-05\"}"), 0.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_slice_latency_seconds_bucket{le=\"0.0001\"}"), 1.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_slice_latency_seconds_bucket{le=\"0.0025\"}"), 1.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_slice_latency_seconds_bucket{le=\"0.005\"}"), 2.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_slice_latency_seconds_bucket{le=\"+Inf\"}"), 2.0);
  EXPECT_NE(text.find("# TYPE tally_reducer_slice_latency_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("# TYPE tally_reducer_bytes_reduced_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE tally_reducer_connections gauge"), std::string::npos);
}

TEST(ReducerMetricsTest, RendersFailoverEpochsByChangeAndRejoins) {
  ReducerMetrics m;
  reducer::ServerObserver& obs = m;
  std::string text = m.render();
  // Every change from the start, at 0.
  for (const char* change : {"lost", "join", "void", "fail"}) {
    EXPECT_EQ(seriesValue(text, std::string("tally_reducer_failover_epochs_total{change=\"") +
                                    change + "\"}"),
              0.0)
        << change << "\n"
        << text;
  }
  EXPECT_EQ(seriesValue(text, "tally_reducer_rejoins_total"), 0.0) << text;
  EXPECT_EQ(seriesValue(text, "tally_reducer_zerocopy_sends_total"), 0.0) << text;
  obs.epochDecided(reducer::EpochChange::kLost);
  obs.epochDecided(reducer::EpochChange::kLost);
  obs.epochDecided(reducer::EpochChange::kJoin);
  obs.epochDecided(reducer::EpochChange::kFail);
  obs.communicatorRejoined();
  obs.zerocopySent(5, 2, 1);
  obs.zerocopySent(3, 0, 0);
  text = m.render();
  EXPECT_EQ(seriesValue(text, "tally_reducer_failover_epochs_total{change=\"lost\"}"), 2.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_failover_epochs_total{change=\"join\"}"), 1.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_failover_epochs_total{change=\"void\"}"), 0.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_failover_epochs_total{change=\"fail\"}"), 1.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_rejoins_total"), 1.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_zerocopy_sends_total"), 8.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_zerocopy_copied_total"), 2.0);
  EXPECT_EQ(seriesValue(text, "tally_reducer_zerocopy_refused_total"), 1.0);
  EXPECT_NE(text.find("# TYPE tally_reducer_failover_epochs_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE tally_reducer_rejoins_total counter"), std::string::npos);
}

TEST(ReducerMetricsTest, LatencyBoundsSpan50usTo1s) {
  const auto& b = sliceLatencyBounds();
  ASSERT_FALSE(b.empty());
  EXPECT_DOUBLE_EQ(b.front(), 50e-6);
  EXPECT_DOUBLE_EQ(b.back(), 1.0);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_LT(b[i - 1], b[i]);
}

}  // namespace
}  // namespace tally::metrics::test
