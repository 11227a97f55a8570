// SPDX-License-Identifier: Apache-2.0
#include "tools/demo.h"

#include <cstdio>
#include <memory>
#include <string>

#include "common/sizes.h"
#include "tools/bench/bench_command.h"

namespace tally::demo {

std::vector<uint64_t> defaultSizes() {
  std::vector<uint64_t> sizes;
  for (uint64_t b = 256 * 1024; b <= 64ull * 1024 * 1024; b *= 4) sizes.push_back(b);
  return sizes;
}

bench::BenchOptions demoPreset() {
  bench::BenchOptions o;
  o.workers = 4;
  o.reducers = 2;
  o.sizes = defaultSizes();
  o.iters = 5;
  o.warmup = 2;
  o.types = {DataType::kFloat32};
  o.ops = {ReduceOp::kSum};
  o.algos = {bench::Algo::kServer, bench::Algo::kRing};
  o.timeout_ms = 120000;
  o.style = bench::TableStyle::kDemo;
  o.command_name = "tally demo";
  return o;
}

commands::Subcommand addDemoCommand(CLI::App& parent) {
  auto options = std::make_shared<bench::BenchOptions>(demoPreset());
  auto sizes = std::make_shared<std::vector<std::string>>();
  auto ring = std::make_shared<bool>(true);
  CLI::App* cmd = parent.add_subcommand(
      "demo",
      "Start reducers and workers on loopback, all-reduce through the plugin, check and time it");
  bench::BenchOptions& o = *options;
  cmd->add_option("--plugin", o.plugin, "Path of libnccl-net-tally.so (default: next to tally)");
  cmd->add_option("--reducer", o.reducer, "Path of tally-reducer (default: next to tally)");
  cmd->add_option("--workers", o.workers, "Worker processes")
      ->capture_default_str()
      ->check(CLI::Range(2, 64));
  cmd->add_option("--reducers", o.reducers, "Reducer processes")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--sizes", *sizes,
                  "Bytes per all-reduce, e.g. 256K,4M,64M (default 256K..64M x4)")
      ->delimiter(',');
  cmd->add_option("--iters", o.iters, "Timed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", o.warmup, "Warm-up iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--table-version", o.table_version,
                  "Plugin table version (8..12; default newest)")
      ->check(CLI::Range(0, 12));
  cmd->add_option("--reducer-threads", o.reducer_threads,
                  "--threads for each tally-reducer (default: the machine's cores shared among "
                  "the reducers, at least 1)");
  cmd->add_flag("!--no-ring", *ring, "Skip the ring all-reduce baseline");
  cmd->add_flag("--verbose", o.verbose, "Show the plugin's INFO lines");
  cmd->footer("The same machinery as `tally bench` (docs/bench.md), with the demo's defaults.");

  return {cmd, [options, sizes, ring]() {
            bench::fillDefaultPaths(options.get());
            if (!sizes->empty()) {
              options->sizes.clear();
              for (const auto& text : *sizes) {
                uint64_t bytes = 0;
                Status s = parseBytes(text, &bytes);
                if (!s.isOk() || bytes == 0 || bytes % 4 != 0) {
                  std::fprintf(stderr,
                               "tally demo: bad size %s (want a positive multiple of 4 bytes)\n",
                               text.c_str());
                  return 2;
                }
                options->sizes.push_back(bytes);
              }
            }
            if (!*ring) options->algos = {bench::Algo::kServer};
            return bench::runBench(*options, nullptr);
          }};
}

}  // namespace tally::demo
