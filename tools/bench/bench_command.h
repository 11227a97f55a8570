// SPDX-License-Identifier: Apache-2.0
// `tally bench` on the command line (bench_cli.cc): nccl-tests' all_reduce_perf flags turned into
// BenchOptions. Bad values exit 2 with a message naming the flag.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tools/bench/bench.h"
#include "tools/commands/command.h"

namespace tally::bench {

commands::Subcommand addBenchCommand(CLI::App& parent);

// Paths next to the running tally binary: the plugin, tally-reducer and tally-gloo-bench.
void fillDefaultPaths(BenchOptions* options);

}  // namespace tally::bench
