// SPDX-License-Identifier: Apache-2.0
// The small parsers of bench.h and the checks runBench makes before it starts anything.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/sizes.h"
#include "common/strings.h"
#include "tools/bench/bench.h"
#include "tools/bench/bench_internal.h"
#include "tools/bench/link_rate.h"
#include "tools/driver/emulated_cluster.h"
#include "tools/driver/reference.h"

namespace tally::bench {
namespace {

template <typename T>
void addUnique(std::vector<T>* list, T value) {
  if (std::find(list->begin(), list->end(), value) == list->end()) list->push_back(value);
}

}  // namespace

const char* algoName(Algo a) {
  switch (a) {
    case Algo::kServer:
      return "rs";
    case Algo::kRing:
      return "ring";
    case Algo::kGlooRing:
      return "gloo_ring";
    case Algo::kGlooHalvingDoubling:
      return "gloo_hd";
    case Algo::kAuto:
      return "auto";
  }
  return "?";
}

const char* typeLabel(DataType type) {
  switch (type) {
    case DataType::kFloat16:
      return "float16";
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    default:
      return dataTypeName(type);
  }
}

uint64_t callChunkBytes(const BenchOptions& o, uint64_t bytes) {
  if (!o.calls.nccl) return 0;
  const uint64_t nccl = driver::ncclChainChunkBytes(bytes, o.calls.chain);
  if (!o.calls.tuner_chunk) return nccl;
  return model::tunerCollNetChunk(benchSetup(o), bytes, o.calls.chain.channels, nccl);
}

uint64_t callBytes(const BenchOptions& o, uint64_t bytes) {
  if (!o.calls.nccl) return o.calls.fixed_bytes;
  return static_cast<uint64_t>(std::min(o.calls.chain.channels, driver::kNcclMaxSubs)) *
         callChunkBytes(o, bytes);
}

std::string callShapeText(const CallShape& shape) {
  if (!shape.nccl) return formatBytes(shape.fixed_bytes) + " calls";
  const driver::NcclChainShape& c = shape.chain;
  std::string text = "NCCL's CollNetChain calls (" + std::to_string(c.channels) +
                     (c.channels == 1 ? " channel" : " channels") + ", chain depth " +
                     std::to_string(c.depth) + ", NCCL_BUFFSIZE " + formatBytes(c.buffsize);
  if (c.tuner_chunk > 0) text += ", a tuner's chunk of " + formatBytes(c.tuner_chunk) + " (2.30)";
  if (shape.tuner_chunk) text += ", the chunk Tally's tuner asks NCCL 2.30 for";
  return text + ")";
}

bool isGloo(Algo a) { return a == Algo::kGlooRing || a == Algo::kGlooHalvingDoubling; }

int reducerThreadsFor(const BenchOptions& o) {
  if (o.reducer_threads > 0) return o.reducer_threads;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, o.reducers));
}

Status parseAlgos(const std::string& text, std::vector<Algo>* out) {
  bool wanted[kNumAlgos] = {};
  for (const std::string& name : splitList(text)) {
    if (name == "all") {
      for (int i = 0; i < kNumAlgos; ++i) wanted[i] = static_cast<Algo>(i) != Algo::kAuto;
    } else if (name == "both") {
      wanted[0] = wanted[1] = true;
    } else if (name == "gloo") {
      wanted[2] = wanted[3] = true;
    } else {
      bool found = false;
      for (int i = 0; i < kNumAlgos; ++i) {
        if (name == algoName(static_cast<Algo>(i))) wanted[i] = found = true;
      }
      if (!found) {
        return Status::invalidUsage(
            "--algo: unknown algorithm \"" + name +
            "\" (want rs, ring, auto, both, gloo, gloo_ring, gloo_hd or all)");
      }
    }
  }
  std::vector<Algo> algos;
  for (int i = 0; i < kNumAlgos; ++i) {
    if (wanted[i]) algos.push_back(static_cast<Algo>(i));
  }
  if (algos.empty()) return Status::invalidUsage("--algo: no algorithm named");
  *out = std::move(algos);
  return Status::ok();
}

Status parseTypes(const std::string& text, std::vector<DataType>* out) {
  std::vector<DataType> types;
  for (const std::string& name : splitList(text)) {
    if (name == "all") {
      for (int i = 0; i < kNumDataTypes; ++i) addUnique(&types, static_cast<DataType>(i));
      continue;
    }
    DataType t;
    if (!parseDataType(name.c_str(), &t)) {
      std::string known;
      for (int i = 0; i < kNumDataTypes; ++i)
        known += std::string(i ? ", " : "") + typeLabel(static_cast<DataType>(i));
      return Status::invalidUsage("-d: unknown type \"" + name + "\" (want all or " + known + ")");
    }
    addUnique(&types, t);
  }
  if (types.empty()) return Status::invalidUsage("-d: no type named");
  *out = std::move(types);
  return Status::ok();
}

Status parseOps(const std::string& text, std::vector<ReduceOp>* out) {
  std::vector<ReduceOp> ops;
  for (const std::string& name : splitList(text)) {
    if (name == "all") {
      for (int i = 0; i < kNumReduceOps; ++i) addUnique(&ops, static_cast<ReduceOp>(i));
      continue;
    }
    ReduceOp op;
    if (!parseReduceOp(name.c_str(), &op)) {
      return Status::invalidUsage("-o: unknown op \"" + name +
                                  "\" (want sum, prod, max, min or all)");
    }
    addUnique(&ops, op);
  }
  if (ops.empty()) return Status::invalidUsage("-o: no op named");
  *out = std::move(ops);
  return Status::ok();
}

