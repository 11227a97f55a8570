// SPDX-License-Identifier: Apache-2.0
// PluginLibrary: a built net plugin opened the way NCCL opens it (dlopen RTLD_NOW | RTLD_LOCAL,
// dlsym of ncclNetPlugin_vN / ncclCollNetPlugin_vN), and version-free views of its tables so the
// same driver code and tests run against v8 to v12.
//
// The views keep NCCL's calling conventions and return ncclResult_t unchanged, so tests can check
// exact codes. What differs between versions is absorbed here:
//   - init: v11 and v12 return a per-communicator ctx; older tables are initialized once per view
//     and hand back a dummy non-NULL ctx. finalize(ctx) is a no-op before v11.
//   - listen/connect take the ctx from v11 on; net connect gets a default config on v10.
//   - sizes are size_t; a v8 table is given int sizes and a size above INT_MAX fails with
//     ncclInternalError without calling the plugin.
//   - properties are converted to one NetProperties struct (fields a version lacks stay 0, the
//     rail and plane ids -1).
//   - CollNet iallgather/ireducescatter take one SGE type (CollSge); a v8 table gets its own
//     (32-bit sizes) under the limits NCCL 2.30 puts on v8 plugins.
// A view holds a pointer into the library: the PluginLibrary must outlive every view. Views are
// as thread-safe as the plugin (NCCL calls from several threads), except init, which a caller
// must not race with itself before v11.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "plugin/abi/abi.h"

namespace tally::driver {

// Maps a plugin result to a Status for driver code: "<what>: ncclRemoteError (6)".
Status ncclStatus(ncclResult_t result, const std::string& what);
const char* ncclResultName(ncclResult_t result);

// The logger handed to init: WARN lines go to stderr, INFO and TRACE only at higher levels.
void setPluginLogLevel(ncclDebugLogLevel level);
// Also hands every WARN line's text to `hook` (tests read what NCCL's log would show). Set it
// before the plugin is loaded; it runs on the plugin's threads.
void setPluginWarnHook(std::function<void(const char*)> hook);
void pluginLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                  const char* fmt, ...) __attribute__((format(printf, 5, 6)));

struct NetProperties {
  std::string name;
  std::string pci_path;
  uint64_t guid = 0;
  int ptr_support = 0;
  int reg_is_global = 0;
  int force_flush = 0;  // v9+
  int speed = 0;
  int port = 0;
  float latency = 0;
  int max_comms = 0;
  int max_recvs = 0;
  int net_device_type = 0;
  int net_device_version = 0;
  int vdevs = 0;                   // v9+: vProps.ndevs
  size_t max_p2p_bytes = 0;        // v9+
  size_t max_coll_bytes = 0;       // v9+
  int max_multi_request_size = 0;  // v11+
  int rail_id = -1;                // v12: NCCL_NET_ID_UNDEF (-1) before v12
  int plane_id = -1;               // v12: NCCL_NET_ID_UNDEF (-1) before v12
};

// One scatter-gather element of a CollNet all-gather or reduce-scatter (ncclNetSGE_vN_t with a
// size_t size).
struct CollSge {
  void* mhandle;
  void* address;
  size_t size;
};

class NetApi {
 public:
  virtual ~NetApi() = default;
  virtual int version() const = 0;
  virtual const char* name() const = 0;
  virtual ncclResult_t init(uint64_t comm_id, void** ctx) = 0;
  virtual ncclResult_t finalize(void* ctx) = 0;
  virtual ncclResult_t devices(int* ndev) = 0;
  virtual ncclResult_t getProperties(int dev, NetProperties* props) = 0;
  virtual ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) = 0;
  virtual ncclResult_t connect(void* ctx, int dev, void* handle, void** send_comm) = 0;
  virtual ncclResult_t accept(void* listen_comm, void** recv_comm) = 0;
  virtual ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) = 0;
  virtual ncclResult_t deregMr(void* comm, void* mhandle) = 0;
  virtual ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                             void** request) = 0;
  virtual ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, int* tags,
                             void** mhandles, void** request) = 0;
  virtual ncclResult_t test(void* request, int* done, int* sizes) = 0;
  virtual ncclResult_t closeSend(void* send_comm) = 0;
  virtual ncclResult_t closeRecv(void* recv_comm) = 0;
  virtual ncclResult_t closeListen(void* listen_comm) = 0;
};

