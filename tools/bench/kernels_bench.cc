// SPDX-License-Identifier: Apache-2.0
// tally-kernels-bench: Google Benchmark for the reduction kernels (kernels/kernels.h).
//
// Sum of 2, 4 and 8 inputs for float32, bfloat16, float16 and both float8 formats, through
// reduce() ("sum/...") and, for the types it fuses, reduceMany() ("many/..."), at a buffer
// size that lives out of cache (32 MiB per input and for the output) and at the reducer's slice
// size (256 KiB, in cache), beside a plain memcpy moving the same bytes. Each sum is
// ONE kernel call with nsrcs = k, which reads the k inputs once and writes dst once; bytes are
// counted as kernels_bench_summary.h explains. After the benchmarks a summary gives each sum's
// bandwidth as a fraction of the copy bandwidth measured in the same run, which is the figure
// that matters on a shared machine, with the kernels' targets marked.
//
// Options beyond Google Benchmark's own (--benchmark_filter, --benchmark_min_time, ...):
//   --isa=auto|generic|avx2|avx512   kernel variant (default auto: what reduce() picks)
// Defaults (each can be overridden on the command line): three repetitions of 0.1 s per
// benchmark, randomly interleaved across the run, and the median of the three reported, so a
// burst of load from elsewhere on a shared machine lands on one repetition of a few rows rather
// than on everything after it; the whole run stays well under a minute on two cores. A
// --benchmark_filter that selects a sum also selects its copy baseline.
#include <benchmark/benchmark.h>
#include <regex.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "common/types.h"
#include "kernels/float_formats.h"
#include "kernels/kernels.h"
#include "kernels/kernels_many.h"
#include "tools/bench/kernels_bench_summary.h"

namespace tally::bench {
namespace {

constexpr int kMaxInputs = 8;
constexpr int kInputCounts[] = {2, 4, 8};
constexpr size_t kBufferSizes[] = {size_t{256} << 10, size_t{32} << 20};
// Each buffer starts this many bytes (times its index) past a page boundary, so that the nine
// streams of an 8-input sum do not all map to the same cache sets and 4 KiB alias offsets, as
// buffers handed over by a network stack would not.
constexpr size_t kStagger = 4160;
constexpr const char* kDefaultFlags[] = {
    "--benchmark_min_time=0.1", "--benchmark_repetitions=3",
    "--benchmark_enable_random_interleaving=true", "--benchmark_display_aggregates_only=true"};

struct TypeCase {
  const char* name;
  DataType type;
};
constexpr TypeCase kTypes[] = {{"float32", DataType::kFloat32},
                               {"bfloat16", DataType::kBfloat16},
                               {"float16", DataType::kFloat16},
                               {"f8e4m3", DataType::kFloat8e4m3},
                               {"f8e5m2", DataType::kFloat8e5m2}};

std::optional<KernelIsa> g_isa;  // unset: reduce() with its own choice

void reduceSum(bool many, DataType type, void* dst, const void* const* srcs, int k,
               size_t count) {
  constexpr ReduceOp kSum = ReduceOp::kSum;
  if (many) {
    g_isa ? reduceManyWithIsa(*g_isa, type, kSum, dst, srcs, k, count)
          : reduceMany(type, kSum, dst, srcs, k, count);
  } else {
    g_isa ? reduceWithIsa(*g_isa, type, kSum, dst, srcs, k, count)
          : reduce(type, kSum, dst, srcs, k, count);
  }
}

// kMaxInputs + 1 regions of `bytes` in one allocation, region i starting i x (bytes + kStagger)
// past a page boundary, all touched once so that no page fault is timed. The sums read regions
// 0..k-1 and write region kMaxInputs; the copy baseline has an arena of its own (the same
// footprint) and copies its first (k + 1) / 2 buffers' worth of bytes to just past them.
// Input bytes are drawn from 0x38..0x3f: read as any of the benchmarked types (float32,
// bfloat16, float16, e4m3, e5m2) every element is then a normal number between about 2^-15 and
// 2, so sums of eight stay finite and normal and no subnormal slow path is measured.
class Arena {
 public:
  explicit Arena(size_t bytes) : bytes_(bytes) {
    const size_t total = (kMaxInputs + 1) * (bytes + kStagger) + 4096;
    void* p = std::aligned_alloc(4096, total / 4096 * 4096);
    if (p == nullptr) throw std::bad_alloc();
    block_.reset(static_cast<unsigned char*>(p));
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (size_t j = 0; j < total / 4096 * 4096; j += 8) {
      state ^= state << 13;  // xorshift64
      state ^= state >> 7;
      state ^= state << 17;
      const uint64_t eight = 0x3838383838383838ull | (state & 0x0707070707070707ull);
      std::memcpy(block_.get() + j, &eight, 8);
    }
  }
  size_t bytes() const { return bytes_; }
  unsigned char* region(int i) const {
    return block_.get() + static_cast<size_t>(i) * (bytes_ + kStagger);
  }
  const unsigned char* input(int i) const { return region(i); }
  unsigned char* dst() const { return region(kMaxInputs); }

