// SPDX-License-Identifier: Apache-2.0
// tally doctor: run on a worker, says in PASS/WARN/FAIL lines whether Tally will work there.
//
// Checks, in order: plugin, cluster, reducers, transport (TALLY_TRANSPORT's choice), each
// reducer over that transport (reachable, handshake, RTT, bandwidth; connected to concurrently,
// with a progress line on stderr while any connect is pending), bandwidth against the
// workers' need, NCCL variables. docs/doctor.md explains each.
// Exit status: 0 every line PASS, 1 a WARN and no FAIL, 2 any FAIL; 3 for bad options.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/cluster.h"
#include "common/log.h"
#include "common/params.h"
#include "common/sizes.h"
#include "model/collnet.h"
#include "tools/commands/command.h"
#include "tools/commands/doctor_checks.h"
#include "tools/commands/doctor_host.h"
#include "tools/commands/doctor_probe.h"
#include "tools/commands/paths.h"
#include "transport/network.h"

namespace tally::commands {
namespace {

using doctor::CheckResult;
using doctor::Severity;

constexpr int kExitBadOptions = 3;

struct DoctorOptions {
  std::string plugin;
  std::string timeout = "5s";
  std::string probe_bytes = "16M";
  double probe_seconds = 1.0;
  double worker_gbps = 0;    // 0: read the link speed from /sys
  std::string nccl_version;  // empty: libnccl.so.2's own
  bool verbose = false;
};

// Prints each line as soon as it is known: a slow reducer should not hide the lines before it.
class Report {
 public:
  void add(const CheckResult& r) {
    std::printf("%s\n", doctor::formatResult(r).c_str());
    std::fflush(stdout);
    results_.push_back(r);
  }
  const std::vector<CheckResult>& results() const { return results_; }

