// SPDX-License-Identifier: Apache-2.0
// tally_gpu_plugin_cycle: the part of NCCL's use of the plugin that needs no GPU, done the way
// NCCL 2.28 finds, loads, sets up and unloads a plugin, so run.sh can check it on any machine
// before the GPU run:
//
//   - resolution: NCCL_NET_PLUGIN is read from the environment and turned into the same dlopen
//     candidates NCCL tries (unset: libnccl-net.so; a name: NAME then libnccl-net-NAME.so; a path
//     or lib*.so: that file; a prefix of STATIC_PLUGIN: the global scope, for LD_PRELOAD), each
//     opened with RTLD_NOW | RTLD_LOCAL, and the v11 tables must be named as NCCL_NET says;
//   - the load/unload cycle: every cycle opens the library, inits net and CollNet per
//     communicator, connects --comms CollNet communicators at once over TALLY_REDUCERS, runs an
//     all-reduce on each (float32 sum and int32 max, checked element by element), closes and
//     finalizes everything, then dlcloses. After each cycle no thread may be left in the process.
//   - what NCCL 2.27 to 2.29 open after that unload: they forget the plugin's name, so every
//     cycle after the first resolves the default name libnccl-net.so, unless
//     NCCL_NET_PLUGIN_REF_COUNT is 1 or more (NCCL then keeps the plugin and its name). NCCL's
//     own loader is checked the same way, from its source, by test/nccl_source/loader.
//
//   tally_gpu_plugin_cycle [--ranks N] [--cycles K] [--comms C] [--timeout-s T]
//
// Ranks are forked processes that exchange CollNet handles through files in a temporary folder.
// Prints one line per rank and cycle and a last line "plugin_cycle: PASS|FAIL ..."; exit 0 on
// PASS, 1 on a failed check, 2 on bad arguments.
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "plugin/abi/abi.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int ranks = 2;
  int cycles = 3;
  int comms = 2;
  int timeout_s = 60;
};

struct Loaded {
  void* handle = nullptr;
  const ncclNet_v11_t* net = nullptr;
  const ncclCollNet_v11_t* coll = nullptr;
  std::string file;  // the file the tables live in (dladdr)
};

void quietLogger(ncclDebugLogLevel level, unsigned long, const char* file, int line,
                 const char* fmt, ...) {
  if (level != NCCL_LOG_WARN) return;
  char text[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  std::fprintf(stderr, "plugin WARN %s:%d %s\n", file, line, text);
}

bool isStaticPluginPrefix(const std::string& name) {
  const std::string full = "STATIC_PLUGIN";
  return !name.empty() && name.size() <= full.size() &&
         strncasecmp(name.c_str(), full.c_str(), name.size()) == 0;
}

// The dlopen names NCCL tries for one NCCL_NET_PLUGIN entry; "" stands for dlopen(NULL).
std::vector<std::string> candidatesFor(const std::string& entry) {
  if (isStaticPluginPrefix(entry)) return {""};
  if (entry.find('/') != std::string::npos) return {entry};
  const bool lib_so = entry.rfind("lib", 0) == 0 && entry.size() > 3 &&
                      entry.compare(entry.size() - 3, 3, ".so") == 0;
  if (lib_so) return {entry};
  return {entry, "libnccl-net-" + entry + ".so"};
}

// Opens the first candidate that exports ncclNetPlugin_v11 named `want` (NCCL_NET, any case).
bool resolve(const char* plugin_env, const std::string& want, Loaded* out, std::string* why) {
  std::vector<std::string> names;
  if (plugin_env == nullptr || *plugin_env == '\0') {
    names = {"libnccl-net.so"};
  } else if (strcasecmp(plugin_env, "none") == 0) {
    *why = "NCCL_NET_PLUGIN=none: NCCL loads no external plugin";
    return false;
  } else {
    std::stringstream list(plugin_env);
    for (std::string entry; std::getline(list, entry, ',');) {
      for (const std::string& name : candidatesFor(entry)) names.push_back(name);
    }
  }
  for (const std::string& name : names) {
    void* handle = dlopen(name.empty() ? nullptr : name.c_str(), RTLD_NOW | RTLD_LOCAL);
    const std::string shown = name.empty() ? "global scope (STATIC_PLUGIN)" : name;
    if (handle == nullptr) {
      *why += "dlopen " + shown + ": " + dlerror() + "; ";
      continue;
    }
    auto* net = static_cast<const ncclNet_v11_t*>(dlsym(handle, TALLY_NET_PLUGIN_SYMBOL_V11));
    auto* coll =
        static_cast<const ncclCollNet_v11_t*>(dlsym(handle, TALLY_COLLNET_PLUGIN_SYMBOL_V11));
    if (net == nullptr || strcasecmp(net->name, want.c_str()) != 0) {
      *why += shown + ": no " TALLY_NET_PLUGIN_SYMBOL_V11 " named " + want + "; ";
      dlclose(handle);
      continue;
    }
    Dl_info info{};
    out->file = dladdr(net, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : shown;
    out->handle = handle;
    out->net = net;
    out->coll = coll;
    return true;
  }
  return false;
}

int threadCount() {
  int n = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(dir)) n += entry->d_name[0] != '.';
    closedir(dir);
  }
  return n;
}

