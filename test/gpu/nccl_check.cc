// SPDX-License-Identifier: Apache-2.0
// tally_gpu_nccl_check: one rank of an NCCL job on the GPU machine, for test/gpu/run.sh. Every
// rank is its own process (and, with its own NCCL_HOSTID, its own node); ranks meet through files
// in --dir: rank 0 writes each ncclUniqueId there, the others wait for it (bounded).
//
//   tally_gpu_nccl_check --probe
//       prints the GPU and NCCL it finds; exit 0 when a GPU can be used, 77 (with the reason)
//       when not, so run.sh can tell "skip" from "fail".
//   tally_gpu_nccl_check --rank R --nranks N --dir D [--checks LIST] [--max-bytes B]
//                        [--timeout-s T] [--seed S]
//       LIST is a comma list of: collectives (every type x op x size, in- and out-of-place, on
//       device buffers, checked element by element against values.h), concurrent (a second
//       communicator beside the first, all-reduces on both at once), split (ncclCommSplit by rank
//       parity), recreate (destroy everything, then create, use and destroy a communicator three
//       times: NCCL unloads and reloads the net plugin in between), smoke (one checked
//       all-reduce). Default: collectives,concurrent,split,recreate.
//   tally_gpu_nccl_check --bench --rank R --nranks N --dir D [--max-bytes B]
//       float32 sum, 1 MiB to --max-bytes in steps of x4; rank 0 prints
//       "BENCH <bytes> <us per call> <algbw GB/s> <wrong elements>".
//
// Every rank prints "CHECK <name> PASS|FAIL|SKIP <detail>" per check and exits 0 only when none
// failed. Every wait is bounded by --timeout-s (default 120).
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test/gpu/nccl_job.h"