 private:
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  size_t bytes_;
  std::unique_ptr<unsigned char, Free> block_;
};

// One arena per (size, use), made on first use and kept for the run (about 300 MiB each at
// 32 MiB).
Arena& arenaFor(size_t bytes, bool for_copy) {
  static std::map<std::pair<size_t, bool>, std::unique_ptr<Arena>> pool;
  std::unique_ptr<Arena>& a = pool[{bytes, for_copy}];
  if (!a) a = std::make_unique<Arena>(bytes);
  return *a;
}

float widen(DataType type, const unsigned char* p) {
  uint16_t h;
  float f;
  switch (type) {
    case DataType::kFloat32: std::memcpy(&f, p, 4); return f;
    case DataType::kBfloat16: std::memcpy(&h, p, 2); return bfloat16ToFloat(h);
    case DataType::kFloat16: std::memcpy(&h, p, 2); return halfToFloat(h);
    case DataType::kFloat8e4m3: return fp8e4m3ToFloat(*p);
    case DataType::kFloat8e5m2: return fp8e5m2ToFloat(*p);
    default: return 0;
  }
}

void narrow(DataType type, float f, unsigned char* out) {
  uint16_t h;
  switch (type) {
    case DataType::kFloat32: std::memcpy(out, &f, 4); return;
    case DataType::kBfloat16: h = floatToBfloat16(f); std::memcpy(out, &h, 2); return;
    case DataType::kFloat16: h = floatToHalf(f); std::memcpy(out, &h, 2); return;
    case DataType::kFloat8e4m3: *out = floatToFp8e4m3(f); return;
    case DataType::kFloat8e5m2: *out = floatToFp8e5m2(f); return;
    default: return;
  }
}

// The timed loop must not have measured a kernel that computes the wrong thing: check 4096
// elements spread over dst against a left-to-right float32 sum rounded once (the documented
// semantics), bit for bit.
bool sumLooksRight(const BenchCase& c, DataType type, const Arena& b) {
  const size_t es = static_cast<size_t>(c.elem_bytes);
  const size_t count = c.buffer_bytes / es;
  const size_t step = count / 4096 > 0 ? count / 4096 : 1;
  for (size_t i = 0; i < count; i += step) {
    float acc = widen(type, b.input(0) + i * es);
    for (int k = 1; k < c.inputs; ++k) acc += widen(type, b.input(k) + i * es);
    unsigned char want[4];
    narrow(type, acc, want);
    if (std::memcmp(want, b.dst() + i * es, es) != 0) return false;
  }
  return true;
}

void setCounters(benchmark::State& state, const BenchCase& c) {
  const double iters = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(iters * c.movedBytes()));
  state.counters["useful"] = benchmark::Counter(iters * c.usefulBytes(),
                                                benchmark::Counter::kIsRate,
                                                benchmark::Counter::OneK::kIs1024);
}

// memcpy of the bytes a k-input sum moves: (k + 1) / 2 buffers read and as many written.
void copyBenchmark(benchmark::State& state, const BenchCase& c) {
  Arena& a = arenaFor(c.buffer_bytes, /*for_copy=*/true);
  const size_t len = c.copyBytes();
  const unsigned char* src = a.region(0);
  unsigned char* dst = a.region(0) + len + kStagger;
  for (auto _ : state) {
    std::memcpy(dst, src, len);
    benchmark::ClobberMemory();
  }
  setCounters(state, c);
  if (std::memcmp(dst, src, len) != 0) state.SkipWithError("bad copy");
}

void sumBenchmark(benchmark::State& state, const BenchCase& c, DataType type) {
  Arena& b = arenaFor(c.buffer_bytes, /*for_copy=*/false);
  const void* srcs[kMaxInputs];
  for (int k = 0; k < c.inputs; ++k) srcs[k] = b.input(k);
  const size_t count = c.buffer_bytes / static_cast<size_t>(c.elem_bytes);
  const bool many = c.kernel == "reduceMany";
  for (auto _ : state) {
    reduceSum(many, type, b.dst(), srcs, c.inputs, count);
    benchmark::ClobberMemory();
  }
  setCounters(state, c);
  if (!sumLooksRight(c, type, b)) state.SkipWithError("the kernel gave a wrong sum");
}

// The variant reduce() dispatches to, by name.
KernelIsa chosenIsa() {
  for (int i = 0; i < kNumKernelIsas; ++i) {
    const auto isa = static_cast<KernelIsa>(i);
    if (std::string(kernelIsaName(isa)) == reduceKernelIsa()) return isa;
  }
  return KernelIsa::kGeneric;
}

std::vector<BenchCase> registerAll() {
  std::vector<BenchCase> cases;
  for (size_t bytes : kBufferSizes) {
    for (int k : kInputCounts) {
      BenchCase copy;
      copy.kernel = "memcpy";
      copy.inputs = k;
      copy.buffer_bytes = bytes;
      copy.name = "copy/" + std::to_string(k) + "in/" + sizeLabel(bytes);
      cases.push_back(copy);
      benchmark::RegisterBenchmark(copy.name.c_str(), copyBenchmark, copy);
    }
    for (const TypeCase& t : kTypes) {
      // reduceMany() only differs from reduce() where it has a fused loop.
      const bool with_many = reduceManyIsFused(g_isa ? *g_isa : chosenIsa(), t.type,
                                               ReduceOp::kSum);
      for (const char* kernel : {"reduce", "reduceMany"}) {
        if (kernel == std::string("reduceMany") && !with_many) continue;
        for (int k : kInputCounts) {
          BenchCase c;
          c.kernel = kernel;
          c.type_name = t.name;
          c.elem_bytes = static_cast<int>(dataTypeSize(t.type));
          c.inputs = k;
          c.buffer_bytes = bytes;
          c.name = std::string(c.kernel == "reduce" ? "sum/" : "many/") + c.type_name + "/" +
                   std::to_string(k) + "in/" + sizeLabel(bytes);
          cases.push_back(c);
          benchmark::RegisterBenchmark(c.name.c_str(), sumBenchmark, c, t.type);
        }
      }
    }
  }
  return cases;
}

// Shows every report through the reporter --benchmark_format asks for and keeps, for the
// summary, each successful benchmark's single run or, with repetitions, its median.
class CapturingReporter : public benchmark::BenchmarkReporter {
 public:
  explicit CapturingReporter(benchmark::BenchmarkReporter* display) : display_(display) {}
  bool ReportContext(const Context& context) override { return display_->ReportContext(context); }
  void ReportRuns(const std::vector<Run>& report) override {
    for (const Run& run : report) {
      if (run.error_occurred) any_error_ = true;
      const bool single = run.run_type == Run::RT_Iteration && run.repetitions <= 1;
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (!(single || median) || run.error_occurred) continue;
      const auto it = run.counters.find("bytes_per_second");
      if (it != run.counters.end()) {
        measured_.push_back({run.run_name.function_name, it->second.value});
      }
    }
    display_->ReportRuns(report);
  }
  void Finalize() override { display_->Finalize(); }
  const std::vector<Measurement>& measured() const { return measured_; }
  bool anyError() const { return any_error_; }

