// SPDX-License-Identifier: Apache-2.0
// `tally doctor`'s results and its pure checks: no sockets, no files, no environment of their
// own. What they look at comes in as arguments (a ParamSource for the NCCL variables, numbers for
// the bandwidth comparison), so tests drive them with tables.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/params.h"

namespace tally::commands::doctor {

enum class Severity { kPass = 0, kWarn = 1, kFail = 2 };
const char* severityName(Severity s);  // "PASS", "WARN", "FAIL"

// One line of the report: "PASS  plugin: ...".
struct CheckResult {
  Severity severity = Severity::kPass;
  std::string check;   // short name: "plugin", "reducer 10.0.0.5:5555", "NCCL_ALGO"
  std::string detail;  // one sentence or a few clauses; what was seen and what to do
};
std::string formatResult(const CheckResult& r);

// The process exit status for a report: 0 when every line passed, 1 for a WARN and no FAIL,
// 2 for any FAIL.
int exitStatus(const std::vector<CheckResult>& results);

// ---- NCCL variables that silently turn CollNet off -------------------------------------------

struct NcclCheckContext {
  // CollNet ranks in the job (pools 0 and 1 of the cluster spec; 1 without a spec). Compared
  // with NCCL_COLLNET_NODE_THRESHOLD.
  int coll_ranks = 1;
  // Whether dlopen of `library` (a file name looked up on the loader's path, or a path) gives
  // Tally. Asked with the library NCCL would open for NCCL_NET_PLUGIN: "libnccl-net.so" when it
  // is unset, "libnccl-net-tally.so" for "tally", the path itself for a path. Empty: no library
  // is taken to be Tally. The caller does the loading; the check only reads the answer.
  std::function<bool(const std::string& library)> loads_tally;
  // NCCL_VERSION_CODE of the NCCL the job runs (22809 for 2.28.9); 0 when unknown.
  int nccl_version = 0;
};

// One result per variable that would keep all-reduce off CollNet (FAIL) or looks doubtful
// (WARN); a single PASS "nccl" line when none does. Variables, in this order: NCCL_COLLNET_ENABLE,
// NCCL_NET, NCCL_NET_PLUGIN, NCCL_NET_PLUGIN_REF_COUNT, NCCL_ALGO, NCCL_PROTO,
// NCCL_COLLNET_NODE_THRESHOLD.
//
// NCCL_NET_PLUGIN_REF_COUNT is a WARN only under an NCCL known to be 2.27 to 2.29, which unloads
// the plugin after a process's last communicator and forgets its name: the next communicator
// then fails (NCCL_NET=Tally) or runs on NCCL's own net, unless the count is at least 1 or NCCL
// finds Tally by the default name libnccl-net.so.
std::vector<CheckResult> checkNcclVariables(const ParamSource& env, const NcclCheckContext& ctx);

// What NCCL_ALGO or NCCL_PROTO leaves allowed for all-reduce.
//   "list"                     a bare list applies to every collective
//   "func:list;func:list"      per-collective sections, ';'-separated
//   list = name,name,...       case-insensitive; a leading '^' excludes the names instead
// A section naming allreduce wins over a bare list; among sections of the same kind the last one
// wins. Sections for other collectives are ignored.
struct SelectorResult {
  bool restricted = false;         // some section applies to all-reduce
  bool exclude = false;            // that section's list starts with '^'
  std::vector<std::string> names;  // its names, lower-cased, in order
  std::string problem;             // non-empty when the text is malformed (names what and where)
  // True when `name` (lower-case) may be used for all-reduce.
  bool allows(const std::string& name) const;
};
SelectorResult parseNcclSelector(const std::string& text);

// "2.28.9" or "22809" (NCCL_VERSION_CODE) as a version code; 0 when neither.
int parseNcclVersion(const std::string& text);
// 22809 -> "2.28.9".
std::string formatNcclVersion(int code);

// ---- GPUDirect RDMA on Tally's net -------------------------------------------------------------

// What the transport's devices can do, for checkGpuDirect.
struct NetDeviceSummary {
  std::string name;
  bool gpu_direct = false;  // carries CUDA memory (cuda_memory or dmabuf)
};

// CollNet's one device shares NCCL's topology node with net device 0, and NCCL keeps CollNet's
// host-memory attribute there, so NCCL never uses GPUDirect RDMA on net device 0 while CollNet
// reports a device (TALLY_COLLNET=1, the default), reducers configured or not. WARN when device 0
// could carry CUDA memory and CollNet is on; PASS when it could and TALLY_COLLNET=0; nothing
// (empty) when no device can (TCP, or an RDMA device without GPU memory support).
std::optional<CheckResult> checkGpuDirect(bool collnet_on,
                                          const std::vector<NetDeviceSummary>& devices);

// ---- Reducer bandwidth against the workers' need ---------------------------------------------

struct BandwidthInput {
  std::vector<double> reducer_gbytes_per_s;  // measured, one per reducer that answered
  std::optional<double> worker_link_gbps;    // this worker's link in Gb/s; empty when unknown
  std::string link_source;                   // "eth0 (/sys/class/net/eth0/speed)", "--worker-gbps"
  int coll_ranks = 1;
};
// PASS when the reducers' total reaches worker link x ranks; WARN with the shortfall when not;
// WARN "unknown link speed" without a link speed; WARN when no reducer was measured.
CheckResult checkBandwidth(const BandwidthInput& in);

// "3.2 Gb/s", "850 Mb/s": a bit rate for a report line.
std::string formatGbps(double gbps);

}  // namespace tally::commands::doctor
