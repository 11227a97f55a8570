// SPDX-License-Identifier: Apache-2.0
// The bench's files: the JSON record of a run (options, machine, rows, ratios) and the gnuplot
// chart of algbw against size, with the pieces a fault run's files share (bench_json.h, the
// gnuplot runner). docs/bench.md describes both.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "common/params.h"
#include "tools/bench/bench_internal.h"
#include "tools/bench/bench_json.h"
#include "tools/bench/cpu_cost.h"

namespace tally::bench {
namespace {

using nlohmann::ordered_json;

ordered_json ratioValue(double v) { return v > 0 ? ordered_json(v) : ordered_json(nullptr); }

// True when `name` is an executable file in a directory of $PATH.
bool onPath(const char* name) {
  const std::optional<std::string> path = EnvParamSource().get("PATH");
  std::stringstream dirs(path ? *path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    if (::access((dir + "/" + name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

// Runs argv with stdout and stderr kept, up to timeout_s; ok when it exits 0.
Status runTool(const std::vector<std::string>& args, int timeout_s) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Status::fromErrno("fork " + args[0], errno);
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "exec %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &wstatus, 0);
      return Status::timeout(args[0] + " took longer than " + std::to_string(timeout_s) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return Status::ok();
  if (WIFEXITED(wstatus)) {
    return Status::system(args[0] + " exited with status " + std::to_string(WEXITSTATUS(wstatus)) +
                          " (its own message is above)");
  }
  return Status::system(args[0] + " was killed by signal " +
                        std::to_string(WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0));
}

}  // namespace

RunInfo machineInfo() {
  RunInfo info;
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) info.hostname = host;
  long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  info.cores = cores > 0 ? static_cast<unsigned>(cores) : 0;
  return info;
}

ordered_json optionsJson(const BenchOptions& o) {
  ordered_json j;
  j["workers"] = o.workers;
  j["reducers"] = o.reducers;
  j["sizes"] = o.sizes;
  j["iters"] = o.iters;
  j["warmup"] = o.warmup;
  ordered_json types = ordered_json::array(), ops = ordered_json::array(),
               algos = ordered_json::array();
  for (DataType t : o.types) types.push_back(typeLabel(t));
  for (ReduceOp op : o.ops) ops.push_back(reduceOpName(op));
  for (Algo a : o.algos) algos.push_back(algoName(a));
  j["types"] = types;
  j["ops"] = ops;
  j["algos"] = algos;
  j["check"] = o.check;
  j["calls"] = {{"shape", o.calls.nccl ? "nccl" : "fixed"}, {"text", callShapeText(o.calls)},
                {"tuner_chunk", o.calls.tuner_chunk},       {"fixed_bytes", o.calls.fixed_bytes},
                {"channels", o.calls.chain.channels},       {"chain_depth", o.calls.chain.depth},
                {"nccl_buffsize", o.calls.chain.buffsize},  {"chunk", o.calls.chain.tuner_chunk}};
  j["emulate"] = o.emulate.empty() ? ordered_json(nullptr) : ordered_json(o.emulate);
  j["emulate_cc"] = o.emulate.empty() ? ordered_json(nullptr) : ordered_json(o.emulate_cc);
  j["emulate_burst"] = o.emulate.empty() ? ordered_json(nullptr) : ordered_json(o.emulate_burst);
  j["table_version"] = o.table_version;
  j["reducer_threads"] = reducerThreadsFor(o);
  j["timeout_ms"] = o.timeout_ms;
  j["plugin"] = o.plugin;
  j["reducer"] = o.reducer;
  j["gloo_bench"] = o.gloo_bench;
  if (!o.faults.empty()) {
    ordered_json faults = ordered_json::array();
    for (const Fault& f : o.faults) faults.push_back(faultName(f));
    j["faults"] = faults;
    j["duration_ms"] = o.duration_ms;
    j["slow_factor"] = o.slow_factor;
  }
  return j;
}

ordered_json machineJson(const RunInfo& info) {
  struct utsname u = {};
  ::uname(&u);
  return {{"hostname", info.hostname},
          {"cores", info.cores},
          {"kernel", u.release},
          {"arch", u.machine}};
}

ordered_json runJson(const RunInfo& info) {
  return {{"table_version", info.version},
          {"reducer_addresses", info.reducer_list},
          {"notes", info.notes}};
}

Status writeJsonFile(const std::string& path, const ordered_json& j) {
  std::ofstream out(path, std::ios::trunc);
  out << j.dump(2) << "\n";
  out.close();
  if (!out) return Status::system("cannot write " + path);
  return Status::ok();
}

Status writeJson(const BenchOptions& o, const RunInfo& info, const std::vector<BenchRow>& rows,
                 int exit_code) {
  ordered_json j;
  j["command"] = o.command_name;
  j["options"] = optionsJson(o);
  j["machine"] = machineJson(info);
  j["run"] = runJson(info);
  ordered_json jrows = ordered_json::array();
  for (const BenchRow& r : rows) {
    ordered_json row;
    row["algo"] = algoName(r.algo);
    row["type"] = typeLabel(r.type);
    row["op"] = reduceOpName(r.op);
    row["bytes"] = r.bytes;
    row["count"] = r.count;
    row["call_bytes"] =
        r.algo == Algo::kServer || (r.algo == Algo::kAuto && r.picked == Algo::kServer)
            ? ordered_json(callBytes(o, r.bytes))
            : ordered_json(nullptr);
    if (r.algo == Algo::kAuto) row["picked"] = algoName(r.picked);
    row["present"] = r.present;
    row["skipped"] = r.skipped;
    row["time_us"] = r.present ? ordered_json(r.time_us) : ordered_json(nullptr);
    row["algbw_gbs"] = r.present ? ordered_json(r.algbw_gbs) : ordered_json(nullptr);
    row["busbw_gbs"] = r.present ? ordered_json(r.busbw_gbs) : ordered_json(nullptr);
    row["wrong"] = r.present && r.wrong >= 0 ? ordered_json(r.wrong) : ordered_json(nullptr);
    auto known = [&r](double v) {
      return r.present && v >= 0 ? ordered_json(v) : ordered_json(nullptr);
    };
    row["moved_bytes"] = movedBytes(r.bytes, o.iters, o.workers);
    row["worker_cpu_s"] = known(r.worker_cpu_s);
    row["reducer_cpu_s"] = known(r.reducer_cpu_s);
    row["worker_cpu_s_per_gib"] = known(r.worker_cpu_per_gib);
    row["reducer_cpu_s_per_gib"] = known(r.reducer_cpu_per_gib);
    row["worker_socket_bytes"] = r.worker_socket_bytes;
    row["reducer_socket_bytes"] = r.reducer_socket_bytes;
    row["worker_cpu_s_per_socket_gib"] = known(r.worker_cpu_per_socket_gib);
    row["reducer_cpu_s_per_socket_gib"] = known(r.reducer_cpu_per_socket_gib);
    jrows.push_back(row);
  }
  j["rows"] = jrows;
  ordered_json ratios = ordered_json::array();
  for (const RatioRow& r : computeRatios(o, rows)) {
    ratios.push_back({{"type", typeLabel(r.type)},
                      {"op", reduceOpName(r.op)},
                      {"bytes", r.bytes},
                      {"rs_over_ring", ratioValue(r.over_ring)},
                      {"rs_over_gloo", ratioValue(r.over_gloo)},
                      {"auto_over_best", ratioValue(r.auto_over_best)}});
  }
  j["ratios"] = ratios;
  j["exit_code"] = exit_code;
  return writeJsonFile(o.json_path, j);
}

bool gnuplotAvailable() { return onPath("gnuplot"); }

Status writePlot(const BenchOptions& o, const std::vector<BenchRow>& rows) {
  // One line per (algorithm, type, op) that has a result; the data go inline as datablocks.
  std::ostringstream script, plot;
  script << gnuplotTerminal(1000, 600);
  std::string out = o.plot_path;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '\'') return Status::invalidUsage("--plot: no quotes in the file name, please");
  }
  const bool one_kind = o.types.size() == 1 && o.ops.size() == 1;
  int block = 0;
  for (Algo a : o.algos) {
    for (DataType t : o.types) {
      for (ReduceOp op : o.ops) {
        std::ostringstream data;
        int points = 0;
        for (const BenchRow& r : rows) {
          if (r.algo != a || r.type != t || r.op != op || !r.present) continue;
          data << r.bytes << " " << r.algbw_gbs << "\n";
          ++points;
        }
        if (points == 0) continue;
        std::string title = algoName(a);
        if (!one_kind) title += std::string(" ") + typeLabel(t) + " " + reduceOpName(op);
        script << "$d" << block << " << EOD\n" << data.str() << "EOD\n";
        plot << (block ? ", " : "plot ") << "$d" << block
             << " using 1:2 with linespoints lw 2 title '" << title << "'";
        ++block;
      }
    }
  }
  if (block == 0) return Status::invalidUsage("--plot: no rows to draw");
  std::string what =
      one_kind ? std::string(typeLabel(o.types[0])) + " " + reduceOpName(o.ops[0]) : "all-reduce";
  script << "set output '" << out << "'\n"
         << "set title '" << o.command_name << ": " << what << ", " << o.workers << " workers, "
         << (o.emulate.empty() ? std::string("loopback") : o.emulate + " links") << "'\n"
         << "set logscale x 2\nset format x '%.0b %BB'\nset xlabel 'size'\n"
         << "set ylabel 'algbw (GB/s)'\nset yrange [0:*]\nset grid\nset key outside right top\n"
         << plot.str() << "\n";
  return runGnuplotScript(script.str());
}

std::string gnuplotTerminal(int width, int height) {
  const std::string size = " size " + std::to_string(width) + "," + std::to_string(height);
  return "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n  set terminal pngcairo" + size +
         " noenhanced\n} else {\n  set terminal png" + size + " noenhanced\n}\n";
}

Status runGnuplotScript(const std::string& script) {
  std::unique_ptr<driver::TempDir> dir;
  TALLY_RETURN_IF_ERROR(driver::TempDir::create("plot", &dir));
  const std::string path = dir->path() + "/bench.gp";
  {
    std::ofstream f(path);
    f << script;
    if (!f) return Status::system("cannot write " + path);
  }
  return runTool({"gnuplot", path}, 60);
}

}  // namespace tally::bench