Status sizeSeries(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor,
                  std::vector<uint64_t>* out) {
  if (min_bytes == 0) return Status::invalidUsage("-b: the smallest size must be at least 1 byte");
  if (min_bytes > max_bytes) return Status::invalidUsage("-b is larger than -e");
  if (factor < 2) return Status::invalidUsage("-f: the step factor must be at least 2");
  std::vector<uint64_t> sizes;
  for (uint64_t b = min_bytes; b <= max_bytes; b *= factor) {
    sizes.push_back(b);
    if (b > max_bytes / factor) break;  // the next step would pass max (or overflow)
  }
  *out = std::move(sizes);
  return Status::ok();
}

bool validRate(const std::string& rate) {
  double bits = 0;
  return parseTcRate(rate, &bits);
}

uint64_t elementCount(uint64_t bytes, DataType type) {
  uint64_t count = bytes / dataTypeSize(type);
  return count == 0 ? 1 : count;
}

std::vector<uint64_t> typeSizes(const BenchOptions& o, DataType type) {
  std::vector<uint64_t> sizes;
  for (uint64_t s : o.sizes) addUnique(&sizes, elementCount(s, type) * dataTypeSize(type));
  return sizes;
}

// Whether `path` can be created or overwritten: its directory exists and is writable, and the
// path is not a directory. Checked before the run, so a typo does not cost a whole run.
Status checkOutputFile(const char* flag, const std::string& path) {
  auto bad = [flag](const std::string& m) {
    return Status::invalidUsage(std::string(flag) + ": " + m);
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return bad(path + " is a directory; give a file name");
    if (::access(path.c_str(), W_OK) != 0)
      return bad("cannot overwrite " + path + ": " + std::strerror(errno));
    return Status::ok();
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0)
    return bad("cannot create " + path + ": directory " + dir + " does not exist");
  if (!S_ISDIR(st.st_mode))
    return bad("cannot create " + path + ": " + dir + " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return bad("cannot create " + path + " in " + dir + ": " + std::strerror(errno));
  return Status::ok();
}

Status validateOptions(const BenchOptions& o, bool* gloo_runs) {
  auto bad = [](std::string m) { return Status::invalidUsage(std::move(m)); };
  if (o.workers < 2) return bad("needs at least 2 workers");
  if (o.sizes.empty()) return bad("no sizes to run");
  if (o.iters < 1) return bad("-n: at least 1 iteration");
  if (o.warmup < 0) return bad("-w: the warm-up count cannot be negative");
  if (o.types.empty() || o.ops.empty() || o.algos.empty()) return bad("nothing to run");
  if (o.timeout_ms <= 0) return bad("--timeout must be positive");
  if (o.corrupt_rank >= o.workers) return bad("--debug-corrupt-rank is not a worker rank");
  const bool server = has(o.algos, Algo::kServer) || has(o.algos, Algo::kAuto);
  bool tally_algos = false, gloo = false;
  for (Algo a : o.algos) (isGloo(a) ? gloo : tally_algos) = true;
  if (server && o.reducers < 1) return bad("the reduction server needs at least 1 reducer");
  if (tally_algos && ::access(o.plugin.c_str(), R_OK) != 0)
    return bad("plugin " + o.plugin + " not found (use --plugin)");
  if (server && ::access(o.reducer.c_str(), X_OK) != 0)
    return bad("tally-reducer " + o.reducer + " not found (use --reducer)");
  *gloo_runs = false;
  if (gloo) {
    if (o.gloo_bench.empty() || ::access(o.gloo_bench.c_str(), X_OK) != 0) {
      return bad(
          "--algo asks for Gloo but tally-gloo-bench " +
          (o.gloo_bench.empty() ? std::string("was not given") : o.gloo_bench + " was not found") +
          " (it is built only when Gloo is installed: apt-get install libgloo-dev)");
    }
    const bool float32 = std::count(o.types.begin(), o.types.end(), DataType::kFloat32) > 0;
    const bool sum = std::count(o.ops.begin(), o.ops.end(), ReduceOp::kSum) > 0;
    *gloo_runs = float32 && sum;
  }
  if (!o.emulate.empty()) {
    if (!validRate(o.emulate))
      return bad("--emulate: \"" + o.emulate + "\" is not a rate such as 200mbit or 1gbit");
    if (o.emulate_cc.empty() ||
        !std::all_of(o.emulate_cc.begin(), o.emulate_cc.end(), [](unsigned char c) {
          return std::islower(c) || std::isdigit(c) || c == '_';
        }))
      return bad("--emulate-cc: \"" + o.emulate_cc +
                 "\" is not a congestion control name such as cubic or bbr (or host)");
    if (o.emulate_burst.empty() || !std::isdigit(static_cast<unsigned char>(o.emulate_burst[0])) ||
        !std::all_of(o.emulate_burst.begin(), o.emulate_burst.end(),
                     [](unsigned char c) { return std::isalnum(c) != 0; }))
      return bad("--emulate-burst: \"" + o.emulate_burst + "\" is not a size such as 256kb or 4kb");
    std::string why;
    if (!driver::EmulatedCluster::canEmulate(&why)) return bad(why);
  }
  if (!o.json_path.empty()) TALLY_RETURN_IF_ERROR(checkOutputFile("--json", o.json_path));
  if (!o.plot_path.empty()) {
    if (!gnuplotAvailable())
      return bad("--plot needs gnuplot, which is not on PATH (apt-get install gnuplot-nox)");
    // gnuplot's script quotes the name with single quotes.
    if (o.plot_path.find('\'') != std::string::npos)
      return bad("--plot: no quotes in the file name, please");
    TALLY_RETURN_IF_ERROR(checkOutputFile("--plot", o.plot_path));
  }
  return Status::ok();
}

}  // namespace tally::bench