namespace tally::gpucheck {
namespace {

struct Args {
  bool probe = false;
  bool bench = false;
  int rank = -1;
  int nranks = 0;
  std::string dir;
  std::string checks = "collectives,concurrent,split,recreate";
  size_t max_bytes = size_t{256} << 20;
  int timeout_s = 120;
  uint64_t seed = 7;
};

struct Rank {
  Args args;
  bool fp8 = false;  // NCCL runs float8 all-reduces only from sm_90 on
  cudaStream_t stream = nullptr;
  cudaStream_t stream2 = nullptr;
  int failures = 0;
};

void report(Rank& r, const std::string& name, const char* verdict, const std::string& detail) {
  std::printf("CHECK %s %s %s\n", name.c_str(), verdict, detail.c_str());
  std::fflush(stdout);
  if (std::string(verdict) == "FAIL") ++r.failures;
}

// Rank 0 creates the id named `tag` and publishes it; the others wait for it.
bool shareId(const Rank& r, const std::string& tag, ncclUniqueId* id, std::string* err) {
  const std::string path = r.args.dir + "/id." + tag;
  if (r.args.rank == 0) {
    if (!ncclOk(ncclGetUniqueId(id), "ncclGetUniqueId", err)) return false;
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(id->internal, sizeof(id->internal));
    if (std::rename(tmp.c_str(), path.c_str()) == 0) return true;
    *err = "cannot write " + path;
    return false;
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(r.args.timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    std::ifstream in(path, std::ios::binary);
    if (in.read(id->internal, sizeof(id->internal))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  *err =
      "rank 0's id " + path + " did not appear within " + std::to_string(r.args.timeout_s) + " s";
  return false;
}

bool initComm(const Rank& r, const std::string& tag, ncclComm_t* comm, std::string* err) {
  ncclUniqueId id;
  return shareId(r, tag, &id, err) &&
         ncclOk(ncclCommInitRank(comm, r.args.nranks, id, r.args.rank), "ncclCommInitRank", err);
}

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Every type and op at odd sizes from 1 element, then a few large ones up to --max-bytes.
bool checkCollectives(Rank& r, ncclComm_t comm, std::string* detail) {
  const Clock::time_point start = Clock::now();
  struct Big {
    int type, op;
    size_t bytes;
  };
  const Big bigs[] = {{7, kSum, size_t{256} << 20},      {9, kAvg, (size_t{64} << 20) + 2},
                      {0, kMin, (size_t{64} << 20) + 1}, {8, kProd, (size_t{32} << 20) + 8},
                      {1, kMax, (size_t{16} << 20) + 3}, {6, kSum, (size_t{16} << 20) + 2}};
  struct Spec {
    int type, op;
    size_t count;
    uint64_t seed;
  };
  std::vector<Spec> specs;
  for (int type = 0; type < kNumTypes; ++type) {
    if (type >= 10 && !r.fp8) continue;
    for (int op = 0; op < kNumOps; ++op) {
      for (size_t count : {size_t{1}, size_t{3}, size_t{1021}, size_t{65537}, size_t{1048573}}) {
        if (count * static_cast<size_t>(typeInfo(type).bytes) > r.args.max_bytes) continue;
        specs.push_back({type, op, count, r.args.seed + count});
      }
    }
  }
  size_t largest = 0;
  for (const Big& b : bigs) {
    if (b.bytes > r.args.max_bytes) continue;
    largest = std::max(largest, b.bytes);
    specs.push_back(
        {b.type, b.op, b.bytes / static_cast<size_t>(typeInfo(b.type).bytes), r.args.seed});
  }
  // One job at a time: its device and host buffers are freed before the next one.
  for (const Spec& spec : specs) {
    for (bool in_place : {false, true}) {
      Job job(spec.type, spec.op, spec.count, in_place, spec.seed);
      if (!job.run(comm, r.stream, r.args.rank, r.args.nranks, r.args.timeout_s, detail)) {
        return false;
      }
    }
  }
  char line[200];
  std::snprintf(line, sizeof(line),
                "%zu all-reduces, %d types x 5 ops, 1 element to %zu bytes, in- and "
                "out-of-place, every element exact (%.1f s)",
                2 * specs.size(), r.fp8 ? 12 : 10, largest, secondsSince(start));
  *detail = line;
  return true;
}

// A second communicator beside `world`: all-reduces on both, launched before either is waited on.
bool checkConcurrent(Rank& r, ncclComm_t world, std::string* detail) {
  ncclComm_t second = nullptr;
  if (!initComm(r, "second", &second, detail)) return false;
  bool ok = true;
  for (int round = 0; round < 3 && ok; ++round) {
    Job a(7, kSum, (size_t{1} << 20) + 1, false, r.args.seed + 100 + round);
    Job b(2, kMax, (size_t{1} << 20) + 3, round % 2 == 1, r.args.seed + 200 + round);
    ok = a.prepare(r.args.rank, r.args.nranks, detail) &&
         b.prepare(r.args.rank, r.args.nranks, detail) && a.launch(world, r.stream, detail) &&
         b.launch(second, r.stream2, detail) &&
         waitStream(world, r.stream, r.args.timeout_s, detail) &&
         waitStream(second, r.stream2, r.args.timeout_s, detail) && a.verify(detail) == 0 &&
         b.verify(detail) == 0;
  }
  ok = ncclOk(ncclCommDestroy(second), "ncclCommDestroy", detail) && ok;
  if (ok) *detail = "2 communicators at once, 3 rounds of float32 sum + int32 max, exact";
  return ok;
}

// ncclCommSplit by rank parity; each half checks its own sums with its own numbering.
bool checkSplit(Rank& r, ncclComm_t world, std::string* detail) {
  const int color = r.args.rank % 2;
  ncclComm_t sub = nullptr;
  if (!ncclOk(ncclCommSplit(world, color, r.args.rank, &sub, nullptr), "ncclCommSplit", detail)) {
    return false;
  }
  int count = 0, sub_rank = -1;
  const int want_count = (r.args.nranks + 1 - color) / 2;
  bool ok = ncclOk(ncclCommCount(sub, &count), "ncclCommCount", detail) &&
            ncclOk(ncclCommUserRank(sub, &sub_rank), "ncclCommUserRank", detail);
  if (ok && (count != want_count || sub_rank != r.args.rank / 2)) {
    *detail = "split gave rank " + std::to_string(sub_rank) + " of " + std::to_string(count) +
              ", want " + std::to_string(r.args.rank / 2) + " of " + std::to_string(want_count);
    ok = false;
  }
  for (int op : {kSum, kMin, kAvg}) {
    if (!ok) break;
    Job job(op == kMin ? 2 : 9, op, (size_t{1} << 20) + 5, op == kMin, r.args.seed + 17 * color);
    ok = job.run(sub, r.stream, sub_rank, count, r.args.timeout_s, detail);
  }
  ok = ncclOk(ncclCommDestroy(sub), "ncclCommDestroy", detail) && ok;
  if (ok) {
    *detail = "2 halves of " + std::to_string(want_count) + "+ ranks: bfloat16 sum and avg, " +
              "int32 min, exact";
  }
  return ok;
}

// Create, use, destroy: with no communicator left NCCL unloads the plugin, then loads it again.
bool checkRecreate(Rank& r, std::string* detail) {
  for (int round = 0; round < 3; ++round) {
    ncclComm_t comm = nullptr;
    if (!initComm(r, "again" + std::to_string(round), &comm, detail)) return false;
    Job a(7, kSum, 65537, round % 2 == 0, r.args.seed + 300 + round);
    Job b(0, kMax, 1021, false, r.args.seed + 400 + round);
    const bool ok = a.run(comm, r.stream, r.args.rank, r.args.nranks, r.args.timeout_s, detail) &&
                    b.run(comm, r.stream, r.args.rank, r.args.nranks, r.args.timeout_s, detail);
    if (!ncclOk(ncclCommDestroy(comm), "ncclCommDestroy", detail) || !ok) return false;
  }
  *detail = "3 rounds of init, all-reduce, destroy (the plugin is unloaded in between)";
  return true;
}

bool bench(Rank& r, ncclComm_t comm, std::string* detail) {
  for (size_t bytes = size_t{1} << 20; bytes <= r.args.max_bytes; bytes *= 4) {
    Job job(7, kSum, bytes / 4, false, r.args.seed);
    if (!job.prepare(r.args.rank, r.args.nranks, detail)) return false;
    const int warmup = 2, iters = bytes >= (size_t{64} << 20) ? 3 : 5;
    for (int i = 0; i < warmup; ++i) {
      if (!job.launch(comm, r.stream, detail)) return false;
    }
    if (!waitStream(comm, r.stream, r.args.timeout_s, detail)) return false;
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < iters; ++i) {
      if (!job.launch(comm, r.stream, detail)) return false;
    }
    if (!waitStream(comm, r.stream, r.args.timeout_s, detail)) return false;
    const double seconds = secondsSince(start) / iters;
    const long wrong = job.verify(detail);
    if (r.args.rank == 0) {
      std::printf("BENCH %zu %.1f %.3f %ld\n", bytes, seconds * 1e6, bytes / seconds / 1e9, wrong);
      std::fflush(stdout);
    }
    if (wrong != 0) return false;
  }
  *detail = "float32 sum, 1 MiB to " + std::to_string(r.args.max_bytes) + " bytes, checked";
  return true;
}

int probe() {
  int version = 0, devices = 0;
  ncclGetVersion(&version);
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("no usable GPU: %s (NCCL %d)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 CUDA devices", version);
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("GPU 0: %s, sm_%d%d, %zu MiB; %d device(s); NCCL %d\n", prop.name, prop.major,
              prop.minor, prop.totalGlobalMem >> 20, devices, version);
  return 0;
}

bool parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--probe" || arg == "--bench") {
      (arg == "--probe" ? a->probe : a->bench) = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    const char* value = argv[++i];
    if (arg == "--rank") {
      a->rank = std::atoi(value);
    } else if (arg == "--nranks") {
      a->nranks = std::atoi(value);
    } else if (arg == "--dir") {
      a->dir = value;
    } else if (arg == "--checks") {
      a->checks = value;
    } else if (arg == "--max-bytes") {
      a->max_bytes = std::strtoull(value, nullptr, 10);
    } else if (arg == "--timeout-s") {
      a->timeout_s = std::atoi(value);
    } else if (arg == "--seed") {
      a->seed = std::strtoull(value, nullptr, 10);
    } else {
      return false;
    }
  }
  return a->probe || (a->nranks >= 2 && a->rank >= 0 && a->rank < a->nranks && !a->dir.empty() &&
                      a->timeout_s > 0 && a->max_bytes >= (size_t{1} << 20));
}

bool wants(const Args& a, const std::string& name) {
  return ("," + a.checks + ",").find("," + name + ",") != std::string::npos;
}

int run(Rank& r) {
  std::string err;
  int cc_major = 0, version = 0;
  ncclGetVersion(&version);
  if (!cudaOk(cudaSetDevice(0), "cudaSetDevice", &err) ||
      !cudaOk(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, 0), "attr",
              &err) ||
      !cudaOk(cudaStreamCreate(&r.stream), "cudaStreamCreate", &err) ||
      !cudaOk(cudaStreamCreate(&r.stream2), "cudaStreamCreate", &err)) {
    report(r, "setup", "FAIL", err);
    return 1;
  }
  r.fp8 = cc_major >= 9 && version >= 22400;
  ncclComm_t world = nullptr;
  if (!initComm(r, r.args.bench ? "bench" : "world", &world, &err)) {
    report(r, "init", "FAIL", err);
    return 1;
  }
  // Runs one check; false when `world` can no longer be used: a collective failed or did not
  // finish. Wrong results alone leave it usable (every rank sees the same ones), so the next
  // checks still run.
  auto one = [&](const std::string& name, auto&& check) {
    std::string detail;
    const bool ok = check(&detail);
    report(r, name, ok ? "PASS" : "FAIL", detail);
    ncclResult_t async = ncclSuccess;
    return ok || (detail.find("wrong element") != std::string::npos &&
                  ncclCommGetAsyncError(world, &async) == ncclSuccess && async == ncclSuccess);
  };
  bool alive = true;
  if (r.args.bench) {
    alive = one("bench", [&](std::string* d) { return bench(r, world, d); });
  } else {
    if (wants(r.args, "smoke")) {
      alive = one("smoke", [&](std::string* d) {
        Job job(7, kSum, (size_t{1} << 20) + 1, false, r.args.seed);
        const bool ok = job.run(world, r.stream, r.args.rank, r.args.nranks, r.args.timeout_s, d);
        if (ok) *d = "float32 sum of 1 MiB + 1 element, exact";
        return ok;
      });
    }
    if (alive && wants(r.args, "collectives")) {
      if (!r.fp8) report(r, "float8", "SKIP", "needs sm_90 and NCCL 2.24 or later");
      alive = one("collectives", [&](std::string* d) { return checkCollectives(r, world, d); });
    }
    if (alive && wants(r.args, "concurrent")) {
      alive = one("concurrent", [&](std::string* d) { return checkConcurrent(r, world, d); });
    }
    if (alive && wants(r.args, "split") && r.args.nranks < 4) {
      report(r, "split", "SKIP", "needs 4 ranks or more: CollNet needs 2 nodes in each half");
    } else if (alive && wants(r.args, "split")) {
      alive = one("split", [&](std::string* d) { return checkSplit(r, world, d); });
    }
  }
  if (!alive) {
    ncclCommAbort(world);
    return 1;
  }
  if (!ncclOk(ncclCommDestroy(world), "ncclCommDestroy", &err)) report(r, "destroy", "FAIL", err);
  if (!r.args.bench && wants(r.args, "recreate")) {
    one("recreate", [&](std::string* d) { return checkRecreate(r, d); });
  }
  return r.failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tally::gpucheck

int main(int argc, char** argv) {
  using namespace tally::gpucheck;
  Rank r;
  if (!parse(argc, argv, &r.args)) {
    std::fprintf(stderr,
                 "usage: %s --probe | [--bench] --rank R --nranks N (>= 2) --dir D "
                 "[--checks collectives,concurrent,split,recreate,smoke] [--max-bytes B >= 1M] "
                 "[--timeout-s T] [--seed S]\n",
                 argv[0]);
    return 2;
  }
  if (r.args.probe) return probe();
  const int status = run(r);
  std::printf("RESULT rank %d: %s\n", r.args.rank, status == 0 ? "PASS" : "FAIL");
  return status;
}
