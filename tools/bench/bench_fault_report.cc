// SPDX-License-Identifier: Apache-2.0
// A fault run's report: the bandwidth timeline from the calls' completion times, the summary
// (algbw between the faults, the longest stall after each), and its JSON and chart.
// docs/bench.md ("Faults") describes every number.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/sizes.h"
#include "tools/bench/bench_internal.h"
#include "tools/bench/bench_json.h"

namespace tally::bench {
namespace {

using nlohmann::ordered_json;

constexpr int64_t kShortestBucketMs = 500;
constexpr int kBucketsPerRun = 60;

double gbs(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e6) : 0; }

std::string seconds(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f s", ms / 1000);
  return buf;
}

std::string spanName(const BenchOptions& o, const FaultSpan& s) {
  if (s.from < 0) return "before " + faultName(o.faults[static_cast<size_t>(s.to)]);
  const std::string from = faultName(o.faults[static_cast<size_t>(s.from)]);
  if (s.to < 0) return "after " + from;
  return "between " + from + " and " + faultName(o.faults[static_cast<size_t>(s.to)]);
}

// The median (the upper one of an even count); -1 for none. Reorders *v.
double median(std::vector<double>* v) {
  if (v->empty()) return -1;
  std::nth_element(v->begin(), v->begin() + static_cast<long>(v->size() / 2), v->end());
  return (*v)[v->size() / 2];
}

ordered_json orNull(double v) { return v >= 0 ? ordered_json(v) : ordered_json(nullptr); }

// The stall after fault i: the longest stretch without a completion between the fault and the
// next one (or the end of the duration): the gaps between consecutive completions (the start
// counts as one, and the last is open-ended when the run stopped early), cut to that window, so a
// gap that spans the next fault is shared between the two.
FaultStall stallAfter(const BenchOptions& o, const FaultRunData& d, size_t i) {
  const double at = faultMs(o, d, i);
  // The last calls, past the duration, are no one's stall.
  const double next =
      i + 1 < o.faults.size() ? faultMs(o, d, i + 1) : static_cast<double>(o.duration_ms);
  FaultStall stall;
  stall.fault = i;
  stall.from_ms = stall.to_ms = at;
  auto consider = [&](double gap_from, double gap_to) {
    const double lo = std::max(gap_from, at), hi = std::min(gap_to, next);
    if (hi - lo > stall.to_ms - stall.from_ms) stall.from_ms = lo, stall.to_ms = hi;
  };
  double prev = 0;
  for (double done : d.completions_ms) {
    if (done > at && stall.first_ms < 0) stall.first_ms = done;
    consider(prev, done);
    prev = done;
  }
  consider(prev, next);
  stall.resumed = stall.first_ms >= 0;
  return stall;
}

}  // namespace

int64_t faultBucketMs(int64_t duration_ms) {
  const int64_t share = (duration_ms / kBucketsPerRun + 99) / 100 * 100;
  return std::max(kShortestBucketMs, share);
}

double faultMs(const BenchOptions& o, const FaultRunData& d, size_t i) {
  if (i < d.injected.size() && d.injected[i].at_ms >= 0) return d.injected[i].at_ms;
  return static_cast<double>(o.faults[i].at_ms);
}

