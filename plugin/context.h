// Per-communicator contexts handed to NCCL by v11 init and taken back by finalize.
//
// NCCL calls finalize even when init failed, with a ctx init never wrote (reference 11.3). So a
// ctx is only deleted when this registry knows it: finalize of an unknown pointer (NULL, stale or
// never set) is accepted and ignored. Pre-v11 tables have no ctx; their adapters pass nullptr.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace tally::plugin {

struct CommContext {
  uint64_t comm_id = 0;
  int traffic_class = -1;  // NCCL_NET_TRAFFIC_CLASS_UNDEF; Tally does not use it
  bool coll = false;
};

// Thread-safe.
class ContextRegistry {
 public:
  CommContext* create(uint64_t comm_id, int traffic_class, bool coll) {
    auto ctx = std::make_unique<CommContext>();
    ctx->comm_id = comm_id;
    ctx->traffic_class = traffic_class;
    ctx->coll = coll;
    CommContext* raw = ctx.get();
    std::lock_guard<std::mutex> lock(mu_);
    live_.emplace(raw, std::move(ctx));
    return raw;
  }
  // True when ctx was live (and is now destroyed).
  bool destroy(const void* ctx) {
    std::unique_ptr<CommContext> owned;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ctx);
    if (it == live_.end()) return false;
    owned = std::move(it->second);
    live_.erase(it);
    return true;
  }
  bool contains(const void* ctx) const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.count(ctx) != 0;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
  }

  // The registry the C entry points use.
  static ContextRegistry& instance() {
    static ContextRegistry registry;
    return registry;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<const void*, std::unique_ptr<CommContext>> live_;
};

}  // namespace tally::plugin
