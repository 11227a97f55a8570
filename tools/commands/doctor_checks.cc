// SPDX-License-Identifier: Apache-2.0
// The pure checks of `tally doctor`: NCCL variables and the bandwidth comparison.
#include "tools/commands/doctor_checks.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "common/strings.h"

namespace tally::commands::doctor {
namespace {

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A variable's value; empty when unset or empty, which NCCL treats alike.
std::string value(const ParamSource& env, const char* name) {
  auto v = env.get(name);
  return v ? *v : std::string();
}

std::string quoted(const std::string& name, const std::string& v) {
  return name + "=\"" + v + "\"";
}

CheckResult fail(const char* check, std::string detail) {
  return {Severity::kFail, check, std::move(detail)};
}
CheckResult warn(const char* check, std::string detail) {
  return {Severity::kWarn, check, std::move(detail)};
}

const std::vector<std::string> kCollectives = {"allreduce", "broadcast", "reduce", "allgather",
                                               "reducescatter"};
const std::vector<std::string> kAlgorithms = {"ring", "tree",     "collnetdirect", "collnetchain",
                                              "nvls", "nvlstree", "pat",           "collnet"};
const std::vector<std::string> kProtocols = {"ll", "ll128", "simple"};

// Names the selector lists that `known` does not: "unknown name \"x\"".
std::string unknownNames(const SelectorResult& sel, const std::vector<std::string>& known) {
  for (const std::string& n : sel.names) {
    if (!contains(known, n)) return "unknown name \"" + n + "\"";
  }
  return "";
}

void checkCollnetEnable(const ParamSource& env, std::vector<CheckResult>* out) {
  const std::string v = value(env, "NCCL_COLLNET_ENABLE");
  if (v == "1") return;
  out->push_back(fail("NCCL_COLLNET_ENABLE",
                      (v.empty() ? std::string("unset") : quoted("NCCL_COLLNET_ENABLE", v)) +
                          ": NCCL keeps CollNet off unless it is 1; run under `tally launch`, "
                          "which sets it, or export NCCL_COLLNET_ENABLE=1"));
}

void checkNet(const ParamSource& env, std::vector<CheckResult>* out) {
  const std::string v = value(env, "NCCL_NET");
  if (v.empty() || toLower(v) == "tally") return;
  out->push_back(fail("NCCL_NET", quoted("NCCL_NET", v) +
                                      " picks another net; CollNet comes with the net NCCL "
                                      "assigns, so Tally's is never used (unset it or set Tally)"));
}

void checkNetPlugin(const ParamSource& env, const NcclCheckContext& ctx,
                    std::vector<CheckResult>* out) {
  const std::string v = value(env, "NCCL_NET_PLUGIN");
  auto loadsTally = [&ctx](const std::string& library) {
    return ctx.loads_tally && ctx.loads_tally(library);
  };
  const std::string shown = v.empty() ? std::string("unset") : quoted("NCCL_NET_PLUGIN", v);
  if (v.empty() || v == "libnccl-net.so") {
    if (loadsTally("libnccl-net.so")) return;
    out->push_back(warn("NCCL_NET_PLUGIN",
                        shown + ": NCCL opens libnccl-net.so, which is not Tally on this host's "
                                "library path; set NCCL_NET_PLUGIN=tally or a path to "
                                "libnccl-net-tally.so"));
    return;
  }
  if (toLower(v) == "none") {
    out->push_back(fail("NCCL_NET_PLUGIN", shown + ": NCCL loads no net plugin; set it to tally"));
    return;
  }
  // The forms that name Tally, and the library NCCL then opens.
  std::string library;
  if (v == "tally" || v == "libnccl-net-tally.so") {
    library = "libnccl-net-tally.so";
  } else if (endsWith(v, "/libnccl-net-tally.so") || endsWith(v, "/libnccl-net.so")) {
    library = v;
  }
  if (library.empty()) {
    out->push_back(fail("NCCL_NET_PLUGIN",
                        shown + ": NCCL would open libnccl-net-" + v + ".so or " + v +
                            ", not Tally; set it to tally or a path to libnccl-net-tally.so"));
    return;
  }
  if (loadsTally(library)) return;
  out->push_back(warn("NCCL_NET_PLUGIN",
                      shown + ": NCCL would open " + library +
                          ", which does not load as Tally from here (not on the library path, "
                          "or another plugin); give the full path of libnccl-net-tally.so"));
}

void checkAlgo(const ParamSource& env, std::vector<CheckResult>* out) {
  const std::string v = value(env, "NCCL_ALGO");
  if (v.empty()) return;
  const SelectorResult sel = parseNcclSelector(v);
  if (!sel.problem.empty()) {
    out->push_back(warn("NCCL_ALGO", quoted("NCCL_ALGO", v) + ": cannot read it (" + sel.problem +
                                         "); NCCL may reject it"));
    return;
  }
  // "collnet" is the single CollNet algorithm of older NCCL versions: it stands for both.
  const bool legacy = contains(sel.names, "collnet");
  bool collnet = false;
  if (!sel.restricted) {
    collnet = true;
  } else if (sel.exclude) {
    collnet =
        !legacy && !(contains(sel.names, "collnetchain") && contains(sel.names, "collnetdirect"));
  } else {
    collnet = legacy || contains(sel.names, "collnetchain") || contains(sel.names, "collnetdirect");
  }
  if (!collnet) {
    out->push_back(fail("NCCL_ALGO", quoted("NCCL_ALGO", v) +
                                         ": all-reduce may use neither CollNetChain nor "
                                         "CollNetDirect; unset it or use allreduce:collnetchain"));
    return;
  }
  const std::string unknown = unknownNames(sel, kAlgorithms);
  if (!unknown.empty()) {
    out->push_back(warn("NCCL_ALGO", quoted("NCCL_ALGO", v) + ": " + unknown));
  }
}

void checkProto(const ParamSource& env, std::vector<CheckResult>* out) {
  const std::string v = value(env, "NCCL_PROTO");
  if (v.empty()) return;
  const SelectorResult sel = parseNcclSelector(v);
  if (!sel.problem.empty()) {
    out->push_back(warn("NCCL_PROTO", quoted("NCCL_PROTO", v) + ": cannot read it (" + sel.problem +
                                          "); NCCL may reject it"));
    return;
  }
  if (!sel.allows("simple")) {
    out->push_back(fail("NCCL_PROTO", quoted("NCCL_PROTO", v) +
                                          ": all-reduce may not use Simple, the only protocol "
                                          "CollNet runs; unset it or allow Simple"));
    return;
  }
  const std::string unknown = unknownNames(sel, kProtocols);
  if (!unknown.empty()) {
    out->push_back(warn("NCCL_PROTO", quoted("NCCL_PROTO", v) + ": " + unknown));
  }
}

void checkPluginRefCount(const ParamSource& env, const NcclCheckContext& ctx,
                         std::vector<CheckResult>* out) {
  const bool affected = ctx.nccl_version >= 22700 && ctx.nccl_version < 23000;
  if (!affected) return;
  const std::string v = value(env, "NCCL_NET_PLUGIN_REF_COUNT");
  int64_t count = 0;
  if (!v.empty() && parseInt(trim(v), &count).isOk() && count >= 1) return;
  // With NCCL_NET_PLUGIN unset, NCCL opens libnccl-net.so again after forgetting the name.
  if (value(env, "NCCL_NET_PLUGIN").empty() && ctx.loads_tally &&
      ctx.loads_tally("libnccl-net.so")) {
    return;
  }
  out->push_back(warn(
      "NCCL_NET_PLUGIN_REF_COUNT",
      (v.empty() ? std::string("unset") : quoted("NCCL_NET_PLUGIN_REF_COUNT", v)) + ": NCCL " +
          formatNcclVersion(ctx.nccl_version) +
          " unloads the plugin when a process's last communicator is destroyed and forgets its "
          "name, so a communicator made after that (a process group made again) fails with "
          "NCCL_NET=Tally or runs on NCCL's own net; set NCCL_NET_PLUGIN_REF_COUNT=1 (tally "
          "launch does)"));
}

void checkNodeThreshold(const ParamSource& env, const NcclCheckContext& ctx,
                        std::vector<CheckResult>* out) {
  const std::string v = value(env, "NCCL_COLLNET_NODE_THRESHOLD");
  if (v.empty()) return;
  int64_t threshold = 0;
  if (!parseInt(trim(v), &threshold).isOk()) {
    out->push_back(warn("NCCL_COLLNET_NODE_THRESHOLD",
                        quoted("NCCL_COLLNET_NODE_THRESHOLD", v) + ": not an integer"));
    return;
  }
  if (threshold > ctx.coll_ranks) {
    out->push_back(fail("NCCL_COLLNET_NODE_THRESHOLD",
                        quoted("NCCL_COLLNET_NODE_THRESHOLD", v) + " but the job has " +
                            std::to_string(ctx.coll_ranks) +
                            " CollNet rank(s); NCCL turns CollNet off below the threshold "
                            "(lower it or unset it)"));
  }
}

}  // namespace

const char* severityName(Severity s) {
  switch (s) {
    case Severity::kPass:
      return "PASS";
    case Severity::kWarn:
      return "WARN";
    case Severity::kFail:
      return "FAIL";
  }
  return "FAIL";
}

std::string formatResult(const CheckResult& r) {
  return std::string(severityName(r.severity)) + "  " + r.check + ": " + r.detail;
}

int exitStatus(const std::vector<CheckResult>& results) {
  Severity worst = Severity::kPass;
  for (const auto& r : results) worst = std::max(worst, r.severity);
  return static_cast<int>(worst);
}

bool SelectorResult::allows(const std::string& name) const {
  if (!restricted) return true;
  return exclude != contains(names, name);
}

SelectorResult parseNcclSelector(const std::string& text) {
  SelectorResult result;
  bool have_specific = false;
  for (const std::string& raw : split(text, ';')) {
    const std::string section = trim(raw);
    if (section.empty()) continue;
    std::string list = section;
    bool specific = false;
    const size_t colon = section.find(':');
    if (colon != std::string::npos) {
      bool names_allreduce = false;
      for (const std::string& f : split(section.substr(0, colon), ',')) {
        const std::string func = toLower(trim(f));
        if (!contains(kCollectives, func)) {
          result.problem = "unknown collective \"" + trim(f) + "\" in \"" + section + "\"";
          return result;
        }
        names_allreduce = names_allreduce || func == "allreduce";
      }
      list = trim(section.substr(colon + 1));
      if (!names_allreduce) continue;
      specific = true;
    }
    if (have_specific && !specific) continue;  // a bare list never overrides an allreduce one
    bool exclude = false;
    if (!list.empty() && list[0] == '^') {
      exclude = true;
      list = trim(list.substr(1));
    }
    std::vector<std::string> names;
    for (const std::string& n : split(list, ',')) {
      const std::string name = toLower(trim(n));
      if (name.empty()) {
        result.problem = "empty name in \"" + section + "\"";
        return result;
      }
      names.push_back(name);
    }
    result.restricted = true;
    result.exclude = exclude;
    result.names = std::move(names);
    have_specific = have_specific || specific;
  }
  return result;
}

std::vector<CheckResult> checkNcclVariables(const ParamSource& env, const NcclCheckContext& ctx) {
  std::vector<CheckResult> out;
  checkCollnetEnable(env, &out);
  checkNet(env, &out);
  checkNetPlugin(env, ctx, &out);
  checkPluginRefCount(env, ctx, &out);
  checkAlgo(env, &out);
  checkProto(env, &out);
  checkNodeThreshold(env, ctx, &out);
  if (out.empty()) {
    out.push_back({Severity::kPass, "nccl",
                   "NCCL_COLLNET_ENABLE=1 and no NCCL variable keeps all-reduce off CollNet"});
  }
  return out;
}

int parseNcclVersion(const std::string& text) {
  const std::vector<std::string> parts = split(trim(text), '.');
  int64_t n[3] = {0, 0, 0};
  if (parts.size() == 1) {
    return parseInt(parts[0], &n[0]).isOk() && n[0] > 0 && n[0] < 1000000 ? static_cast<int>(n[0])
                                                                          : 0;
  }
  if (parts.size() != 3) return 0;
  for (int i = 0; i < 3; ++i) {
    if (!parseInt(parts[static_cast<size_t>(i)], &n[i]).isOk() || n[i] < 0 || n[i] > 99) return 0;
  }
  // NCCL_VERSION(X,Y,Z): X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after.
  return static_cast<int>(n[0] <= 2 && n[1] <= 8 ? n[0] * 1000 + n[1] * 100 + n[2]
                                                 : n[0] * 10000 + n[1] * 100 + n[2]);
}

std::string formatNcclVersion(int code) {
  if (code <= 0) return "(unknown)";
  if (code < 10000) {
    return std::to_string(code / 1000) + "." + std::to_string(code / 100 % 10) + "." +
           std::to_string(code % 100);
  }
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

std::optional<CheckResult> checkGpuDirect(bool collnet_on,
                                          const std::vector<NetDeviceSummary>& devices) {
  int capable = 0;
  for (const NetDeviceSummary& d : devices) capable += d.gpu_direct ? 1 : 0;
  if (capable == 0) return std::nullopt;
  if (!collnet_on) {
    return CheckResult{Severity::kPass, "gpudirect",
                       "TALLY_COLLNET=0: NCCL may use GPUDirect RDMA on " +
                           std::to_string(capable) + " of Tally's net device(s)"};
  }
  if (!devices.front().gpu_direct) {
    return CheckResult{Severity::kPass, "gpudirect",
                       std::to_string(capable) +
                           " net device(s) can carry GPU memory; device 0, which CollNet "
                           "shares, cannot anyway"};
  }
  return CheckResult{
      Severity::kWarn, "gpudirect",
      "NCCL will not use GPUDirect RDMA on Tally's net device 0 (" + devices.front().name +
          "): CollNet reports that device too (host memory only), and NCCL keeps CollNet's "
          "no-GPUDirect mark on the NIC both share, reducers configured or not" +
          (capable > 1 ? "; the other " + std::to_string(capable - 1) + " keep it" : "") +
          ". Without the reducers, set TALLY_COLLNET=0 on every host of the job"};
}

std::string formatGbps(double gbps) {
  char buf[64];
  if (gbps >= 1.0) {
    std::snprintf(buf, sizeof(buf), "%.1f Gb/s", gbps);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f Mb/s", gbps * 1000.0);
  }
  return buf;
}

CheckResult checkBandwidth(const BandwidthInput& in) {
  CheckResult r{Severity::kWarn, "bandwidth", ""};
  if (in.reducer_gbytes_per_s.empty()) {
    r.detail = "not compared: no reducer was measured";
    return r;
  }
  const double total_gbps =
      8.0 * std::accumulate(in.reducer_gbytes_per_s.begin(), in.reducer_gbytes_per_s.end(), 0.0);
  const std::string have = "reducers " + formatGbps(total_gbps) + " in all (" +
                           std::to_string(in.reducer_gbytes_per_s.size()) +
                           " measured one at a time from this worker)";
  if (!in.worker_link_gbps || *in.worker_link_gbps <= 0) {
    r.detail = "unknown link speed" +
               (in.link_source.empty() ? std::string() : " of " + in.link_source) + "; " + have +
               "; give --worker-gbps to compare";
    return r;
  }
  const int ranks = std::max(1, in.coll_ranks);
  const double need_gbps = *in.worker_link_gbps * ranks;
  const std::string need = "workers need " + formatGbps(need_gbps) + " (" + std::to_string(ranks) +
                           " CollNet rank(s) x " + formatGbps(*in.worker_link_gbps) + ", " +
                           in.link_source + ")";
  if (total_gbps >= need_gbps) {
    r.severity = Severity::kPass;
    r.detail = have + " >= " + need;
    return r;
  }
  char pct[32];
  std::snprintf(pct, sizeof(pct), "%.0f%%", 100.0 * (need_gbps - total_gbps) / need_gbps);
  r.detail = have + " < " + need + ": " + formatGbps(need_gbps - total_gbps) + " (" + pct +
             ") short; add reducers or faster reducer hosts";
  return r;
}

}  // namespace tally::commands::doctor
