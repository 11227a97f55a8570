// SPDX-License-Identifier: Apache-2.0
// The summary tally-kernels-bench prints after its benchmarks: for each (buffer size, type,
// inputs) the bandwidth of one reduce() call and its fraction of the memcpy bandwidth measured
// at the same buffer size in the same run, with the kernels' targets marked met or not met.
//
// Header-only (over common/) so that test/tools/bench can check the arithmetic without running a
// benchmark.
//
// Bytes are counted the same way for every row. A k-input sum is ONE reduce() call with
// nsrcs = k (kernels/kernels.h): it reads k inputs of n elements and writes dst once, so
// "moved" = (k + 1) x n x element size and "useful" (input bytes reduced) = k x n x element
// size. Its copy baseline moves the same bytes over the same footprint: one memcpy of
// (k + 1) / 2 buffers, so moved = (k + 1) x buffer bytes as well, useful = the bytes copied.
// Neither counts the cache line a plain store reads before writing it (write-allocate), which
// the hardware adds on top of both.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "common/sizes.h"

namespace tally::bench {

// One benchmark as registered. type_name is empty for a copy baseline, whose `inputs` names
// the sum it stands beside.
struct BenchCase {
  std::string name;       // the Google Benchmark name, e.g. "sum/float32/8in/32MiB"
  std::string kernel;     // "reduce", "reduceMany" or "memcpy"
  std::string type_name;  // "float32", "bfloat16", ...; "" for copy
  int elem_bytes = 0;     // bytes per element; 0 for copy
  int inputs = 0;         // k
  size_t buffer_bytes = 0;

  bool isCopy() const { return type_name.empty(); }
  // memcpy length of a copy baseline: (k + 1) / 2 buffers.
  size_t copyBytes() const { return static_cast<size_t>(inputs + 1) * buffer_bytes / 2; }
  // Bytes one iteration moves and the input bytes it reduces, as described above.
  double movedBytes() const {
    return isCopy() ? 2.0 * static_cast<double>(copyBytes())
                    : static_cast<double>(inputs + 1) * static_cast<double>(buffer_bytes);
  }
  double usefulBytes() const {
    return isCopy() ? static_cast<double>(copyBytes())
                    : static_cast<double>(inputs) * static_cast<double>(buffer_bytes);
  }
};

// The kernels' targets, as a fraction of copy bandwidth: float32 sum of 8 inputs >= 0.80,
// the 16-bit types (bfloat16, float16) sum of 8 >= 0.50. Other rows have no target.
inline std::optional<double> targetFraction(const std::string& type_name, int inputs) {
  if (inputs != 8) return std::nullopt;
  if (type_name == "float32") return 0.80;
  if (type_name == "bfloat16" || type_name == "float16") return 0.50;
  return std::nullopt;
}

// A finished measurement: moved bytes per second of the case with this name.
struct Measurement {
  std::string name;
  double moved_per_second = 0;
};

struct SummaryRow {
  BenchCase bench;
  double moved_gbs = 0;   // 1e9 bytes per second
  double useful_gbs = 0;
  std::optional<double> copy_fraction;  // absent when no copy ran at this size
  std::optional<double> target;
  bool targetMet() const { return target && copy_fraction && *copy_fraction >= *target; }
};

// Rows in the order the cases were registered, one per case that was measured. With several
// measurements of one case (--benchmark_repetitions) the median is used.
inline std::vector<SummaryRow> summarize(const std::vector<BenchCase>& cases,
                                         const std::vector<Measurement>& measured) {
  auto median = [&](const std::string& name) -> std::optional<double> {
    std::vector<double> v;
    for (const Measurement& m : measured) {
      if (m.name == name && m.moved_per_second > 0) v.push_back(m.moved_per_second);
    }
    if (v.empty()) return std::nullopt;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  std::vector<SummaryRow> rows;
  for (const BenchCase& c : cases) {
    const std::optional<double> rate = median(c.name);
    if (!rate) continue;
    SummaryRow row;
    row.bench = c;
    row.moved_gbs = *rate / 1e9;
    row.useful_gbs = row.moved_gbs * c.usefulBytes() / c.movedBytes();
    for (const BenchCase& copy : cases) {
      if (!copy.isCopy() || copy.buffer_bytes != c.buffer_bytes || copy.inputs != c.inputs) {
        continue;
      }
      if (const std::optional<double> copy_rate = median(copy.name)) {
        row.copy_fraction = *rate / *copy_rate;
      }
    }
    if (!c.isCopy()) row.target = targetFraction(c.type_name, c.inputs);
    rows.push_back(row);
  }
  return rows;
}

// A buffer size in benchmark names: "256KiB", "32MiB", or plain bytes ("1000B").
inline std::string sizeLabel(size_t bytes) { return formatBytes(bytes, ""); }

// The table, one line per row, with a header and a legend. `isa` names the kernel variant.
inline std::string formatSummary(const std::vector<SummaryRow>& rows, const std::string& isa) {
  std::string out;
  char line[160];
  std::snprintf(line, sizeof(line),
                "\nSummary: sums on %s against memcpy of the same bytes, same run\n",
                isa.c_str());
  out += line;
  out +=
      "  moved = (k inputs read + 1 output written) x buffer, for the copy too (one memcpy of\n"
      "  (k + 1) / 2 buffers); useful = input bytes reduced (copy: bytes copied); GB/s = 1e9 B/s\n";
  std::snprintf(line, sizeof(line), "  %-8s %-10s %-9s %3s %11s %12s %8s  %s\n", "buffer",
                "kernel", "type", "k", "moved GB/s", "useful GB/s", "of copy", "target");
  out += line;
  for (const SummaryRow& r : rows) {
    const BenchCase& c = r.bench;
    std::string fraction = "n/a";
    if (r.copy_fraction) {
      char f[32];
      std::snprintf(f, sizeof(f), "%.2f", *r.copy_fraction);
      fraction = f;
    }
    std::string target = "-";
    if (r.target) {
      char t[64];
      std::snprintf(t, sizeof(t), ">= %.2f %s", *r.target,
                    !r.copy_fraction ? "unknown (no copy)" : r.targetMet() ? "met" : "NOT MET");
      target = t;
    }
    std::snprintf(line, sizeof(line), "  %-8s %-10s %-9s %3s %11.2f %12.2f %8s  %s\n",
                  sizeLabel(c.buffer_bytes).c_str(), c.kernel.c_str(),
                  c.isCopy() ? "-" : c.type_name.c_str(),
                  std::to_string(c.inputs).c_str(), r.moved_gbs, r.useful_gbs,
                  fraction.c_str(), target.c_str());
    out += line;
  }
  if (rows.empty()) out += "  (no benchmark ran)\n";
  return out;
}

}  // namespace tally::bench