FaultTimeline computeTimeline(const BenchOptions& o, const FaultRunData& d) {
  FaultTimeline t;
  t.bucket_ms = faultBucketMs(o.duration_ms);
  const double width = static_cast<double>(t.bucket_ms);
  const double bytes = static_cast<double>(o.sizes.front());
  // Buckets cover the duration, and the last calls past it.
  double end = static_cast<double>(o.duration_ms);
  if (!d.completions_ms.empty()) end = std::max(end, d.completions_ms.back());
  const size_t n = static_cast<size_t>(std::ceil(end / width));
  t.buckets.resize(std::max<size_t>(n, 1));
  for (size_t b = 0; b < t.buckets.size(); ++b)
    t.buckets[b].start_ms = static_cast<double>(b) * width;
  auto bucketOf = [&](double ms) {
    return std::min(static_cast<size_t>(std::max(ms, 0.0) / width), t.buckets.size() - 1);
  };
  for (double done : d.completions_ms) ++t.buckets[bucketOf(done)].calls;
  for (FaultBucket& b : t.buckets) b.algbw_gbs = gbs(b.calls * bytes, width);
  for (size_t i = 0; i < o.faults.size(); ++i)
    t.buckets[bucketOf(faultMs(o, d, i))].faults.push_back(i);

  // Spans from the start through every fault to the end of the duration.
  const int nfaults = static_cast<int>(o.faults.size());
  for (int i = -1; i < nfaults; ++i) {
    FaultSpan s;
    s.from = i;
    s.to = i + 1 < nfaults ? i + 1 : -1;
    s.from_ms = i < 0 ? 0 : faultMs(o, d, static_cast<size_t>(i));
    s.to_ms =
        s.to < 0 ? static_cast<double>(o.duration_ms) : faultMs(o, d, static_cast<size_t>(s.to));
    double sum = 0;
    for (const FaultBucket& b : t.buckets) {
      if (b.start_ms >= s.from_ms && b.start_ms + width <= s.to_ms) sum += b.algbw_gbs, ++s.buckets;
    }
    if (s.buckets > 0) s.algbw_gbs = sum / s.buckets;
    std::vector<double> gaps;
    for (size_t c = 1; c < d.completions_ms.size(); ++c) {
      if (d.completions_ms[c - 1] >= s.from_ms && d.completions_ms[c] <= s.to_ms)
        gaps.push_back(d.completions_ms[c] - d.completions_ms[c - 1]);
    }
    const double gap = median(&gaps);
    if (gap > 0) s.call_algbw_gbs = gbs(bytes, gap);
    t.spans.push_back(s);
  }
  for (size_t i = 0; i < o.faults.size(); ++i) t.stalls.push_back(stallAfter(o, d, i));

  std::vector<double> gaps;
  for (size_t i = 1; i < d.completions_ms.size(); ++i)
    gaps.push_back(d.completions_ms[i] - d.completions_ms[i - 1]);
  t.median_gap_ms = median(&gaps);
  return t;
}

int printFaultReport(const BenchOptions& o, const FaultRunData& d, const FaultTimeline& t) {
  std::printf("#%9s %8s %6s  %s\n#%9s %8s\n", "time", "algbw", "calls", "event", "(s)", "(GB/s)");
  for (const FaultBucket& b : t.buckets) {
    std::string events;
    for (size_t i : b.faults) {
      events += (events.empty() ? "" : ", ") + faultName(o.faults[i]) + " (" +
                seconds(faultMs(o, d, i)) + ")";
    }
    if (!events.empty()) events = "  " + events;
    std::printf(" %9.3f %8.3f %6d%s\n", b.start_ms / 1000, b.algbw_gbs, b.calls, events.c_str());
  }
  std::printf("#\n");
  for (const FaultSpan& s : t.spans) {
    char bw[32] = "-", per_call[32] = "-";
    if (s.algbw_gbs >= 0) std::snprintf(bw, sizeof(bw), "%.3f GB/s", s.algbw_gbs);
    if (s.call_algbw_gbs >= 0) std::snprintf(per_call, sizeof(per_call), "%.3f", s.call_algbw_gbs);
    std::printf("# algbw %s (%.1f to %.1f s, %d buckets): %s (per call: %s)\n",
                spanName(o, s).c_str(), s.from_ms / 1000, s.to_ms / 1000, s.buckets, bw, per_call);
  }
  for (const FaultStall& s : t.stalls) {
    const std::string name = faultName(o.faults[s.fault]);
    if (s.resumed) {
      std::printf(
          "# %s: calls resumed after %.0f ms; the longest stall until the next fault: %.0f ms, "
          "%s to %s\n",
          name.c_str(), s.first_ms - faultMs(o, d, s.fault), s.to_ms - s.from_ms,
          seconds(s.from_ms).c_str(), seconds(s.to_ms).c_str());
    } else {
      std::printf("# %s: calls did not resume (none completed after it)\n", name.c_str());
    }
  }
  std::string gap =
      t.median_gap_ms >= 0
          ? ", a median of " + std::to_string(std::lround(t.median_gap_ms)) + " ms apart"
          : "";
  std::string wrong = d.wrong < 0 ? "N/A" : std::to_string(d.wrong);
  std::printf("# %zu calls of %s%s; #wrong %s\n", d.completions_ms.size(),
              formatBytes(o.sizes.front()).c_str(), gap.c_str(), wrong.c_str());
  const int code = (d.failed || d.wrong > 0) ? 1 : 0;
  if (d.wrong > 0) {
    std::printf("# FAILED: %lld wrong elements\n", static_cast<long long>(d.wrong));
  } else if (d.failed) {
    std::printf("# FAILED: see the errors above\n");
  } else if (!o.check) {
    std::printf("# results not checked (-c 0)\n");
  } else {
    std::printf("# all results correct\n");
  }
  std::fflush(stdout);
  return code;
}