 private:
  benchmark::BenchmarkReporter* display_;  // owned by Google Benchmark
  std::vector<Measurement> measured_;
  bool any_error_ = false;
};

// A positive filter also selects the copy baseline of every sum it selects, so each sum has
// its baseline in the same run. The filter is evaluated here as a POSIX extended regex, only
// for that; one regcomp() rejects gets every copy baseline instead. Negative filters ("-...")
// and the match-all ones are left as they are.
std::string withCopyBaselines(const std::string& filter, const std::vector<BenchCase>& cases) {
  if (filter.empty() || filter == "." || filter == "all" || filter[0] == '-') return filter;
  regex_t re;
  if (regcomp(&re, filter.c_str(), REG_EXTENDED | REG_NOSUB) != 0) {
    return "^copy/|(" + filter + ")";
  }
  std::string copies;
  for (const BenchCase& c : cases) {
    if (c.isCopy() || regexec(&re, c.name.c_str(), 0, nullptr, 0) != 0) continue;
    const std::string copy =
        "^copy/" + std::to_string(c.inputs) + "in/" + sizeLabel(c.buffer_bytes) + "$|";
    if (copies.find(copy) == std::string::npos) copies += copy;
  }
  regfree(&re);
  return copies + "(" + filter + ")";
}

void printHelp() {
  std::printf(
      "tally-kernels-bench: reducer kernels (sums of 2, 4, 8 inputs) against memcpy\n"
      "  --isa=auto|generic|avx2|avx512  kernel variant (default auto)\n"
      "  defaults:");
  for (const char* flag : kDefaultFlags) std::printf(" %s", flag);
  std::printf("\nGoogle Benchmark's options:\n");
  benchmark::PrintDefaultHelp();
}

bool parseIsa(const std::string& name, std::optional<KernelIsa>* out) {
  if (name == "auto") {
    out->reset();
    return true;
  }
  for (int i = 0; i < kNumKernelIsas; ++i) {
    const auto isa = static_cast<KernelIsa>(i);
    if (name == kernelIsaName(isa)) {
      *out = isa;
      return true;
    }
  }
  return false;
}

int run(int argc, char** argv) {
  // Our defaults first, so the same flags given by the user win; --isa is ours.
  std::vector<char*> args = {argv[0]};
  for (const char* flag : kDefaultFlags) args.push_back(const_cast<char*>(flag));
  bool to_stderr = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--isa=", 0) == 0) {
      if (!parseIsa(arg.substr(6), &g_isa)) {
        std::fprintf(stderr, "unknown --isa '%s' (auto, generic, avx2, avx512)\n",
                     arg.c_str() + 6);
        return 2;
      }
      continue;
    }
    if (arg.rfind("--benchmark_format=", 0) == 0 && arg != "--benchmark_format=console") {
      to_stderr = true;  // keep json/csv on stdout parseable
    }
    args.push_back(argv[i]);
  }
  if (g_isa && !kernelIsaSupported(*g_isa)) {
    std::fprintf(stderr, "--isa=%s: not available on this CPU\n", kernelIsaName(*g_isa));
    return 2;
  }
  int bm_argc = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&bm_argc, args.data(), printHelp);
  if (benchmark::ReportUnrecognizedArguments(bm_argc, args.data())) return 2;

  const std::vector<BenchCase> cases = registerAll();
  benchmark::SetBenchmarkFilter(withCopyBaselines(benchmark::GetBenchmarkFilter(), cases));
  CapturingReporter reporter(benchmark::CreateDefaultDisplayReporter());
  const size_t matched = benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  if (matched == 0) {
    std::fprintf(stderr, "tally-kernels-bench: no benchmark matches the filter\n");
    return 1;
  }

  if (!reporter.measured().empty()) {
    const std::string isa = g_isa ? kernelIsaName(*g_isa) : reduceKernelIsa();
    const std::string table = formatSummary(summarize(cases, reporter.measured()), isa);
    std::fputs(table.c_str(), to_stderr ? stderr : stdout);
  }
  // A benchmark that failed its check (wrong sum, bad copy) is an error for scripts.
  return reporter.anyError() ? 1 : 0;
}

}  // namespace
}  // namespace tally::bench

int main(int argc, char** argv) { return tally::bench::run(argc, argv); }
