// SPDX-License-Identifier: Apache-2.0
#include "tools/gloo/gloo_runner.h"

#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <system_error>
#include <vector>

#include "tools/bench/checked_calls.h"
#include "tools/bench/cpu_cost.h"

namespace tally::gloo_bench {
namespace {

using Clock = std::chrono::steady_clock;

// Gloo throws gloo::Exception (IoException, EnforceNotMet) and the standard library throws
// std::exception; each becomes a Status naming what was being done, with Gloo's message. A
// bounded wait that ran out ("Wait timeout for key(s)", "Timed out waiting", "Connect timeout")
// becomes kTimeout, and keys left by an earlier run get a hint.
template <typename Fn>
Status catchGloo(const char* what, Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    const std::string message = std::string(what) + ": " + e.what();
    if (message.find("File already exists") != std::string::npos) {
      return Status::invalidUsage(message +
                                  " (keys of an earlier run under this --prefix: use a fresh "
                                  "--store directory or another --prefix)");
    }
    for (const char* word : {"timeout", "Timed out", "timed out"}) {
      if (message.find(word) != std::string::npos) return Status::timeout(message);
    }
    return Status::remote(message);
  }
}

std::unique_ptr<gloo::Algorithm> makeAllreduce(GlooAlgo algo,
                                               const std::shared_ptr<gloo::Context>& context,
                                               float* buffer, int count) {
  const std::vector<float*> ptrs = {buffer};
  if (algo == GlooAlgo::kRingChunked) {
    return std::make_unique<gloo::AllreduceRingChunked<float>>(context, ptrs, count);
  }
  return std::make_unique<gloo::AllreduceHalvingDoubling<float>>(context, ptrs, count);
}

// One double reduced over every rank with `fn` (max or sum), for the per-size summary.
double reduceScalar(const std::shared_ptr<gloo::Context>& context, double value,
                    const gloo::ReductionFunction<double>* fn) {
  std::vector<double*> ptrs = {&value};
  gloo::AllreduceRing<double> allreduce(context, ptrs, 1, fn);
  allreduce.run();
  return value;
}

void barrier(const std::shared_ptr<gloo::Context>& context) {
  gloo::BarrierOptions options(context);
  gloo::barrier(options);
}

}  // namespace

GlooGroup::GlooGroup(const BenchOptions& options, GlooAlgo algo,
                     std::shared_ptr<gloo::Context> context)
    : options_(options), algo_(algo), context_(std::move(context)) {}

GlooGroup::~GlooGroup() = default;

Status GlooGroup::connect(const BenchOptions& options, GlooAlgo algo,
                          std::unique_ptr<GlooGroup>* out) {
  // Every rank may race to create the directory; an existing one is fine.
  std::error_code ec;
  std::filesystem::create_directories(options.store, ec);
  if (ec) {
    return Status::system("cannot create store directory " + options.store + ": " + ec.message());
  }
  return catchGloo("gloo rendezvous", [&]() -> Status {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.address;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore file_store(options.store);
    gloo::rendezvous::PrefixStore store(options.prefix + "." + algoFlagName(algo), file_store);
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.nranks);
    // Set before connecting: the pairs copy the timeout when they are made.
    context->setTimeout(std::chrono::milliseconds(options.timeout_ms));
    context->connectFullMesh(store, device);
    out->reset(new GlooGroup(options, algo, std::move(context)));
    return Status::ok();
  });
}

Status GlooGroup::measure(uint64_t bytes, BenchRow* row) {
  return catchGloo(algoRowName(algo_), [&] { return measureOrThrow(bytes, row); });
}

Status GlooGroup::measureOrThrow(uint64_t bytes, BenchRow* row) {
  const size_t count = bytes / sizeof(float);
  std::vector<float> input(count);
  std::vector<float> buffer(count);
  std::vector<float> expected;
  for (size_t i = 0; i < count; ++i) input[i] = inputValue(options_.rank, i);
  if (options_.check) {
    expected.resize(count);
    for (size_t i = 0; i < count; ++i) expected[i] = expectedSum(options_.nranks, i);
  }

  // Made outside the timed loop, as a training job makes it once; parseSizes keeps count in int.
  std::unique_ptr<gloo::Algorithm> allreduce =
      makeAllreduce(algo_, context_, buffer.data(), static_cast<int>(count));
  // Every rank's buffers exist before any rank sends into them.
  barrier(context_);

  double total_us = 0;
  double cpu_s = 0;  // this process, over the timed iterations; -1 once unreadable
  size_t wrong = 0;
  for (int i = 0; i < options_.warmup + options_.iters; ++i) {
    if (i == options_.warmup) barrier(context_);
    const double cpu0 = bench::processCpuSeconds();
    const auto t0 = Clock::now();
    std::memcpy(buffer.data(), input.data(), count * sizeof(float));
    allreduce->run();
    const auto t1 = Clock::now();
    const double cpu1 = bench::processCpuSeconds();
    if (i >= options_.warmup) {
      total_us += std::chrono::duration<double, std::micro>(t1 - t0).count();
      cpu_s = cpu_s < 0 || cpu0 < 0 || cpu1 < 0 ? -1 : cpu_s + (cpu1 - cpu0);
    }
    if (options_.check && bench::checkedCall(i, options_.warmup, options_.iters)) {
      size_t first_bad = 0;
      const size_t bad = countWrong(buffer.data(), expected.data(), count, &first_bad);
      if (bad != 0 && wrong == 0) {
        std::fprintf(stderr,
                     "tally-gloo-bench: rank %d: %s %llu bytes: %zu wrong, first at %zu: got %g "
                     "expected %g\n",
                     options_.rank, algoRowName(algo_), static_cast<unsigned long long>(bytes), bad,
                     first_bad, static_cast<double>(buffer[first_bad]),
                     static_cast<double>(expected[first_bad]));
      }
      wrong += bad;
    }
  }

  const double mean_us = total_us / options_.iters;
  BenchRow result;
  result.algo = algo_;
  result.bytes = bytes;
  result.count = count;
  result.time_us = reduceScalar(context_, mean_us, gloo::ReductionFunction<double>::max);
  // A rank without a CPU reading makes the sum unknown: the min of "known" flags tells every rank.
  const double known =
      reduceScalar(context_, cpu_s < 0 ? 0.0 : 1.0, gloo::ReductionFunction<double>::min);
  const double cpu_sum =
      reduceScalar(context_, cpu_s < 0 ? 0.0 : cpu_s, gloo::ReductionFunction<double>::sum);
  result.cpu_s = known > 0 ? cpu_sum : -1;
  if (options_.check) {
    // Exact: counts stay far below 2^53.
    result.wrong = static_cast<int64_t>(
        reduceScalar(context_, static_cast<double>(wrong), gloo::ReductionFunction<double>::sum));
  }
  *row = result;
  return Status::ok();
}

Status GlooGroup::finish() {
  return catchGloo("gloo final barrier", [&] {
    barrier(context_);
    return Status::ok();
  });
}

}  // namespace tally::gloo_bench
