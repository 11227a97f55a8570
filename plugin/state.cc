// SPDX-License-Identifier: Apache-2.0
#include "plugin/state.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "common/log.h"
#include "common/strings.h"
#include "plugin/edge.h"

namespace tally::plugin {
namespace {

// The one owner of the process's PluginState: the C entry points reach it only through global(),
// loaded() and globalIfLoaded().
struct GlobalSlot {
  std::mutex mu;
  std::unique_ptr<PluginState> state;
  Status failure;  // sticky load failure
  std::atomic<PluginState*> ready{nullptr};
};

GlobalSlot& globalSlot() {
  static GlobalSlot slot;
  return slot;
}

}  // namespace

CommContext* ContextRegistry::create(uint64_t comm_id, int traffic_class, bool coll) {
  auto ctx = std::make_unique<CommContext>();
  ctx->comm_id = comm_id;
  ctx->traffic_class = traffic_class;
  ctx->coll = coll;
  CommContext* raw = ctx.get();
  std::lock_guard<std::mutex> lock(mu_);
  live_.emplace(raw, std::move(ctx));
  return raw;
}

bool ContextRegistry::destroy(const void* ctx, uint64_t* comm_id) {
  std::unique_ptr<CommContext> owned;  // freed after the lock is released
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ctx);
  if (it == live_.end()) return false;
  owned = std::move(it->second);
  live_.erase(it);
  if (comm_id != nullptr) *comm_id = owned->comm_id;
  return true;
}

std::string ContextRegistry::describeOpen() const {
  size_t coll = 0;
  size_t net = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [ptr, ctx] : live_) ++(ctx->coll ? coll : net);
  }
  return "still open: " + std::to_string(net) + " net, " + std::to_string(coll) + " CollNet";
}

bool ContextRegistry::contains(const void* ctx) const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.count(ctx) != 0;
}

size_t ContextRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

uint64_t PendingConnects::park(std::unique_ptr<transport::PendingConnection> pending) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  pending_.emplace(id, std::move(pending));
  return id;
}

std::unique_ptr<transport::PendingConnection> PendingConnects::take(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(id);
  if (it == pending_.end()) return nullptr;
  std::unique_ptr<transport::PendingConnection> out = std::move(it->second);
  pending_.erase(it);
  return out;
}

size_t PendingConnects::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

ClusterInput ClusterInput::load(const ParamSource& source) {
  ClusterInput input;
  input.status = ClusterEnv::load(source, &input.env);
  return input;
}

PluginState::PluginState(Params params, std::vector<std::shared_ptr<transport::Device>> devices)
    : PluginState(std::move(params), ClusterInput{}, std::move(devices)) {}

PluginState::PluginState(Params params, ClusterInput cluster,
                         std::vector<std::shared_ptr<transport::Device>> devices)
    : PluginState(params, std::move(cluster), transport::networkConfigOf(params),
                  std::move(devices), "tcp") {}

