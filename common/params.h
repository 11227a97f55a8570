// SPDX-License-Identifier: Apache-2.0
// The one registry of environment variables Tally reads.
//
// Every variable is listed once in TALLY_PARAM_LIST with its type, default and documentation.
// Values are read once into a Params struct, units are parsed ("64K", "10s"), trailing garbage is
// an error naming the variable. Nothing else in Tally calls getenv: tests pass a MapParamSource.
// Which values are refused is written once too (common/param_check.cc): the plugin refuses them at
// start-up, tally-reducer at its start, and `tally env` and `tally doctor` report them, with every
// TALLY_ name that is not a variable.
// docs/env.md is generated from this list (`tally env --markdown`) and a test keeps them equal.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tally {

enum class ParamType { kString, kInt, kBytes, kMillis, kBool };

// X(type, member, "VARIABLE", "default", "documentation")
#define TALLY_PARAM_LIST(X)                                                                     \
  X(kString, socketIfname, "TALLY_SOCKET_IFNAME", "",                                           \
    "Network interfaces Tally uses, as a comma list of name prefixes; `^` in front excludes "   \
    "them, `=` in front asks for exact names. Empty: NCCL_SOCKET_IFNAME, then the first "        \
    "non-loopback interface that is up, then loopback.")                                        \
  X(kString, ncclSocketIfname, "NCCL_SOCKET_IFNAME", "",                                        \
    "Read only when TALLY_SOCKET_IFNAME is empty, with the same syntax.")                        \
  X(kInt, socketNsocks, "TALLY_SOCKET_NSOCKS", "2",                                             \
    "TCP sockets per point-to-point connection, each with its own helper threads (1 to 16). "   \
    "Large messages are striped across them.")                                                  \
  X(kBytes, socketMinStripe, "TALLY_SOCKET_MIN_STRIPE", "64K",                                  \
    "Smallest piece of a message sent on one socket; smaller messages use one socket.")         \
  X(kString, transport, "TALLY_TRANSPORT", "auto",                                              \
    "Which network Tally uses, for point-to-point and reducer connections: `tcp`, `ofi` "       \
    "(libfabric), `verbs` (libibverbs) or `auto`. `auto` takes verbs when an RDMA device "      \
    "opens, else ofi when its provider is a high-speed one (not tcp, udp, sockets or shm), "    \
    "else tcp; the INFO log says what it chose and why. An explicit `ofi` or `verbs` that "     \
    "cannot be used is an error, never a silent fall back to TCP. Workers and reducers of a "   \
    "job must end up on the same transport (tally-reducer's `--transport` overrides it).")      \
  X(kString, ibHca, "TALLY_IB_HCA", "",                                                         \
    "RDMA devices the verbs transport uses, in NCCL_IB_HCA's syntax: a comma list of device "   \
    "name prefixes, each optionally with `:port` (`mlx5_0:1,mlx5_1`); `^` in front excludes "   \
    "them, `=` in front asks for exact names. Empty: every device with an active port.")        \
  X(kInt, ibQpsPerConnection, "TALLY_IB_QPS_PER_CONNECTION", "2",                               \
    "Queue pairs per verbs connection (1 to 16); large messages are split across them, as "     \
    "TCP splits them across TALLY_SOCKET_NSOCKS sockets.")                                      \
  X(kString, reducers, "TALLY_REDUCERS", "",                                                    \
    "Reducers for CollNet all-reduce, as `host:port,host:port,...` (each with its port, 1 to "  \
    "65535; an IPv6 address as `[v6]:port`; at most 4096). Empty: CLUSTER_SPEC's "              \
    "workerpool2, then TF_CONFIG's ps; when none lists any, CollNet connect declines and NCCL " \
    "uses its point-to-point algorithms.")                                                      \
  X(kBool, collNet, "TALLY_COLLNET", "1",                                                       \
    "0: Tally's CollNet reports no device, so NCCL never offers it and keeps GPUDirect RDMA on " \
    "Tally's first net device. 1: one CollNet device, whatever the reducers, so every host of " \
    "a job reports the same count (NCCL 2.30 stops a job whose hosts differ). Set it alike on " \
    "every host.")                                                                              \
  X(kBytes, sliceBytes, "TALLY_SLICE_BYTES", "256K",                                            \
    "Largest slice: each CollNet call is cut into slices spread over the reducers, at least "  \
    "TALLY_SLICES_PER_REDUCER per reducer and none under TALLY_MIN_SLICE_BYTES (or this "       \
    "value, if smaller). Every rank must agree on it.")                                          \
  X(kInt, slicesPerReducer, "TALLY_SLICES_PER_REDUCER", "0",                                    \
    "Slices each call is cut into per reducer, at least (1 to 64), so results flow back while " \
    "later inputs still arrive. 0: 2 on loopback and links of 25 Gbit/s or more (where CPU "   \
    "per slice limits), else 8 (where the link does). Every rank must agree on it.")            \
  X(kBytes, minSliceBytes, "TALLY_MIN_SLICE_BYTES", "0",                                        \
    "Smallest slice TALLY_SLICES_PER_REDUCER may cut down to. 0: 128K on loopback and links "   \
    "of 25 Gbit/s or more, and on links over 1048 Mbit/s (where a millisecond carries more "   \
    "than 128K); 32K on slower links and when the speed is unknown.")                           \
  X(kInt, linkMbps, "TALLY_LINK_MBPS", "0",                                                     \
    "The link speed in Mb/s that the plugin reports to NCCL and cuts slices for, in place of "  \
    "what the interface reports (virtual and cloud NICs often report none, or 10 Gbit/s "      \
    "whatever they carry). 0: the interface's own. Every rank should agree on it.")             \
  X(kInt, linkLatencyUs, "TALLY_LINK_LATENCY_US", "50",                                         \
    "One-way time of a message between two hosts, software included, in microseconds: the "    \
    "latency the plugin reports to NCCL (which adds it to every step of its rings and trees "  \
    "between nodes) and the tuner's model uses. 50 fits TCP between cloud VMs in one zone. "   \
    "Every rank must agree on it.")                                                             \
  X(kBool, tuner, "TALLY_TUNER", "1",                                                          \
    "1: when reducers are configured, the tuner in Tally's library (found by NCCL when "        \
    "NCCL_TUNER_PLUGIN is unset) gives NCCL the model's cost of a CollNet all-reduce, so NCCL " \
    "uses CollNet only from the size where it is cheaper (docs/nccl.md). 0: NCCL's own costs. " \
    "Every rank must agree on it.")                                                             \
  X(kBytes, ncclBuffsize, "NCCL_BUFFSIZE", "4M",                                                \
    "NCCL's own setting, read by the tuner only: a CollNet call carries at most an eighth of "  \
    "it per channel, so the tuner asks for chunks up to NCCL_BUFFSIZE / 8.")                    \
  X(kInt, collWindow, "TALLY_COLL_WINDOW", "8",                                                 \
    "Slices a worker keeps in flight to each reducer, 1 to 4096 (and at most the reducer's "    \
    "--window, 16 by default). More only fills the switches' queues, where the Acks and "       \
    "Commits of failover wait: at 1 Gbit/s, 4 + 4, 64 MiB, 16 reached 83% of the link, 8 "      \
    "reached 92-93% (docs/performance.md).")                                                    \
  X(kString, collProgress, "TALLY_COLL_PROGRESS", "thread",                                     \
    "How a worker drives its reducer connections. `thread`: on TCP, each connection is one "    \
    "socket that the posting thread writes and one epoll thread per communicator reads, "       \
    "with no thread hand-off per slice (other transports use `legacy`). `poll`: the same "      \
    "sockets with no thread at all: NCCL's proxy thread reads results when it tests a "         \
    "request. `legacy`: a sender and a receiver thread per reducer over the transport's own "   \
    "helper threads.")                                                                          \
  X(kString, zerocopy, "TALLY_ZEROCOPY", "off",                                                \
    "How a worker writes its slices to reducers, with TALLY_COLL_PROGRESS thread or poll. "    \
    "`off`: copied into the socket. `on`: large writes with MSG_ZEROCOPY, so the NIC reads "   \
    "the caller's buffer itself and a call is done only once the kernel has let go of it; a "  \
    "connection whose kernel copied anyway (loopback, veth) goes back to copying. `always`: "  \
    "the same, never going back (tests). tally-reducer's `--zerocopy` is the reducer's side "   \
    "(docs/datapath.md).")                                                                      \
  X(kBytes, zerocopyMinBytes, "TALLY_ZEROCOPY_MIN_BYTES", "64K",                                \
    "With TALLY_ZEROCOPY: writes smaller than this are copied.")                                \
  X(kInt, collMaxRequests, "TALLY_COLL_MAX_REQUESTS", "64",                                     \
    "CollNet calls (all-reduce, all-gather, reduce-scatter) in flight per communicator; past "  \
    "it a post returns a NULL request and NCCL retries, and a call leaves the count when it "   \
    "completes, whether or not NCCL has tested it yet.")                                        \
  X(kMillis, connectTimeout, "TALLY_CONNECT_TIMEOUT_MS", "120000",                              \
    "Milliseconds (or 30s, 2m) connect waits for a peer, and CollNet connect for every rank "   \
    "and reducer; then it fails and NCCL reports the error.")                                   \
  X(kMillis, timeout, "TALLY_TIMEOUT_MS", "300000",                                             \
    "Milliseconds (or 30s, 5m) a started transfer or collective may make no progress before "   \
    "it fails with an error NCCL reports (a dead or stuck peer, worker or reducer).")            \
  X(kMillis, reducerTimeout, "TALLY_REDUCER_TIMEOUT_MS", "10000",                               \
    "Milliseconds (or 10s) a reducer may send nothing, not even an answer to a heartbeat, "     \
    "while slices or a heartbeat are outstanding; then the communicator drops it and goes on "  \
    "over the others (docs/failover.md). 0: only a failed connection drops a reducer. At most "  \
    "86400000 (a day).")                                                                         \
  X(kInt, minReducers, "TALLY_MIN_REDUCERS", "1",                                               \
    "Fewest reducers a CollNet communicator goes on with: losing more fails it, with an "       \
    "error naming every lost reducer and why.")                                                  \
  X(kInt, slowReducerFactor, "TALLY_SLOW_REDUCER_FACTOR", "4",                                  \
    "A reducer whose link is busy (slices out, results not landed) for nearly all of three "   \
    "half-second windows in a row and this many times as long as its peers' is dropped as "    \
    "slow, and taken back as a lost one is (docs/failover.md, \"A slow reducer\"). 0: never; "  \
    "nor with TALLY_REDUCER_TIMEOUT_MS=0.")                                                      \
  X(kString, spareReducers, "TALLY_SPARE_REDUCERS", "",                                         \
    "Reducers, as `host:port,...` (written as in TALLY_REDUCERS), that may take the place of "  \
    "a lost one when it does not come back at its own address. Every rank must list the same.") \
  X(kMillis, rejoinInterval, "TALLY_REJOIN_INTERVAL_MS", "1000",                                \
    "How often rank 0 of a CollNet communicator that lost a reducer looks for one to take its " \
    "place (its own address restarted, or a spare). After a join that did not happen it "       \
    "waits twice as long before offering that slot again, up to four intervals. 0: never; the " \
    "communicator goes on with the reducers it has.")                                            \
  X(kBool, abortOnError, "TALLY_ABORT_ON_ERROR", "0",                                           \
    "Abort the process at the first error, for a core dump.")                                   \
  X(kString, jobToken, "TALLY_JOB_TOKEN", "",                                                   \
    "The job secret every worker and reducer of a job shares: each connection to a reducer "    \
    "is proven with an HMAC-SHA256 challenge-response over it, both ways (docs/security.md). "  \
    "Empty: no authentication, and a reducer with a token refuses this worker. Never logged.")  \
  X(kString, jobTokenFile, "TALLY_JOB_TOKEN_FILE", "",                                          \
    "A file holding the job token (trailing newline ignored), instead of TALLY_JOB_TOKEN; "     \
    "set one of the two. It must be a readable, non-empty file when the plugin starts. A file " \
    "group or others may read is used with a warning.")                                         \
  X(kBool, checksum, "TALLY_CHECKSUM", "0",                                                     \
    "Adds a CRC32C of every slice and result payload, checked on arrival: corruption in "       \
    "transit fails the communicator instead of giving a wrong sum. Needs libisal2; every "      \
    "rank and reducer of a communicator must agree.")                                           \
  X(kString, reducerArgs, "TALLY_REDUCER_ARGS", "",                                             \
    "More tally-reducer options for `tally launch` to pass in the reducer pool (pool 2), "      \
    "e.g. `--threads 16 --metrics 0.0.0.0:9464 --token-file /etc/tally/token`; split into "     \
    "words as a shell would (quotes, backslashes; no expansion). --listen is launch's own.")

