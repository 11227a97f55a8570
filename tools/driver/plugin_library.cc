// SPDX-License-Identifier: Apache-2.0
#include "tools/driver/plugin_library.h"

#include <dlfcn.h>

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <type_traits>

namespace tally::driver {
namespace {

std::atomic<int> g_log_level{NCCL_LOG_WARN};

// Any non-NULL value serves as the ctx of a table without per-communicator init (v8..v10).
int g_dummy_ctx;

template <int V>
struct Tables;
template <>
struct Tables<8> {
  using Net = ncclNet_v8_t;
  using Coll = ncclCollNet_v8_t;
  using Props = ncclNetProperties_v8_t;
};
template <>
struct Tables<9> {
  using Net = ncclNet_v9_t;
  using Coll = ncclCollNet_v9_t;
  using Props = ncclNetProperties_v9_t;
};
template <>
struct Tables<10> {
  using Net = ncclNet_v10_t;
  using Coll = ncclCollNet_v10_t;
  using Props = ncclNetProperties_v10_t;
};
template <>
struct Tables<11> {
  using Net = ncclNet_v11_t;
  using Coll = ncclCollNet_v11_t;
  using Props = ncclNetProperties_v11_t;
};
template <>
struct Tables<12> {
  using Net = ncclNet_v12_t;
  using Coll = ncclCollNet_v12_t;
  using Props = ncclNetProperties_v12_t;
};

// The largest part NCCL's v8 CollNet adapter passes on (its SGE size is 32 bits).
constexpr size_t kMaxV8PartBytes = size_t{512} << 20;

// FunctionArg<R (*)(A...), I>::type is the I-th parameter type of a function pointer type.
template <typename F, size_t I>
struct FunctionArg;
template <typename R, typename... A, size_t I>
struct FunctionArg<R (*)(A...), I> {
  using type = std::tuple_element_t<I, std::tuple<A...>>;
};

template <int V>
void convertProps(const typename Tables<V>::Props& p, NetProperties* out) {
  NetProperties r;
  r.name = p.name ? p.name : "";
  r.pci_path = p.pciPath ? p.pciPath : "";
  r.guid = p.guid;
  r.ptr_support = p.ptrSupport;
  r.reg_is_global = p.regIsGlobal;
  r.speed = p.speed;
  r.port = p.port;
  r.latency = p.latency;
  r.max_comms = p.maxComms;
  r.max_recvs = p.maxRecvs;
  r.net_device_type = p.netDeviceType;
  r.net_device_version = p.netDeviceVersion;
  if constexpr (V >= 9) {
    r.force_flush = p.forceFlush;
    r.vdevs = p.vProps.ndevs;
    r.max_p2p_bytes = p.maxP2pBytes;
    r.max_coll_bytes = p.maxCollBytes;
  }
  if constexpr (V >= 11) r.max_multi_request_size = p.maxMultiRequestSize;
  if constexpr (V >= 12) {
    r.rail_id = p.railId;
    r.plane_id = p.planeId;
  }
  *out = std::move(r);
}

// Initializes a pre-v11 table once per view; later calls return the first result.
class OnceInit {
 public:
  template <typename F>
  ncclResult_t run(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) {
      result_ = f();
      done_ = true;
    }
    return result_;
  }

 private:
  std::mutex mu_;
  bool done_ = false;
  ncclResult_t result_ = ncclSuccess;
};

template <int V>
class NetView final : public NetApi {
 public:
  using Table = typename Tables<V>::Net;
  explicit NetView(const Table* t) : t_(t) {}

  int version() const override { return V; }
  const char* name() const override { return t_->name; }