PluginState::PluginState(Params params, ClusterInput cluster,
                         transport::NetworkConfig network_config,
                         std::vector<std::shared_ptr<transport::Device>> devices,
                         const std::string& transport_name)
    : params_(std::move(params)),
      cluster_(std::move(cluster)),
      devices_(std::move(devices)),
      network_config_(std::move(network_config)) {
  reducers_ = resolveReducers(params_, cluster_.env);
  const ClusterSpec* own = cluster_.env.primary();
  if (!cluster_.status) {
    coll_off_reason_ = cluster_.status.message();
  } else if (own != nullptr && own->collRank() < 0) {
    coll_off_reason_ = std::string("this replica is ") +
                       (own->role() == ClusterRole::kReducer ? "a reducer" : "an evaluator") +
                       " (" + own->variable + " task " + own->task_type + " index " +
                       std::to_string(own->index) + "), and only pools 0 and 1 join CollNet";
  } else if (reducers_.addresses.empty()) {
    coll_off_reason_ =
        "no reducers configured (TALLY_REDUCERS, CLUSTER_SPEC workerpool2 and TF_CONFIG ps are "
        "all empty or unset)";
  }

  network_config_.max_requests = kMaxSendRequests;

  coll_options_.reducers = reducers_.addresses;
  coll_options_.slice_bytes = params_.sliceBytes;
  // The slice plan follows the link the reducer connections run over, the one NCCL is told.
  transport::LinkQuery query;
  query.override_mbps = params_.linkMbps;
  if (collEnabled() && params_.collNet) query.peer = reducers_.addresses.front();
  query.over_ip = transport_name == "tcp";
  query.transport = transport_name;
  query.device = devices_.empty() ? nullptr : &devices_.front()->properties();
  coll_link_ = transport::chooseLink(query);
  const protocol::SlicePlan plan = protocol::choosePlan(
      params_.sliceBytes, static_cast<uint32_t>(std::max<int64_t>(0, params_.slicesPerReducer)),
      params_.minSliceBytes, coll_link_.loopback, coll_link_.speed_mbps);
  coll_options_.slices_per_reducer = plan.per_reducer;
  coll_options_.min_slice_bytes = plan.min_slice_bytes;
  coll_options_.window = static_cast<int>(params_.collWindow);
  coll_options_.max_requests = static_cast<int>(params_.collMaxRequests);
  // Checked by Params::validate.
  (void)transport::parseZerocopyMode(trim(params_.zerocopy), &coll_options_.zerocopy);
  coll_options_.zerocopy_min_bytes = params_.zerocopyMinBytes;
  coll_options_.timeouts = network_config_.timeouts;
  coll_options_.job_token = params_.jobToken;
  coll_options_.job_token_file = params_.jobTokenFile;
  coll_options_.checksum = params_.checksum;
  coll_options_.reducer_timeout_ms = params_.reducerTimeout;
  coll_options_.min_reducers = static_cast<int>(params_.minReducers);
  coll_options_.slow_reducer_factor = static_cast<int>(params_.slowReducerFactor);
  coll_options_.spare_reducers = splitList(params_.spareReducers);
  coll_options_.rejoin_interval_ms = params_.rejoinInterval;
  coll_options_.progress = params_.collProgress == "legacy" ? worker_client::CollProgress::kLegacy
                           : params_.collProgress == "poll"  ? worker_client::CollProgress::kPoll
                                                             : worker_client::CollProgress::kThread;
}

Status PluginState::create(const Params& params, std::unique_ptr<PluginState>* out) {
  return create(params, ClusterInput{}, out);
}

Status PluginState::create(const Params& params, ClusterInput cluster,
                           std::unique_ptr<PluginState>* out) {
  // The value rules live with the variables (common/params.cc), so `tally env`, `tally doctor`
  // and tally-reducer refuse exactly what the plugin refuses.
  TALLY_RETURN_IF_ERROR(params.validate());
  transport::NetworkConfig config;
  TALLY_RETURN_IF_ERROR(transport::networkConfigFromParams(params, &config));
  config.max_requests = kMaxSendRequests;
  std::shared_ptr<transport::Network> network;
  std::string why;
  Status st = transport::openNetwork(config, &network, &why);
  if (!st) {
    // Name the variable to change: the interface choice when TCP was the one that failed.
    const bool tcp_failed = config.kind == transport::TransportKind::kTcp ||
                            config.kind == transport::TransportKind::kAuto;
    const char* var = !tcp_failed                     ? "TALLY_TRANSPORT"
                      : !params.socketIfname.empty()  ? "TALLY_SOCKET_IFNAME"
                      : !config.ifname_spec.empty()   ? "NCCL_SOCKET_IFNAME"
                                                      : "(default interface choice)";
    return Status(st.code(), std::string(var) + ": " + st.message());
  }
  TALLY_INFO(log::kInit | log::kNet, "transport: %s", why.c_str());
  std::unique_ptr<PluginState> state(
      new PluginState(params, std::move(cluster), config, network->devices(), network->name()));
  for (size_t i = 0; i < state->devices_.size(); ++i) {
    const transport::DeviceProperties& p = state->devices_[i]->properties();
    TALLY_INFO(log::kInit | log::kNet, "device %zu: %s address %s", i, p.name.c_str(),
               p.address.c_str());
  }
  TALLY_INFO(log::kInit | log::kNet, "%s; CollNet slices are cut for %s",
             transport::describeLink(state->coll_link_).c_str(),
             state->coll_link_.loopback ? "loopback" : "that speed");
  if (state->collEnabled() && state->coll_link_.speed_mbps < transport::kNcclMinCollNetMbps) {
    TALLY_WARN(
        "link %s at %d Mb/s: NCCL builds no CollNet channel below %d Mb/s (its slowest search "
        "step is 0.12 GB/s), so it will run this job without CollNet",
        state->coll_link_.interface.c_str(), state->coll_link_.speed_mbps,
        transport::kNcclMinCollNetMbps);
  }
  state->coll_options_.network = network;
  state->transport_choice_ = why;
  state->network_ = std::move(network);
  *out = std::move(state);
  return Status::ok();
}