class CollNetApi {
 public:
  virtual ~CollNetApi() = default;
  virtual int version() const = 0;
  virtual const char* name() const = 0;
  virtual ncclResult_t init(uint64_t comm_id, void** ctx) = 0;
  virtual ncclResult_t finalize(void* ctx) = 0;
  virtual ncclResult_t devices(int* ndev) = 0;
  virtual ncclResult_t getProperties(int dev, NetProperties* props) = 0;
  virtual ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) = 0;
  virtual ncclResult_t connect(void* handles[], int nranks, int rank, void* listen_comm,
                               void** coll_comm) = 0;
  virtual ncclResult_t reduceSupport(ncclDataType_t type, ncclRedOp_t op, int* supported) = 0;
  virtual ncclResult_t regMr(void* coll_comm, void* data, size_t size, int type,
                             void** mhandle) = 0;
  virtual ncclResult_t deregMr(void* coll_comm, void* mhandle) = 0;
  virtual ncclResult_t iallreduce(void* coll_comm, void* send, void* recv, size_t count,
                                  ncclDataType_t type, ncclRedOp_t op, void* send_mhandle,
                                  void* recv_mhandle, void** request) = 0;
  // The table's iallgather / ireducescatter, with NCCL's arguments. When the slot is NULL they
  // return ncclInternalError without calling anything (a CallingNccl::k230 view calls the slot
  // unchecked instead). A v8 table refuses more than one part and a part over 512 MiB
  // (ncclInternalError, the plugin is not called), as NCCL's v8 adapter does.
  virtual ncclResult_t iallgather(void* coll_comm, void* send, int n_recv_parts,
                                  CollSge* recv_parts, size_t bytes_per_rank, size_t window_offset,
                                  size_t window_bytes, void* send_mhandle, void** request) = 0;
  virtual ncclResult_t ireducescatter(void* coll_comm, int n_send_parts, CollSge* send_parts,
                                      void* recv, size_t bytes_per_rank, size_t window_offset,
                                      size_t window_bytes, ncclDataType_t type, ncclRedOp_t op,
                                      void* recv_mhandle, void** request) = 0;
  // Whether NCCL would offer AllGather / ReduceScatter to this table: its slot is non-NULL, or
  // always for a CallingNccl::k230 view of v8 to v11.
  virtual bool hasAllGather() const = 0;
  virtual bool hasReduceScatter() const = 0;
  virtual ncclResult_t test(void* request, int* done, int* size) = 0;
  virtual ncclResult_t closeColl(void* coll_comm) = 0;
  virtual ncclResult_t closeListen(void* listen_comm) = 0;
};

// Which NCCL's handling of the CollNet iallgather / ireducescatter slots a view reproduces:
//   k228: the table as it is: hasAllGather() / hasReduceScatter() say whether the slot is
//         non-NULL, and calling a NULL slot returns ncclInternalError. This is how NCCL 2.28 and
//         2.29 treat a v11 table, and how 2.30 treats a v12 one: a NULL slot keeps that collective
//         off CollNet.
//   k230: NCCL 2.30's adapters for v8 to v11 (2.28 had them for v8 to v10 already): they always
//         install wrappers, so both has*() are true, and the wrappers call the plugin's slot
//         without checking it, so a NULL slot crashes the caller. For v12 the same as k228.
enum class CallingNccl { k228, k230 };

class PluginLibrary {
 public:
  // dlopen(path, RTLD_NOW | RTLD_LOCAL). kSystem with dlerror() on failure.
  static Status open(const std::string& path, std::unique_ptr<PluginLibrary>* out);
  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  const std::string& path() const { return path_; }
  // The table versions this driver understands (8..12) that the library exports.
  std::vector<int> netVersions() const;
  std::vector<int> collNetVersions() const;
  // kInvalidUsage when the library does not export that version or the driver does not know it.
  Status net(int version, std::unique_ptr<NetApi>* out) const;
  Status collNet(int version, std::unique_ptr<CollNetApi>* out,
                 CallingNccl nccl = CallingNccl::k228) const;

 private:
  PluginLibrary(std::string path, void* handle) : path_(std::move(path)), handle_(handle) {}
  void* symbol(const std::string& name) const;
  std::string path_;
  void* handle_;
};

inline constexpr int kMinTableVersion = 8;
inline constexpr int kMaxTableVersion = 12;

}  // namespace tally::driver
