// SPDX-License-Identifier: Apache-2.0
// Where each input of a prediction came from, and how to calibrate the ones measured elsewhere
// (plan_predict.h).
#include "tools/commands/plan_predict.h"

#include <string>
#include <utility>
#include <vector>

namespace tally::plan {
namespace {

// The defaults of the CPU costs and of the per-call cost come from `tally bench` on loopback on
// 2 shared vCPUs of a 2.1 GHz EPYC (model/allreduce.h), where each sender also pays its
// receiver's TCP work: a host of another size, NIC and CPU costs something else.
constexpr const char* kLoopbackDefault = "default: loopback on a 2-vCPU VM";

}  // namespace

std::vector<PredictInputSource> predictionInputs(const Prediction& p,
                                                 const PredictProvenance& provenance) {
  const PredictInput& in = p.input;
  auto given = [&provenance](const char* flag) { return provenance.given.count(flag) > 0; };
  // The flag when it was given, else "default: " and why the default is what it is.
  auto flagOr = [&given](const char* flag, const std::string& why) {
    return given(flag) ? std::string(flag) : "default: " + why;
  };
  // A CPU cost: the flag when it was given, else the loopback default, uncalibrated.
  auto cpuCost = [&given](const char* name, const char* label, double value, const char* unit,
                          const char* flag) {
    bool from_flag = given(flag);
    return PredictInputSource{name,      label, value, unit, from_flag ? flag : kLoopbackDefault,
                              !from_flag};
  };
  std::vector<PredictInputSource> inputs = {
      {"hosts", "hosts", static_cast<double>(in.hosts), "", provenance.hosts, false},
      {"hostGbps", "host link", in.host_gbps, "Gbps", provenance.host_link, false},
  };
  if (p.has_rs) {
    inputs.push_back(
        {"reducers", "reducers", static_cast<double>(in.reducers), "", provenance.reducers, false});
    inputs.push_back(
        {"reducerGbps", "reducer link", in.reducer_gbps, "Gbps", provenance.reducer_link, false});
  }
  inputs.push_back({"bucketBytes", "bucket", static_cast<double>(in.bucket_bytes), "bytes",
                    flagOr(kBucketFlag, "PyTorch DDP's bucket"), false});
  inputs.push_back({"latencySeconds", "latency", in.latency_s, "s",
                    flagOr(kLatencyFlag, "assumed for VMs in one zone"), false});
  inputs.push_back(
      {"mtu", "MTU", static_cast<double>(in.mtu), "", flagOr(kMtuFlag, "Ethernet's"), false});
  inputs.push_back(cpuCost("ringCpuSecondsPerGib", "ring worker CPU", in.ring_cpu_s_per_gib,
                           "CPU-s/GiB", kRingCpuFlag));
  if (p.has_rs) {
    inputs.push_back(cpuCost("rsWorkerCpuSecondsPerGib", "rs worker CPU", in.worker_cpu_s_per_gib,
                             "CPU-s/GiB", kWorkerCpuFlag));
    inputs.push_back(cpuCost("reducerCpuSecondsPerGib", "reducer CPU", in.reducer_cpu_s_per_gib,
                             "CPU-s/GiB", kReducerCpuFlag));
    inputs.push_back(cpuCost("reducerCallCpuMicroseconds", "reducer call cost",
                             in.reducer_cpu_s_per_rank_call * 1e6, "CPU-us/rank",
                             kReducerCallFlag));
  }
  inputs.push_back({"workerCores", "worker cores", in.worker_cores, "",
                    flagOr(kWorkerCoresFlag, "the posting thread and the progress thread"), false});
  if (p.has_rs) {
    std::string source = given(kReducerCoresFlag)            ? kReducerCoresFlag
                         : !provenance.reducer_cores.empty() ? provenance.reducer_cores
                                                             : "default: a 16-vCPU reducer";
    inputs.push_back({"reducerCores", "reducer cores", in.reducer_cores, "", source, false});
  }
  return inputs;
}

Calibration calibration(const std::vector<PredictInputSource>& inputs) {
  // The bench runs its workers and reducers on the one host it is started on; its 64 MiB rows
  // give the CPU costs per byte, its 4 KiB rows the per-call cost (docs/plan.md says how). The
  // ring's flag is per GiB a worker sends: 2(n-1)/n = 3/2 of its input at the bench's 4 workers.
  const std::pair<const char*, const char*> flags[] = {
      {"ringCpuSecondsPerGib", "--ring-cpu-s-per-gib <ring wcpu at 64M x 2/3>"},
      {"rsWorkerCpuSecondsPerGib", "--worker-cpu-s-per-gib <rs wcpu at 64M>"},
      {"reducerCpuSecondsPerGib", "--reducer-cpu-s-per-gib <rs rcpu at 64M>"},
      {"reducerCallCpuMicroseconds", "--reducer-call-cpu-us <from the 4K rows>"},
  };
  Calibration out;
  for (const auto& input : inputs) {
    if (!input.uncalibrated) continue;
    for (const auto& [name, flag] : flags) {
      if (input.name == name) out.flags.push_back(flag);
    }
  }
  if (!out.flags.empty()) {
    out.command = "tally bench --sizes 64M,4K --algo rs,ring --workers 4 --reducers 2";
  }
  return out;
}

}  // namespace tally::plan
