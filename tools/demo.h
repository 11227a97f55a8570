// SPDX-License-Identifier: Apache-2.0
// `tally demo`: a preset of `tally bench` (tools/bench/bench.h) with the demo's defaults: reducers
// and workers on loopback, float32 sums through the plugin's CollNet table driven as NCCL drives
// it beside a ring all-reduce over the same plugin's point-to-point net, every result checked
// against an independent reference, printed as size, time and algorithm bandwidth side by side.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <vector>

#include "tools/bench/bench.h"
#include "tools/commands/command.h"

namespace tally::demo {

// 256 KiB .. 64 MiB, x4.
std::vector<uint64_t> defaultSizes();

// The demo's bench options: 4 workers, 2 reducers, float32 sum, defaultSizes(), 2 warm-up and 5
// timed iterations, rs and ring, the demo table, "tally demo" in messages. Paths left empty.
bench::BenchOptions demoPreset();

// tally demo [--workers N] [--reducers R] [--sizes 4K,1M] [--iters N] [--warmup W]
//            [--no-ring] [--plugin SO] [--reducer BIN] [--table-version V]
//            [--reducer-threads T] [--verbose]
commands::Subcommand addDemoCommand(CLI::App& parent);

}  // namespace tally::demo
