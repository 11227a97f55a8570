// SPDX-License-Identifier: Apache-2.0
// Gloo beside Tally: tally-gloo-bench's ranks started as children of the bench, on the same
// sizes (float32 sum only, the one case it measures) and, when emulating, in the workers' nodes.
// Rank 0 prints one JSON row per (algorithm, size); it goes to a file in the scratch directory
// that the parent reads for progress and, at the end, for the rows.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tools/bench/bench_internal.h"

namespace tally::bench {
namespace {

size_t countLines(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  std::string line;
  while (std::getline(in, line)) n += !line.empty();
  return n;
}

// The rows rank 0 printed, keyed by algorithm and bytes.
void parseRows(const std::string& path, const std::vector<Algo>& algos,
               const std::vector<uint64_t>& sizes, int workers, int iters,
               std::vector<BenchRow>* rows) {
  std::vector<BenchRow> found;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("algo") || !j.contains("bytes")) continue;
    BenchRow row;
    std::string algo = j.value("algo", "");
    if (algo == "gloo_ring_chunked") {
      row.algo = Algo::kGlooRing;
    } else if (algo == "gloo_halving_doubling") {
      row.algo = Algo::kGlooHalvingDoubling;
    } else {
      continue;
    }
    row.bytes = j.value("bytes", uint64_t{0});
    row.count = j.value("count", uint64_t{0});
    row.time_us = j.value("time_us", 0.0);
    row.wrong = j.value("wrong", int64_t{-1});
    const nlohmann::json cpu = j.value("cpu_s", nlohmann::json());
    row.worker_cpu_s = cpu.is_number() ? cpu.get<double>() : -1;
    row.reducer_cpu_s = 0;  // Gloo has no reducers
    row.present = true;
    found.push_back(row);
  }
  for (Algo a : algos) {
    for (uint64_t bytes : sizes) {
      BenchRow row;
      row.algo = a;
      row.bytes = bytes;
      row.count = bytes / 4;
      for (const BenchRow& f : found) {
        if (f.algo == a && f.bytes == bytes) row = f;
      }
      row.type = DataType::kFloat32;
      row.op = ReduceOp::kSum;
      fillBandwidth(workers, &row);
      fillCpuCost(workers, iters, &row);
      rows->push_back(row);
    }
  }
}

}  // namespace

Status runGloo(const BenchOptions& options, RunGuard* guard,
               const std::vector<driver::EmulatedNode>* nodes, const std::string& dir,
               Progress* progress, std::vector<BenchRow>* rows, bool* failed) {
  std::vector<Algo> algos;
  for (Algo a : options.algos) {
    if (isGloo(a)) algos.push_back(a);
  }
  const bool ring = std::count(algos.begin(), algos.end(), Algo::kGlooRing) > 0;
  const bool hd = std::count(algos.begin(), algos.end(), Algo::kGlooHalvingDoubling) > 0;
  const char* algo_flag = ring && hd ? "both" : ring ? "ring_chunked" : "halving_doubling";

  const std::vector<uint64_t> sizes = typeSizes(options, DataType::kFloat32);
  std::string size_list;
  for (uint64_t bytes : sizes) size_list += (size_list.empty() ? "" : ",") + std::to_string(bytes);
  const std::string store_dir = dir + "/gloo-store";
  const std::string out_path = dir + "/gloo-rows.jsonl";
  const std::string timeout = std::to_string(options.timeout_ms) + "ms";

  auto body = [&](int rank) -> int {
    if (nodes != nullptr) {
      Status s = driver::EmulatedCluster::enter((*nodes)[static_cast<size_t>(rank)]);
      if (!s.isOk()) {
        std::fprintf(stderr, "%s: gloo rank %d: %s\n", options.command_name.c_str(), rank,
                     s.toString().c_str());
        return 2;
      }
    }
    const std::string address =
        nodes != nullptr ? (*nodes)[static_cast<size_t>(rank)].address : "127.0.0.1";
    int fd = rank == 0 ? ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644)
                       : ::open("/dev/null", O_WRONLY);
    if (fd < 0 || ::dup2(fd, STDOUT_FILENO) < 0) return 2;
    std::vector<std::string> args = {options.gloo_bench,
                                     "--rank",
                                     std::to_string(rank),
                                     "--nranks",
                                     std::to_string(options.workers),
                                     "--store",
                                     store_dir,
                                     "--address",
                                     address,
                                     "--algo",
                                     algo_flag,
                                     "--sizes",
                                     size_list,
                                     "--iters",
                                     std::to_string(options.iters),
                                     "--warmup",
                                     std::to_string(options.warmup),
                                     "--timeout",
                                     timeout};
    if (options.check) args.push_back("--check");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "%s: exec %s: %s\n", options.command_name.c_str(), argv[0],
                 std::strerror(errno));
    return 127;
  };

  const size_t total = algos.size() * sizes.size();
  std::vector<driver::WorkerExit> exits;
  TALLY_RETURN_IF_ERROR(runChildren(
      guard, options.workers, body, options.timeout_ms,
      [&] {
        progress->show("gloo float32 sum " + std::to_string(countLines(out_path)) + "/" +
                       std::to_string(total) + " rows");
      },
      &exits));
  progress->clear();
  std::string why;
  if (!driver::allWorkersOk(exits, &why)) {
    *failed = true;
    std::fprintf(stderr, "%s: tally-gloo-bench failures:\n%s", options.command_name.c_str(),
                 why.c_str());
  }
  parseRows(out_path, algos, sizes, options.workers, options.iters, rows);
  std::error_code ec;
  std::filesystem::remove_all(store_dir, ec);
  std::filesystem::remove(out_path, ec);
  return Status::ok();
}

}  // namespace tally::bench