  ncclResult_t init(uint64_t comm_id, void** ctx) override {
    if constexpr (V >= 11) {
      ncclNetCommConfig_v11_t config = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
      return t_->init(ctx, comm_id, &config, &pluginLogger, nullptr);
    } else {
      (void)comm_id;
      ncclResult_t r = once_.run([&] {
        if constexpr (V == 10) {
          return t_->init(&pluginLogger, nullptr);
        } else {
          return t_->init(&pluginLogger);
        }
      });
      if (r == ncclSuccess) *ctx = &g_dummy_ctx;
      return r;
    }
  }
  ncclResult_t finalize(void* ctx) override {
    if constexpr (V >= 11) {
      return t_->finalize(ctx);
    } else {
      (void)ctx;
      return ncclSuccess;
    }
  }
  ncclResult_t devices(int* ndev) override { return t_->devices(ndev); }
  ncclResult_t getProperties(int dev, NetProperties* props) override {
    typename Tables<V>::Props p;
    std::memset(&p, 0, sizeof(p));
    ncclResult_t r = t_->getProperties(dev, &p);
    if (r == ncclSuccess) convertProps<V>(p, props);
    return r;
  }
  ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) override {
    if constexpr (V >= 11) {
      return t_->listen(ctx, dev, handle, listen_comm);
    } else {
      (void)ctx;
      return t_->listen(dev, handle, listen_comm);
    }
  }
  ncclResult_t connect(void* ctx, int dev, void* handle, void** send_comm) override {
    ncclNetDeviceHandle_v7_t* dev_comm = nullptr;
    if constexpr (V >= 11) {
      return t_->connect(ctx, dev, handle, send_comm, &dev_comm);
    } else if constexpr (V == 10) {
      (void)ctx;
      ncclNetCommConfig_v10_t config = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
      return t_->connect(dev, &config, handle, send_comm, &dev_comm);
    } else {
      (void)ctx;
      return t_->connect(dev, handle, send_comm, &dev_comm);
    }
  }
  ncclResult_t accept(void* listen_comm, void** recv_comm) override {
    ncclNetDeviceHandle_v7_t* dev_comm = nullptr;
    return t_->accept(listen_comm, recv_comm, &dev_comm);
  }
  ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    return t_->regMr(comm, data, size, type, mhandle);
  }
  ncclResult_t deregMr(void* comm, void* mhandle) override { return t_->deregMr(comm, mhandle); }
  ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                     void** request) override {
    if constexpr (V == 8) {
      if (size > static_cast<size_t>(INT_MAX)) return ncclInternalError;
      return t_->isend(send_comm, data, static_cast<int>(size), tag, mhandle, request);
    } else if constexpr (V == 9) {
      return t_->isend(send_comm, data, size, tag, mhandle, request);
    } else {
      return t_->isend(send_comm, data, size, tag, mhandle, nullptr, request);
    }
  }
  ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, int* tags,
                     void** mhandles, void** request) override {
    if (n < 0 || n > 64) return ncclInternalError;
    if constexpr (V == 8) {
      int isizes[64];
      for (int i = 0; i < n; ++i) {
        if (sizes[i] > static_cast<size_t>(INT_MAX)) return ncclInternalError;
        isizes[i] = static_cast<int>(sizes[i]);
      }
      return t_->irecv(recv_comm, n, data, isizes, tags, mhandles, request);
    } else {
      size_t copy[64];
      for (int i = 0; i < n; ++i) copy[i] = sizes[i];
      if constexpr (V == 9) {
        return t_->irecv(recv_comm, n, data, copy, tags, mhandles, request);
      } else {
        void* phandles[64] = {};
        return t_->irecv(recv_comm, n, data, copy, tags, mhandles, phandles, request);
      }
    }
  }
  ncclResult_t test(void* request, int* done, int* sizes) override {
    return t_->test(request, done, sizes);
  }
  ncclResult_t closeSend(void* c) override { return t_->closeSend(c); }
  ncclResult_t closeRecv(void* c) override { return t_->closeRecv(c); }
  ncclResult_t closeListen(void* c) override { return t_->closeListen(c); }

 private:
  const Table* t_;
  OnceInit once_;
};

template <int V>
class CollView final : public CollNetApi {
 public:
  using Table = typename Tables<V>::Coll;
  // wrapped: the slots are seen through NCCL 2.30's adapter (CallingNccl::k230), never NULL.
  CollView(const Table* t, bool wrapped) : t_(t), wrapped_(wrapped) {}

  int version() const override { return V; }
  const char* name() const override { return t_->name; }

