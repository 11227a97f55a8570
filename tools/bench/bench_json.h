// SPDX-License-Identifier: Apache-2.0
// The pieces of the bench's JSON records that the table's (bench_output.cc) and a fault run's
// (bench_fault_report.cc) share. docs/bench.md describes the keys.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"
#include "tools/bench/bench_internal.h"

namespace tally::bench {

// The options as run: workers, sizes, types, ... (and faults and duration_ms in a fault run).
nlohmann::ordered_json optionsJson(const BenchOptions& options);
// hostname, cores, kernel, arch.
nlohmann::ordered_json machineJson(const RunInfo& info);
// table_version, reducer_addresses, notes.
nlohmann::ordered_json runJson(const RunInfo& info);
// Writes j, indented, with a closing newline.
Status writeJsonFile(const std::string& path, const nlohmann::ordered_json& j);

}  // namespace tally::bench