// A registered variable's default as the list writes it, at compile time; empty when the name is
// not registered.
constexpr std::string_view paramDefaultText(std::string_view name) {
  std::string_view text;
#define TALLY_PARAM_DEFAULT_TEXT(type, member, var, def, doc) \
  if (name == var) text = def;
  TALLY_PARAM_LIST(TALLY_PARAM_DEFAULT_TEXT)
#undef TALLY_PARAM_DEFAULT_TEXT
  return text;
}

// Plain decimal digits as a number, at compile time; -1 for empty text or any other character.
constexpr int64_t plainDecimal(std::string_view text) {
  if (text.empty()) return -1;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

// A registered variable's default, when the list writes it as plain decimal digits, at compile
// time; -1 when the name is not registered or its default is not plain digits. Option structs
// take their defaults from the list through this (common/timeouts.h), so each is written once.
constexpr int64_t paramDefaultNumber(std::string_view name) {
  return plainDecimal(paramDefaultText(name));
}

// A byte-valued variable's default in bytes, at compile time, when the list writes it as plain
// digits with at most one unit letter after them, K, M, G or T (binary, as parseBytes reads
// them: "256K" is 262144); -1 otherwise, as for paramDefaultNumber.
constexpr int64_t paramDefaultBytes(std::string_view name) {
  std::string_view text = paramDefaultText(name);
  const char unit = text.empty() ? '\0' : text.back();
  const int shift = unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : unit == 'T' ? 40 : 0;
  if (shift != 0) text.remove_suffix(1);
  const int64_t value = plainDecimal(text);
  return value < 0 ? -1 : value << shift;
}

struct ParamInfo {
  ParamType type;
  const char* name;
  const char* default_value;
  const char* doc;
};

// All registered parameters, in declaration order.
const std::vector<ParamInfo>& paramRegistry();

// Whether the variable holds a secret (TALLY_JOB_TOKEN): logs and `tally env` never show its
// value.
bool isSecretParam(const std::string& name);

// Where values come from. Thread-compatible.
class ParamSource {
 public:
  virtual ~ParamSource() = default;
  virtual std::optional<std::string> get(const std::string& name) const = 0;
  // Every name the source sets, registered or not, in no particular order: what the search for
  // TALLY_ names that are no variable (findUnknownParamNames) looks through.
  virtual std::vector<std::string> names() const = 0;
};

// The process environment: the only getenv (and the only reader of environ) in Tally.
class EnvParamSource : public ParamSource {
 public:
  std::optional<std::string> get(const std::string& name) const override;
  std::vector<std::string> names() const override;
};

// A fixed map, for tests and tools.
class MapParamSource : public ParamSource {
 public:
  MapParamSource() = default;
  explicit MapParamSource(std::map<std::string, std::string> values) : values_(std::move(values)) {}
  void set(const std::string& name, const std::string& value) { values_[name] = value; }
  std::optional<std::string> get(const std::string& name) const override;
  std::vector<std::string> names() const override;

 private:
  std::map<std::string, std::string> values_;
};

// TALLY_ variables that are no setting of the plugin or the reducer: what a scheduler's job sets
// for `tally launch` to read (tools/commands/launch_env.h). Known names, so never reported as
// unknown; `tally env` does not list them.
inline constexpr std::string_view kLaunchInputVariables[] = {
    "TALLY_JOBSET_NAME",      "TALLY_JOBSET_REPLICATED_JOB", "TALLY_JOBSET_JOB_INDEX",
    "TALLY_JOBSET_POD_INDEX", "TALLY_JOBSET_WORKERS",        "TALLY_JOBSET_REDUCERS",
    "TALLY_JOBSET_SUBDOMAIN", "TALLY_SLURM_HET_GROUP",
};
constexpr bool isLaunchInputVariable(std::string_view name) {
  for (std::string_view known : kLaunchInputVariables) {
    if (name == known) return true;
  }
  return false;
}

// Limits the documentation above states, checked by Params::problems().
inline constexpr int64_t kMaxSocketNsocks = 16;         // TALLY_SOCKET_NSOCKS
inline constexpr int64_t kMaxIbQpsPerConnection = 16;   // TALLY_IB_QPS_PER_CONNECTION
inline constexpr int64_t kMaxCollMaxRequests = 1 << 16;  // TALLY_COLL_MAX_REQUESTS
inline constexpr int64_t kMaxSlowReducerFactor = 1000;  // TALLY_SLOW_REDUCER_FACTOR
// TALLY_REDUCERS and TALLY_SPARE_REDUCERS addresses, and TALLY_MIN_REDUCERS: the reducers a
// connect handle and the wire can name.
inline constexpr int64_t kMaxReducerAddresses = 4096;
inline constexpr int64_t kMaxMinReducers = kMaxReducerAddresses;  // TALLY_MIN_REDUCERS
// TALLY_COLL_WINDOW: the largest window a Hello may carry.
inline constexpr int64_t kMaxCollWindow = 4096;
// TALLY_SLICE_BYTES and TALLY_MIN_SLICE_BYTES (64 MiB, the largest slice on the wire), and
// TALLY_SLICES_PER_REDUCER: what a Hello may carry. worker_client/coll_options.cc checks that
// these equal the wire's limits.
inline constexpr int64_t kMaxSliceBytesParam = int64_t{64} << 20;
inline constexpr int64_t kMaxSlicesPerReducerParam = 64;
inline constexpr int64_t kMaxLinkMbps = 10000000;      // TALLY_LINK_MBPS: 10 Tbit/s
inline constexpr int64_t kMaxLinkLatencyUs = 1000000;  // TALLY_LINK_LATENCY_US: 1 s
// TALLY_REDUCER_TIMEOUT_MS: a day. The keeper works in nanoseconds; past this a product with
// 10^6 would come near int64's limit, and no reducer silent a day is coming back.
inline constexpr int64_t kMaxReducerTimeoutMs = 24ll * 3600 * 1000;

// tally-reducer --window by default: slices the reducer buffers per worker connection, announced
// in Ready; a worker keeps the smaller of this and its TALLY_COLL_WINDOW in flight. An option of
// tally-reducer, not a variable, and above the workers' default on purpose: a job may raise
// TALLY_COLL_WINDOW up to it without restarting its reducers, while the workers' own default
// stays lower, where failover's Acks and Commits do not wait behind full queues
// (docs/failover.md). TALLY_COLL_WINDOW's documentation states this value; a test checks it.
inline constexpr int kDefaultReducerWindow = 16;
static_assert(kDefaultReducerWindow >= paramDefaultNumber("TALLY_COLL_WINDOW"),
              "the reducer's default window must admit the worker's default");

// A variable whose value cannot be used: `value` as set, `reason` what is expected instead. Or,
// with `unknown_name`, a TALLY_ name that is no variable (a typo leaves the setting it meant at
// its default): `nearest` is the variable it most likely meant, empty when none is near; its value
// is never kept, as it may be a misspelled secret.
struct ParamProblem {
  std::string name;
  std::string value;
  std::string reason;
  bool unknown_name = false;
  std::string nearest;
  // "NAME=VALUE is not valid: REASON", or "NAME is not a Tally variable; did you mean NEAREST?"
  std::string toString() const;
};

struct Params {
#define TALLY_PARAM_MEMBER_kString std::string
#define TALLY_PARAM_MEMBER_kInt int64_t
#define TALLY_PARAM_MEMBER_kBytes uint64_t
#define TALLY_PARAM_MEMBER_kMillis int64_t
#define TALLY_PARAM_MEMBER_kBool bool
#define TALLY_PARAM_DECLARE(type, member, name, def, doc) TALLY_PARAM_MEMBER_##type member{};
  TALLY_PARAM_LIST(TALLY_PARAM_DECLARE)
#undef TALLY_PARAM_DECLARE

  // (name, value) of each variable the source set, in registry order.
  std::vector<std::pair<std::string, std::string>> set_by_source;
  // The TALLY_ names the source set that are no variable (findUnknownParamNames).
  std::vector<ParamProblem> unknown_names;

  // Reads every parameter. On error nothing is written to *out and the Status names the
  // variable, its value and what was expected. An unknown TALLY_ name is no error: it is kept in
  // unknown_names, for logProvenance to warn about.
  static Status load(const ParamSource& source, Params* out);
  // Reads each parameter alone, for tools that report every problem and go on: a value that does
  // not parse leaves that parameter at its default (and out of set_by_source) and is appended to
  // *unparsed (may be null) with the parser's reason, in registry order.
  static Params loadEach(const ParamSource& source, std::vector<ParamProblem>* unparsed);
  // Params with every default, for tests.
  static Params defaults();
  // Logs one INFO line per variable set by the source ("TALLY_X set by environment to V"), and a
  // WARN for each unknown TALLY_ name.
  void logProvenance() const;

  // Values that parse but that Tally does not accept (TALLY_SOCKET_NSOCKS=99,
  // TALLY_TRANSPORT=rdma, TALLY_COLL_WINDOW=100000, TALLY_REDUCERS=host-without-port, a
  // TALLY_JOB_TOKEN_FILE that cannot be read), in registry order; empty when every value is
  // usable. The one list of these rules (common/param_check.cc): the plugin at start-up,
  // tally-reducer, `tally doctor` and `tally env` all ask it. It reads the token file (and wipes
  // what it read), and nothing else outside the values.
  std::vector<ParamProblem> problems() const;
  // The first of problems() as an InvalidUsage Status ("NAME=VALUE is not valid: REASON"), else
  // ok.
  Status validate() const;
};

// Every variable `source` sets that cannot be used, one entry each, in registry order: values
// that do not parse (with the parser's reason) and values Params::problems() refuses; then every
// TALLY_ name that is no variable (findUnknownParamNames). Without the last, empty exactly when
// Params::load succeeds and Params::validate accepts the result: what `tally env` and
// `tally doctor` report, and the plugin refuses at start-up (it only warns of unknown names).
std::vector<ParamProblem> findParamProblems(const ParamSource& source);

// The names `source` sets that start with TALLY_ but are neither a registered variable nor one
// of kLaunchInputVariables, sorted, each with the nearest variable (nearestName) when one is
// near enough.
std::vector<ParamProblem> findUnknownParamNames(const ParamSource& source);

// Parsers, exposed for tests. Each rejects trailing garbage and overflow. Byte-valued
// parameters go through parseBytes, and kMillis ones (each named *_MS) through parseDurationMs
// with a bare number read as milliseconds (common/sizes.h).
Status parseInt(const std::string& text, int64_t* out);
Status parseBool(const std::string& text, bool* out);         // 0/1, true/false, yes/no, on/off

// The Markdown table of every parameter, as in docs/env.md.
std::string paramsMarkdown();

}  // namespace tally