Status writeFaultJson(const BenchOptions& o, const RunInfo& info, const FaultRunData& d,
                      const FaultTimeline& t, int exit_code) {
  ordered_json j;
  j["command"] = o.command_name;
  j["mode"] = "fault";
  j["options"] = optionsJson(o);
  j["machine"] = machineJson(info);
  j["run"] = runJson(info);
  const DataType type = o.types.front();
  j["algo"] = algoName(Algo::kServer);
  j["type"] = typeLabel(type);
  j["op"] = reduceOpName(o.ops.front());
  j["bytes"] = o.sizes.front();
  j["count"] = o.sizes.front() / dataTypeSize(type);
  j["duration_ms"] = o.duration_ms;
  ordered_json faults = ordered_json::array();
  for (size_t i = 0; i < o.faults.size(); ++i) {
    const Fault& f = o.faults[i];
    const InjectedFault& done = d.injected[i];
    const std::string rate = faultRate(o, f);
    faults.push_back(
        {{"name", faultName(f)},
         {"event", faultEventName(f.kind)},
         {"reducer", f.reducer},
         {"at_ms", f.at_ms},
         {"injected_ms", orNull(done.at_ms)},
         {"rate", rate.empty() ? ordered_json(nullptr) : ordered_json(rate)},
         {"error", done.error.empty() ? ordered_json(nullptr) : ordered_json(done.error)}});
  }
  j["faults"] = faults;
  j["bucket_ms"] = t.bucket_ms;
  ordered_json buckets = ordered_json::array();
  for (const FaultBucket& b : t.buckets) {
    ordered_json events = ordered_json::array();
    for (size_t i : b.faults) events.push_back(faultName(o.faults[i]));
    buckets.push_back({{"start_ms", b.start_ms},
                       {"calls", b.calls},
                       {"algbw_gbs", b.algbw_gbs},
                       {"events", events}});
  }
  j["buckets"] = buckets;
  ordered_json spans = ordered_json::array();
  for (const FaultSpan& s : t.spans) {
    auto name = [&](int i) {
      return i < 0 ? ordered_json(nullptr)
                   : ordered_json(faultName(o.faults[static_cast<size_t>(i)]));
    };
    spans.push_back({{"from", name(s.from)},
                     {"to", name(s.to)},
                     {"from_ms", s.from_ms},
                     {"to_ms", s.to_ms},
                     {"buckets", s.buckets},
                     {"algbw_gbs", orNull(s.algbw_gbs)},
                     {"call_algbw_gbs", orNull(s.call_algbw_gbs)}});
  }
  j["spans"] = spans;
  ordered_json stalls = ordered_json::array();
  for (const FaultStall& s : t.stalls) {
    const double resumed_after = s.first_ms < 0 ? -1 : s.first_ms - faultMs(o, d, s.fault);
    stalls.push_back({{"fault", faultName(o.faults[s.fault])},
                      {"resumed_after_ms", orNull(resumed_after)},
                      {"stall_ms", s.to_ms - s.from_ms},
                      {"from_ms", s.from_ms},
                      {"to_ms", s.to_ms},
                      {"resumed", s.resumed}});
  }
  j["stalls"] = stalls;
  j["calls"] = d.completions_ms.size();
  j["median_gap_ms"] = orNull(t.median_gap_ms);
  j["completions_ms"] = d.completions_ms;
  j["wrong"] = d.wrong >= 0 ? ordered_json(d.wrong) : ordered_json(nullptr);
  j["exit_code"] = exit_code;
  return writeJsonFile(o.json_path, j);
}