std::string PluginState::collNetSummary() const {
  if (!collEnabled()) return "CollNet disabled: " + coll_off_reason_;
  std::string list;
  for (const std::string& address : reducers_.addresses) {
    list += (list.empty() ? "" : ",") + address;
  }
  return "CollNet reducers from " + reducers_.origin + ": " + list;
}

void PluginState::logCollNetOnce() {
  std::call_once(coll_logged_, [this] {
    if (!collStatus()) {
      TALLY_WARN("%s (CollNet connect declines; point-to-point is unaffected)",
                 collStatus().message().c_str());
    } else {
      TALLY_INFO(log::kInit | log::kColl, "%s", collNetSummary().c_str());
    }
  });
}

int PluginState::reportedSpeedMbps(int dev) const {
  if (dev == 0) return coll_link_.speed_mbps;
  if (params_.linkMbps > 0) return static_cast<int>(params_.linkMbps);
  const transport::Device* d = device(dev);
  const int own = d != nullptr ? d->properties().speed_mbps : 0;
  return own > 0 ? own : transport::kUnknownLinkMbps;
}

transport::Device* PluginState::device(int dev) const {
  if (dev < 0 || dev >= netDeviceCount()) return nullptr;
  return devices_[static_cast<size_t>(dev)].get();
}

transport::ConnectionOptions PluginState::connectionOptions() const {
  transport::ConnectionOptions options;
  options.max_requests = kMaxSendRequests;
  options.sockets = network_config_.tcp.sockets;
  return options;
}

Status PluginState::global(PluginState** out) {
  GlobalSlot& slot = globalSlot();
  std::lock_guard<std::mutex> lock(slot.mu);
  if (!slot.state && slot.failure.isOk()) {
    Params params;
    Status st = Params::load(EnvParamSource(), &params);
    if (st) {
      params.logProvenance();
      setAbortOnError(params.abortOnError);
      // A malformed CLUSTER_SPEC or TF_CONFIG is kept in the state: it turns CollNet off (its
      // init fails with the error) but must not take point-to-point networking down with it.
      std::unique_ptr<PluginState> state;
      st = create(params, ClusterInput::load(EnvParamSource()), &state);
      if (st) slot.state = std::move(state);
    }
    if (!st) slot.failure = st;
    if (slot.state) slot.ready.store(slot.state.get());
  }
  if (!slot.state) return slot.failure;
  *out = slot.state.get();
  return Status::ok();
}

bool PluginState::installGlobal(std::unique_ptr<PluginState> state) {
  GlobalSlot& slot = globalSlot();
  std::lock_guard<std::mutex> lock(slot.mu);
  if (slot.state) return false;
  slot.failure = Status::ok();
  setAbortOnError(state->params().abortOnError);
  slot.state = std::move(state);
  slot.ready.store(slot.state.get());
  return true;
}

PluginState* PluginState::globalIfLoaded() { return globalSlot().ready.load(); }

Status PluginState::loaded(PluginState** out) {
  *out = globalIfLoaded();
  if (*out == nullptr) return Status::internal("called before a successful init");
  return Status::ok();
}

}  // namespace tally::plugin