bool writeFileAtomically(const std::string& path, const void* data, size_t size) {
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  return out && std::rename(tmp.c_str(), path.c_str()) == 0;
}

bool readFileWithin(const std::string& path, void* data, size_t size, Clock::time_point end) {
  while (Clock::now() < end) {
    std::ifstream in(path, std::ios::binary);
    if (in.read(static_cast<char*>(data), static_cast<std::streamsize>(size))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// Comm c of a cycle: even comms run float32 sum, odd ones int32 max, both with an odd count.
struct CommRun {
  void* listen = nullptr;
  void* comm = nullptr;
  void* send_mh = nullptr;
  void* recv_mh = nullptr;
  void* request = nullptr;
  bool done = false;
  std::vector<uint32_t> send, recv;  // 4-byte elements of either type
};

uint32_t inputBits(int c, int rank, size_t i) {
  if (c % 2 == 0) {
    const float v = static_cast<float>((rank + 1) * static_cast<int>(i % 251 + 1));
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return bits;
  }
  return static_cast<uint32_t>(
      static_cast<int32_t>((i * 7 + static_cast<size_t>(rank) * 13 + static_cast<size_t>(c)) %
                           1000) -
      500);
}

uint32_t expectedBits(int c, int ranks, size_t i) {
  if (c % 2 == 0) return inputBits(c, ranks * (ranks + 1) / 2 - 1, i);  // (sum of r+1) * x
  int32_t best = INT32_MIN;
  for (int r = 0; r < ranks; ++r) best = std::max(best, static_cast<int32_t>(inputBits(c, r, i)));
  return static_cast<uint32_t>(best);
}

// One rank's cycle; false with *why on the first failed step.
bool runCycle(const Options& o, int rank, int cycle, const std::string& dir, std::string* why) {
  const Clock::time_point end = Clock::now() + std::chrono::seconds(o.timeout_s);
  const char* want_env = std::getenv("NCCL_NET");
  const char* count_env = std::getenv("NCCL_NET_PLUGIN_REF_COUNT");
  const bool keeps_name = cycle == 0 || (count_env != nullptr && std::atoi(count_env) >= 1);
  Loaded lib;
  if (!resolve(keeps_name ? std::getenv("NCCL_NET_PLUGIN") : nullptr, want_env ? want_env : "Tally",
               &lib, why)) {
    if (!keeps_name) {
      *why +=
          "(NCCL 2.27 to 2.29 forget the plugin's name when the last communicator is "
          "destroyed; NCCL_NET_PLUGIN_REF_COUNT=1 keeps it)";
    }
    return false;
  }
  if (rank == 0 && cycle == 0) std::printf("rank 0: loaded %s\n", lib.file.c_str());
  const uint64_t comm_base = 0x7a11e000ull + static_cast<uint64_t>(cycle) * 16;
  ncclNetCommConfig_v11_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  void* net_ctx = nullptr;
  int ndev = 0, ncoll = 0;
  auto fail = [&](const std::string& what) {
    *why = what;
    return false;
  };
  if (lib.coll == nullptr) return fail("no " TALLY_COLLNET_PLUGIN_SYMBOL_V11);
  if (lib.net->init(&net_ctx, comm_base, &config, quietLogger, nullptr) != ncclSuccess ||
      lib.net->devices(&ndev) != ncclSuccess || ndev < 1) {
    return fail("net init/devices failed (" + std::to_string(ndev) + " devices)");
  }
  std::vector<void*> coll_ctx(static_cast<size_t>(o.comms), nullptr);
  std::vector<CommRun> runs(static_cast<size_t>(o.comms));
  const size_t count = 262147;  // 1 MiB and 3 elements: the last slice is a short one
  for (int c = 0; c < o.comms; ++c) {
    CommRun& run = runs[static_cast<size_t>(c)];
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    if (lib.coll->init(&coll_ctx[static_cast<size_t>(c)], comm_base + static_cast<uint64_t>(c),
                       quietLogger) != ncclSuccess ||
        lib.coll->devices(&ncoll) != ncclSuccess || ncoll < 1) {
      return fail("CollNet init/devices failed (" + std::to_string(ncoll) +
                  " devices; is TALLY_REDUCERS set?)");
    }
    if (lib.coll->listen(coll_ctx[static_cast<size_t>(c)], 0, handle, &run.listen) != ncclSuccess) {
      return fail("CollNet listen failed");
    }
    const std::string prefix = dir + "/c" + std::to_string(cycle) + "." + std::to_string(c) + ".";
    if (!writeFileAtomically(prefix + std::to_string(rank), handle, sizeof(handle))) {
      return fail("cannot write the handle file in " + dir);
    }
    std::vector<std::vector<char>> all(static_cast<size_t>(o.ranks),
                                       std::vector<char>(NCCL_NET_HANDLE_MAXSIZE));
    std::vector<void*> handles;
    for (int r = 0; r < o.ranks; ++r) {
      if (!readFileWithin(prefix + std::to_string(r), all[static_cast<size_t>(r)].data(),
                          NCCL_NET_HANDLE_MAXSIZE, end)) {
        return fail("rank " + std::to_string(r) + "'s handle did not appear in time");
      }
      handles.push_back(all[static_cast<size_t>(r)].data());
    }
    if (lib.coll->connect(handles.data(), o.ranks, rank, run.listen, &run.comm) != ncclSuccess ||
        run.comm == nullptr) {
      return fail("CollNet connect of comm " + std::to_string(c) + " failed");
    }
    lib.coll->closeListen(run.listen);  // NCCL closes it right after a successful connect
    run.send.resize(count);
    run.recv.assign(count, 0xdeadbeef);
    for (size_t i = 0; i < count; ++i) run.send[i] = inputBits(c, rank, i);
    if (lib.coll->regMr(run.comm, run.send.data(), count * 4, NCCL_PTR_HOST, &run.send_mh) !=
            ncclSuccess ||
        lib.coll->regMr(run.comm, run.recv.data(), count * 4, NCCL_PTR_HOST, &run.recv_mh) !=
            ncclSuccess) {
      return fail("regMr failed");
    }
  }
  // Post on every comm before waiting on any: the communicators run at the same time.
  for (int c = 0; c < o.comms; ++c) {
    CommRun& run = runs[static_cast<size_t>(c)];
    while (run.request == nullptr) {
      const ncclResult_t posted = lib.coll->iallreduce(
          run.comm, run.send.data(), run.recv.data(), count, c % 2 ? ncclInt32 : ncclFloat32,
          c % 2 ? ncclMax : ncclSum, run.send_mh, run.recv_mh, &run.request);
      if (posted != ncclSuccess) return fail("iallreduce returned " + std::to_string(posted));
      if (Clock::now() > end) return fail("iallreduce never accepted the call");
    }
  }
  for (int pending = o.comms; pending > 0;) {
    for (CommRun& run : runs) {
      int done = 0, size = 0;
      if (run.done) continue;
      if (lib.coll->test(run.request, &done, &size) != ncclSuccess) return fail("test failed");
      if (done) {
        run.done = true;
        --pending;
      }
    }
    if (Clock::now() > end) return fail("all-reduce did not finish in time");
  }
  for (int c = 0; c < o.comms; ++c) {
    const CommRun& run = runs[static_cast<size_t>(c)];
    for (size_t i = 0; i < count; ++i) {
      if (run.recv[i] != expectedBits(c, o.ranks, i)) {
        return fail("comm " + std::to_string(c) + " element " + std::to_string(i) + " wrong");
      }
    }
  }
  for (int c = 0; c < o.comms; ++c) {
    CommRun& run = runs[static_cast<size_t>(c)];
    if (lib.coll->deregMr(run.comm, run.send_mh) != ncclSuccess ||
        lib.coll->deregMr(run.comm, run.recv_mh) != ncclSuccess ||
        lib.coll->closeColl(run.comm) != ncclSuccess ||
        lib.coll->finalize(coll_ctx[static_cast<size_t>(c)]) != ncclSuccess) {
      return fail("CollNet teardown of comm " + std::to_string(c) + " failed");
    }
  }
  if (lib.net->finalize(net_ctx) != ncclSuccess) return fail("net finalize failed");
  dlclose(lib.handle);
  // NCCL may unmap the library now: nothing of it may still run.
  int threads = threadCount();
  for (int i = 0; i < 200 && threads > 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    threads = threadCount();
  }
  if (threads > 1) return fail(std::to_string(threads - 1) + " thread(s) left after finalize");
  void* still = lib.file.empty() || lib.file[0] != '/'
                    ? nullptr
                    : dlopen(lib.file.c_str(), RTLD_NOW | RTLD_NOLOAD);
  const bool mapped = still != nullptr;
  if (still != nullptr) dlclose(still);
  std::printf("rank %d cycle %d: %d comm(s) checked, no thread left, library %s\n", rank, cycle,
              o.comms, mapped ? "still mapped" : "unloaded");
  return true;
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    int* target = arg == "--ranks"       ? &o->ranks
                  : arg == "--cycles"    ? &o->cycles
                  : arg == "--comms"     ? &o->comms
                  : arg == "--timeout-s" ? &o->timeout_s
                                         : nullptr;
    if (target == nullptr || i + 1 >= argc) return false;
    *target = std::atoi(argv[++i]);
    if (*target < 1 || *target > 64) return false;
  }
  return o->ranks >= 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: %s [--ranks N>=2] [--cycles K] [--comms C] [--timeout-s T] (1..64)\n",
                 argv[0]);
    return 2;
  }
  char dir_template[] = "/tmp/tally-plugin-cycle.XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  std::fflush(stdout);
  std::vector<pid_t> children;
  for (int rank = 0; rank < o.ranks; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      for (int cycle = 0; cycle < o.cycles; ++cycle) {
        std::string why;
        if (!runCycle(o, rank, cycle, dir, &why)) {
          std::printf("rank %d cycle %d: FAIL %s\n", rank, cycle, why.c_str());
          std::fflush(stdout);
          _exit(1);
        }
        std::fflush(stdout);
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  // Every rank has its own bound; this one catches a rank stuck inside the plugin.
  const Clock::time_point end = Clock::now() + std::chrono::seconds(o.timeout_s) * (o.cycles + 1);
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (Clock::now() > end) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        std::printf("a rank did not finish in time: killed\n");
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  const char* plugin_env = std::getenv("NCCL_NET_PLUGIN");
  std::printf("plugin_cycle: %s NCCL_NET_PLUGIN=%s, %d ranks x %d cycles x %d comms%s\n",
              failed ? "FAIL" : "PASS", plugin_env ? plugin_env : "(unset)", o.ranks, o.cycles,
              o.comms, failed ? (", " + std::to_string(failed) + " rank(s) failed").c_str() : "");
  return failed ? 1 : 0;
}