Status writeFaultPlot(const BenchOptions& o, const FaultRunData& d, const FaultTimeline& t) {
  std::ostringstream script;
  script << gnuplotTerminal(1000, 500) << "$d << EOD\n";
  // Steps from each bucket's start, and one point more so the last bucket has its width.
  for (const FaultBucket& b : t.buckets) script << b.start_ms / 1000 << " " << b.algbw_gbs << "\n";
  const double end_s = (t.buckets.back().start_ms + static_cast<double>(t.bucket_ms)) / 1000;
  script << end_s << " " << t.buckets.back().algbw_gbs << "\nEOD\n";
  // Each call's own rate, bytes over the time since the call before it completed: with large
  // calls a bucket holds one or two and its algbw jumps between 0 and 2 calls' worth, so these
  // points, drawn over the buckets, show the rate and where a stall sits.
  script << "$c << EOD\n";
  const double bytes = static_cast<double>(o.sizes.front());
  double prev = 0;
  for (double done : d.completions_ms) {
    if (done > prev) script << done / 1000 << " " << gbs(bytes, done - prev) << "\n";
    prev = done;
  }
  script << "EOD\n";
  // The chart ends with the duration: a bucket past it holds only the last calls, and would look
  // like a collapse.
  const double duration_s = static_cast<double>(o.duration_ms) / 1000;
  for (size_t i = 0; i < o.faults.size(); ++i) {
    const double x = faultMs(o, d, i) / 1000;
    script << "set arrow " << i + 1 << " from " << x << ", graph 0 to " << x
           << ", graph 1 nohead dashtype 2 linecolor rgb '#c00000'\n"
           << "set label " << i + 1 << " '" << faultName(o.faults[i]) << "' at " << x
           << ", graph 0.97 rotate by 90 right offset -0.8,0 textcolor rgb '#c00000'\n";
  }
  const std::string where = o.emulate.empty() ? std::string("loopback") : o.emulate + " links";
  script
      << "set output '" << o.plot_path << "'\n"
      << "set title '" << o.command_name << ": rs " << typeLabel(o.types.front()) << " "
      << reduceOpName(o.ops.front()) << " " << formatBytes(o.sizes.front()) << ", " << o.workers
      << " workers, " << o.reducers << " reducers, " << where << "'\n"
      << "set xlabel 'time (s)'\nset ylabel 'algbw (GB/s)'\nset xrange [0:" << duration_s
      << "]\nset yrange [0:*]\nset grid\nset key below\n"
      << "plot $d using 1:2 with steps linewidth 1 linecolor rgb '#a0a0a0' title 'algbw, "
      << t.bucket_ms << " ms buckets', "
      << "$c using 1:2 with linespoints linewidth 2 pointtype 7 pointsize 0.6 "
      << "linecolor rgb '#2060b0' title 'each call: bytes / time since the previous completion'\n";
  return runGnuplotScript(script.str());
}

}  // namespace tally::bench