 private:
  std::vector<CheckResult> results_;
};

// Reads the option strings into probe options; false after printing why.
bool parseProbeOptions(const DoctorOptions& o, doctor::ProbeOptions* probe) {
  int64_t timeout_ms = 0;
  Status st = parseDurationMs(o.timeout, DurationUnit::kNone, &timeout_ms);
  if (st.isOk() && timeout_ms <= 0) {
    st = Status::invalidUsage("expected a duration above zero, such as " +
                              std::string(kDurationExamples) + ", got '" + o.timeout + "'");
  }
  if (!st.isOk()) {
    std::fprintf(stderr, "tally doctor: --timeout: %s\n", st.message().c_str());
    return false;
  }
  uint64_t bytes = 0;
  st = parseBytes(o.probe_bytes, &bytes);
  if (!st.isOk() || bytes < 4 || bytes % 4 != 0 || bytes > (1ull << 30)) {
    std::fprintf(stderr,
                 "tally doctor: --probe-bytes %s: want a multiple of 4 bytes up to 1G, e.g. 16M\n",
                 o.probe_bytes.c_str());
    return false;
  }
  probe->timeout_ms = timeout_ms;
  probe->probe_bytes = bytes;
  probe->probe_seconds = o.probe_seconds;
  return true;
}

int runDoctor(const DoctorOptions& o) {
  log::setSink(&log::stderrSink, o.verbose ? log::Level::kInfo : log::Level::kNone);
  doctor::ProbeOptions probe;
  if (!parseProbeOptions(o, &probe)) return kExitBadOptions;
  if (!o.nccl_version.empty() && doctor::parseNcclVersion(o.nccl_version) == 0) {
    std::fprintf(stderr, "tally doctor: --nccl-version %s: want a version such as 2.28.9\n",
                 o.nccl_version.c_str());
    return kExitBadOptions;
  }
  const EnvParamSource env;
  Report report;

  // 1. plugin
  report.add(doctor::checkPlugin(o.plugin.empty() ? defaultPluginPath() : o.plugin));

  // 2. cluster
  ClusterEnv cluster;
  int coll_ranks = 1;
  report.add(doctor::checkCluster(env, &cluster, &coll_ranks));

  // 3. reducers (and the TALLY_ variables they depend on)
  // Every refused variable at once, by the rules the plugin applies at start-up (the same list
  // `tally env` prints): FAIL. TALLY_ names that are no variable, which the plugin only warns
  // about: WARN.
  std::string refused;
  std::string unknown;
  for (const ParamProblem& problem : findParamProblems(env)) {
    std::string& line = problem.unknown_name ? unknown : refused;
    line += (line.empty() ? "" : "; ") + problem.toString();
  }
  if (!refused.empty()) report.add({Severity::kFail, "TALLY_ variables", refused});
  if (!unknown.empty()) report.add({Severity::kWarn, "TALLY_ variables", unknown});
  // The checks below go on with every other variable as set: one that does not parse stays at
  // its default, and does not take TALLY_REDUCERS with it.
  const Params params = Params::loadEach(env, nullptr);
  ReducerList reducers;
  report.add(doctor::checkReducers(params, cluster, &reducers));

  // 4. the transport, and each reducer over it
  report.add(doctor::checkTransport(params, probe.timeout_ms, &probe.network));
  if (probe.network) {
    std::vector<doctor::NetDeviceSummary> devices;
    for (const auto& device : probe.network->devices()) {
      const transport::DeviceProperties& p = device->properties();
      devices.push_back({p.name, p.cuda_memory || p.dmabuf});
    }
    if (auto r = doctor::checkGpuDirect(params.collNet, devices)) report.add(*r);
  }
  const doctor::ProbeOptions from_params = doctor::probeOptionsFrom(params);
  probe.slice_bytes = from_params.slice_bytes;
  probe.window = from_params.window;
  probe.job_token = from_params.job_token;
  probe.job_token_file = from_params.job_token_file;
  probe.checksum = from_params.checksum;
  const std::string credentials = doctor::credentialsNote(params);
  doctor::BandwidthInput bandwidth;
  // Connected to all at once (16 at a time), so unreachable reducers cost one --timeout together
  // rather than one each; then measured one after another, as each alone has this worker's link.
  std::vector<doctor::ReducerConnection> connections = doctor::connectReducers(
      reducers.addresses, probe, [&](size_t answered, size_t total, double seconds) {
        std::fprintf(stderr,
                     "tally doctor: connecting to %zu reducers: %zu answered, %zu waiting "
                     "(%.0f s; at most %lld ms each)\n",
                     total, answered, total - answered, seconds,
                     static_cast<long long>(probe.timeout_ms));
      });
  for (size_t i = 0; i < connections.size(); ++i) {
    const std::string& address = reducers.addresses[i];
    const doctor::ProbeResult r = doctor::finishProbe(&connections[i], probe);
    report.add(doctor::describeProbe(address, r, probe, credentials));
    if (r.measured) bandwidth.reducer_gbytes_per_s.push_back(r.gbytes_per_s);
  }

  // 5. the link the plugin reports to NCCL, and bandwidth
  const doctor::LinkSpeed link = doctor::workerLinkSpeed(params, reducers, probe.network.get());
  report.add(doctor::checkLink(link, !reducers.addresses.empty()));
  bandwidth.coll_ranks = coll_ranks;
  if (o.worker_gbps > 0) {
    bandwidth.worker_link_gbps = o.worker_gbps;
    bandwidth.link_source = "--worker-gbps";
  } else {
    bandwidth.worker_link_gbps = link.gbps;
    bandwidth.link_source = "link " + link.interface;
  }
  report.add(doctor::checkBandwidth(bandwidth));
  // The tuner's line, as the plugin logs it at each communicator's init: one GPU per CollNet
  // rank's host (doctor cannot see the GPUs), 2.30's getChunkSize assumed.
  if (!reducers.addresses.empty() && coll_ranks >= 2) {
    const model::CollNetSetup tuner =
        model::collNetSetupFrom(params, reducers.addresses.size(), static_cast<size_t>(coll_ranks),
                                static_cast<size_t>(coll_ranks), true);
    report.add({Severity::kPass, "tuner", model::describeTuner(tuner)});
  }

  // 6. NCCL variables
  doctor::NcclCheckContext ctx;
  ctx.coll_ranks = coll_ranks;
  ctx.loads_tally = doctor::libraryIsTally;
  ctx.nccl_version = o.nccl_version.empty() ? doctor::ncclVersionOnThisHost()
                                            : doctor::parseNcclVersion(o.nccl_version);
  for (const CheckResult& r : doctor::checkNcclVariables(env, ctx)) report.add(r);

  return doctor::exitStatus(report.results());
}

}  // namespace

Subcommand addDoctorCommand(CLI::App& parent) {
  auto options = std::make_shared<DoctorOptions>();
  Subcommand cmd;
  cmd.app = parent.add_subcommand(
      "doctor",
      "Check this worker: plugin, cluster spec, reducers (reachable, RTT, bandwidth), NCCL "
      "variables; one PASS/WARN/FAIL line each");
  cmd.app->add_option("--plugin", options->plugin,
                      "Path of libnccl-net-tally.so (default: next to tally)");
  cmd.app
      ->add_option("--timeout", options->timeout,
                   "Connect and per-all-reduce limit for each reducer, with a unit: 500ms, "
                   "5s, 2m (a bare number is refused)")
      ->capture_default_str();
  cmd.app
      ->add_option("--probe-bytes", options->probe_bytes,
                   "Bytes of each bandwidth all-reduce (multiple of 4), e.g. 16M")
      ->capture_default_str();
  cmd.app
      ->add_option("--probe-seconds", options->probe_seconds,
                   "How long to measure each reducer's bandwidth")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 60.0));
  cmd.app
      ->add_option("--worker-gbps", options->worker_gbps,
                   "This worker's link speed in Gb/s (default: TALLY_LINK_MBPS, else "
                   "/sys/class/net)")
      ->check(CLI::NonNegativeNumber);
  cmd.app->add_option("--nccl-version", options->nccl_version,
                      "The NCCL the job runs, e.g. 2.28.9 (PyTorch: torch.cuda.nccl.version()); "
                      "default: libnccl.so.2's on this host");
  cmd.app->add_flag("--verbose", options->verbose, "Show Tally's own log lines on stderr");
  cmd.app->footer(
      "Exit status: 0 every check passed, 1 a WARN and no FAIL, 2 any FAIL, 3 bad options.\n"
      "See docs/doctor.md for what each check means and what to do about a FAIL.");
  cmd.run = [options] { return runDoctor(*options); };
  cmd.usage_exit = kExitBadOptions;
  return cmd;
}

}  // namespace tally::commands