  ncclResult_t init(uint64_t comm_id, void** ctx) override {
    if constexpr (V >= 11) {
      return t_->init(ctx, comm_id, &pluginLogger);
    } else {
      (void)comm_id;
      ncclResult_t r = once_.run([&] { return t_->init(&pluginLogger); });
      if (r == ncclSuccess) *ctx = &g_dummy_ctx;
      return r;
    }
  }
  ncclResult_t finalize(void* ctx) override {
    if constexpr (V >= 11) {
      return t_->finalize(ctx);
    } else {
      (void)ctx;
      return ncclSuccess;
    }
  }
  ncclResult_t devices(int* ndev) override { return t_->devices(ndev); }
  ncclResult_t getProperties(int dev, NetProperties* props) override {
    typename Tables<V>::Props p;
    std::memset(&p, 0, sizeof(p));
    ncclResult_t r = t_->getProperties(dev, &p);
    if (r == ncclSuccess) convertProps<V>(p, props);
    return r;
  }
  ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) override {
    if constexpr (V >= 11) {
      return t_->listen(ctx, dev, handle, listen_comm);
    } else {
      (void)ctx;
      return t_->listen(dev, handle, listen_comm);
    }
  }
  ncclResult_t connect(void* handles[], int nranks, int rank, void* listen_comm,
                       void** coll_comm) override {
    return t_->connect(handles, nranks, rank, listen_comm, coll_comm);
  }
  ncclResult_t reduceSupport(ncclDataType_t type, ncclRedOp_t op, int* supported) override {
    return t_->reduceSupport(type, op, supported);
  }
  ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    return t_->regMr(comm, data, size, type, mhandle);
  }
  ncclResult_t deregMr(void* comm, void* mhandle) override { return t_->deregMr(comm, mhandle); }
  ncclResult_t iallreduce(void* comm, void* send, void* recv, size_t count, ncclDataType_t type,
                          ncclRedOp_t op, void* send_mhandle, void* recv_mhandle,
                          void** request) override {
    if constexpr (V == 8) {
      if (count > static_cast<size_t>(INT_MAX)) return ncclInternalError;
      return t_->iallreduce(comm, send, recv, static_cast<int>(count), type, op, send_mhandle,
                            recv_mhandle, request);
    } else {
      return t_->iallreduce(comm, send, recv, count, type, op, send_mhandle, recv_mhandle, request);
    }
  }
  ncclResult_t iallgather(void* comm, void* send, int n_recv_parts, CollSge* recv_parts,
                          size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
                          void* send_mhandle, void** request) override {
    if (!hasAllGather()) return ncclInternalError;
    Parts parts;
    ncclResult_t r = parts.convert(n_recv_parts, recv_parts);
    if (r != ncclSuccess) return r;
    // Through NCCL 2.30's adapter a NULL slot is called all the same: that is the crash.
    return t_->iallgather(comm, send, n_recv_parts, parts.data(), bytes_per_rank, window_offset,
                          window_bytes, send_mhandle, request);
  }
  ncclResult_t ireducescatter(void* comm, int n_send_parts, CollSge* send_parts, void* recv,
                              size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
                              ncclDataType_t type, ncclRedOp_t op, void* recv_mhandle,
                              void** request) override {
    if (!hasReduceScatter()) return ncclInternalError;
    Parts parts;
    ncclResult_t r = parts.convert(n_send_parts, send_parts);
    if (r != ncclSuccess) return r;
    return t_->ireducescatter(comm, n_send_parts, parts.data(), recv, bytes_per_rank, window_offset,
                              window_bytes, type, op, recv_mhandle, request);
  }
  bool hasAllGather() const override { return wrapped_ || t_->iallgather != nullptr; }
  bool hasReduceScatter() const override { return wrapped_ || t_->ireducescatter != nullptr; }
  ncclResult_t test(void* request, int* done, int* size) override {
    return t_->test(request, done, size);
  }
  ncclResult_t closeColl(void* c) override { return t_->closeColl(c); }
  ncclResult_t closeListen(void* c) override { return t_->closeListen(c); }

 private:
  // The table's own SGE type, which iallgather's fourth parameter points to.
  using Sge = std::remove_pointer_t<typename FunctionArg<decltype(Table::iallgather), 3>::type>;

  // The caller's parts in the table's SGE type. v8 takes at most one part of at most 512 MiB,
  // the limits NCCL's v8 adapter enforces before it calls the plugin.
  class Parts {
   public:
    ncclResult_t convert(int n, const CollSge* in) {
      if (n < 0 || (n > 0 && in == nullptr)) return ncclInternalError;
      if constexpr (V == 8) {
        if (n > 1 || (n == 1 && in[0].size > kMaxV8PartBytes)) return ncclInternalError;
      }
      parts_.resize(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        Sge& out = parts_[static_cast<size_t>(i)];
        out.mhandle = in[i].mhandle;
        out.address = in[i].address;
        out.size = static_cast<decltype(out.size)>(in[i].size);
      }
      return ncclSuccess;
    }
    Sge* data() { return parts_.empty() ? nullptr : parts_.data(); }

   private:
    std::vector<Sge> parts_;
  };

  const Table* t_;
  const bool wrapped_;
  OnceInit once_;
};

