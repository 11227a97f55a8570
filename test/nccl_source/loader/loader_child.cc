// SPDX-License-Identifier: Apache-2.0
// The NCCL side of the loader tests (loader_child.h): compiled against one NCCL version's headers
// and linked with that version's own loader files, so every decision below the ncclNetInit and
// ncclNetFinalize calls is NCCL's.
#include "test/nccl_source/loader/loader_child.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <map>
#include <string>

#include "comm.h"
#include "net.h"
#include "test/nccl_source/stubs/captured_log.h"

#if NCCL_VERSION_CODE >= 22800
#include "coll_net.h"
#endif

#ifndef TALLY_NCCL_PLUGIN_FOLDER_LOADER
#error "the build says which loader this NCCL has"
#endif

#if !TALLY_NCCL_PLUGIN_FOLDER_LOADER
// NCCL before the plugin folder: ncclInit loads the library once per process.
ncclResult_t ncclNetPluginInit();
#endif

namespace tally::nccl_source {
namespace {

// The exported symbol `table` is, when NCCL uses the plugin's table as it is; "adapter" when the
// pointer is a table of NCCL's own; "-" for none.
std::string tableName(const void* table) {
  if (table == nullptr) return "-";
  Dl_info info;
  if (dladdr(table, &info) == 0 || info.dli_sname == nullptr || info.dli_saddr != table) {
    return "adapter";
  }
  const std::string symbol = info.dli_sname;
  if (symbol.rfind("ncclNetPlugin_v", 0) == 0 || symbol.rfind("ncclCollNetPlugin_v", 0) == 0) {
    return symbol;
  }
  return "adapter";
}

// Whether a mapped object is the file at `path` (by device and inode: NCCL may have opened it
// through another name, such as libnccl-net.so).
bool isMapped(const char* path) {
  struct stat want;
  if (stat(path, &want) != 0) return false;
  struct Search {
    struct stat want;
    bool found = false;
  } search{want, false};
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        struct stat st;
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0' &&
            stat(info->dlpi_name, &st) == 0 && st.st_dev == s->want.st_dev &&
            st.st_ino == s->want.st_ino) {
          s->found = true;
        }
        return 0;
      },
      &search);
  return search.found;
}

// What NCCL's communicator init computes as this rank's CollNet device count (compared across
// ranks by NCCL 2.30).
int collNetDeviceCount(ncclComm* comm) {
  if (comm->ncclCollNet == nullptr) return 0;
  int ndev = 0;
#if NCCL_VERSION_CODE >= 22800
  if (collNetDevices(comm, &ndev) != ncclSuccess) return -1;
#else
  if (comm->ncclCollNet->devices(&ndev) != ncclSuccess) return -1;
#endif
  return ndev;
}

}  // namespace

int loaderNcclVersionCode() { return NCCL_VERSION_CODE; }

int runLoaderScript(const char* script, const char* plugin_path) {
  std::map<std::string, ncclComm*> comms;
  uint64_t next_hash = 0x7a11700000000001ull;
#if !TALLY_NCCL_PLUGIN_FOLDER_LOADER
  if (ncclNetPluginInit() != ncclSuccess) printf("pluginInit failed\n");
#endif
  std::string rest = script;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string step = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    const size_t colon = step.find(':');
    if (colon == std::string::npos) {
      fprintf(stderr, "malformed step '%s'\n", step.c_str());
      return 2;
    }
    const std::string verb = step.substr(0, colon);
    const std::string name = step.substr(colon + 1);
    if (verb == "init") {
      if (comms.count(name) != 0) {
        fprintf(stderr, "communicator %s exists\n", name.c_str());
        return 2;
      }
      // A zeroed communicator with what NCCL's init has set by the time it loads the net.
      auto* comm = static_cast<ncclComm*>(calloc(1, sizeof(ncclComm)));
      comm->config.netName = getenv("NCCL_NET");
#if NCCL_VERSION_CODE >= 22600
      comm->config.trafficClass = NCCL_CONFIG_UNDEF_INT;
      comm->commHash = next_hash++;
#endif
      comms[name] = comm;
      const ncclResult_t rc = ncclNetInit(comm);
      const bool ok = rc == ncclSuccess && comm->ncclNet != nullptr;
      printf("init %s rc=%d net=%s table=%s coll=%s colltable=%s colldevs=%d\n", name.c_str(),
             static_cast<int>(rc), ok ? comm->ncclNet->name : "-",
             ok ? tableName(comm->ncclNet).c_str() : "-",
             ok && comm->ncclCollNet ? comm->ncclCollNet->name : "-",
             ok ? tableName(comm->ncclCollNet).c_str() : "-", ok ? collNetDeviceCount(comm) : 0);
    } else if (verb == "fin") {
      auto it = comms.find(name);
      if (it == comms.end()) {
        fprintf(stderr, "no communicator %s\n", name.c_str());
        return 2;
      }
      ncclResult_t rc = ncclSuccess;
#if TALLY_NCCL_PLUGIN_FOLDER_LOADER
      // ncclCommDestroy finalizes the net of a communicator that has one.
      if (it->second->ncclNet != nullptr) rc = ncclNetFinalize(it->second);
#endif
      free(it->second);
      comms.erase(it);
      printf("fin %s rc=%d loaded=%d\n", name.c_str(), static_cast<int>(rc),
             isMapped(plugin_path) ? 1 : 0);
    } else {
      fprintf(stderr, "unknown step '%s'\n", step.c_str());
      return 2;
    }
    fflush(stdout);
  }
  for (const std::string& line : capturedLog()) printf("log %s\n", line.c_str());
  for (auto& [name, comm] : comms) free(comm);
  fflush(stdout);
  return 0;
}

}  // namespace tally::nccl_source