std::string netSymbol(int version) { return "ncclNetPlugin_v" + std::to_string(version); }
std::string collSymbol(int version) { return "ncclCollNetPlugin_v" + std::to_string(version); }

// Makes View<version> over the table at `sym`, constructed with (table, extra...).
template <template <int> class View, typename Api, int V = kMinTableVersion, typename... Extra>
Status makeView(int version, void* sym, std::unique_ptr<Api>* out, Extra... extra) {
  if constexpr (V > kMaxTableVersion) {
    (void)sym;
    (void)out;
    ((void)extra, ...);
    return Status::invalidUsage("table version " + std::to_string(version) + " is unknown");
  } else {
    if (version != V) return makeView<View, Api, V + 1>(version, sym, out, extra...);
    *out = std::make_unique<View<V>>(static_cast<const typename View<V>::Table*>(sym), extra...);
    return Status::ok();
  }
}

}  // namespace

const char* ncclResultName(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "unknown ncclResult_t";
  }
}

Status ncclStatus(ncclResult_t result, const std::string& what) {
  if (result == ncclSuccess) return Status::ok();
  std::string m = what + ": " + ncclResultName(result) + " (" + std::to_string(result) + ")";
  switch (result) {
    case ncclRemoteError:
      return Status::remote(std::move(m));
    case ncclSystemError:
      return Status::system(std::move(m));
    case ncclInvalidUsage:
      return Status::invalidUsage(std::move(m));
    default:
      return Status::internal(std::move(m));
  }
}

void setPluginLogLevel(ncclDebugLogLevel level) { g_log_level.store(level); }

namespace {
// Read by every logging thread of the plugin, set once by a test before the plugin is loaded.
std::function<void(const char*)>& warnHook() {
  static std::function<void(const char*)> hook;
  return hook;
}
}  // namespace

void setPluginWarnHook(std::function<void(const char*)> hook) { warnHook() = std::move(hook); }

void pluginLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                  const char* fmt, ...) {
  (void)flags;
  if (level == NCCL_LOG_NONE || level > g_log_level.load(std::memory_order_relaxed)) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  const char* lvl = level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_INFO ? "INFO" : "TRACE";
  const char* base = file ? std::strrchr(file, '/') : nullptr;
  std::fprintf(stderr, "plugin %s %s:%d %s\n", lvl, base ? base + 1 : (file ? file : "?"), line,
               buf);
  if (level == NCCL_LOG_WARN && warnHook()) warnHook()(buf);
}

Status PluginLibrary::open(const std::string& path, std::unique_ptr<PluginLibrary>* out) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = ::dlerror();
    return Status::system("dlopen " + path + ": " + (err ? err : "unknown error"));
  }
  out->reset(new PluginLibrary(path, handle));
  return Status::ok();
}

PluginLibrary::~PluginLibrary() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

void* PluginLibrary::symbol(const std::string& name) const {
  return ::dlsym(handle_, name.c_str());
}

std::vector<int> PluginLibrary::netVersions() const {
  std::vector<int> v;
  for (int n = kMinTableVersion; n <= kMaxTableVersion; ++n) {
    if (symbol(netSymbol(n)) != nullptr) v.push_back(n);
  }
  return v;
}

std::vector<int> PluginLibrary::collNetVersions() const {
  std::vector<int> v;
  for (int n = kMinTableVersion; n <= kMaxTableVersion; ++n) {
    if (symbol(collSymbol(n)) != nullptr) v.push_back(n);
  }
  return v;
}

Status PluginLibrary::net(int version, std::unique_ptr<NetApi>* out) const {
  void* sym = symbol(netSymbol(version));
  if (sym == nullptr) return Status::invalidUsage(path_ + " does not export " + netSymbol(version));
  return makeView<NetView, NetApi>(version, sym, out);
}

Status PluginLibrary::collNet(int version, std::unique_ptr<CollNetApi>* out,
                              CallingNccl nccl) const {
  void* sym = symbol(collSymbol(version));
  if (sym == nullptr)
    return Status::invalidUsage(path_ + " does not export " + collSymbol(version));
  // NCCL 2.30 wraps v8 to v11 and uses v12 as it is.
  const bool wrapped = nccl == CallingNccl::k230 && version <= 11;
  return makeView<CollView, CollNetApi>(version, sym, out, wrapped);
}

}  // namespace tally::driver
