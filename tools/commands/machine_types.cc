// The egress table and the n1/n2 per-vCPU rule. Where each figure comes from is in docs/plan.md.
#include "tools/commands/machine_types.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace tally::plan {
namespace {

constexpr double kGbpsPerVcpu = 2;
constexpr double kCpuRuleMaxGbps = 32;
// Below 8 vCPUs Compute Engine publishes a floor above 2 Gbps per vCPU, so the rule would
// under-count; those shapes are left to --bandwidth rather than guessed.
constexpr int kCpuRuleMinVcpus = 8;

struct Shape {
  std::string_view family;  // "n1", "n2"
  std::string_view kind;    // "standard", "highmem", "highcpu"
  std::vector<int> vcpus;   // the predefined sizes
};

const std::vector<Shape>& cpuShapes() {
  static const std::vector<Shape> shapes = {
      {"n1", "standard", {1, 2, 4, 8, 16, 32, 64, 96}},
      {"n1", "highmem", {2, 4, 8, 16, 32, 64, 96}},
      {"n1", "highcpu", {2, 4, 8, 16, 32, 64, 96}},
      {"n2", "standard", {2, 4, 8, 16, 32, 48, 64, 80, 96, 128}},
      {"n2", "highmem", {2, 4, 8, 16, 32, 48, 64, 80, 96, 128}},
      {"n2", "highcpu", {2, 4, 8, 16, 32, 48, 64, 80, 96}},
  };
  return shapes;
}

// "n1-highcpu-16" -> 16 when it is one of the predefined n1/n2 shapes, else 0.
int cpuShapeVcpus(const std::string& machine_type, std::string* family) {
  for (const auto& shape : cpuShapes()) {
    std::string prefix = std::string(shape.family) + "-" + std::string(shape.kind) + "-";
    if (machine_type.rfind(prefix, 0) != 0) continue;
    std::string_view rest = std::string_view(machine_type).substr(prefix.size());
    if (rest.empty() || rest.size() > 3 || rest.front() == '0' ||
        !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return 0;
    }
    int vcpus = std::atoi(std::string(rest).c_str());
    if (std::find(shape.vcpus.begin(), shape.vcpus.end(), vcpus) == shape.vcpus.end()) return 0;
    *family = std::string(shape.family);
    return vcpus;
  }
  return 0;
}

std::string formatGbps(double gbps) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", gbps);
  return buf;
}

std::string describeMachine(const std::string& machine_type, const std::string& accelerator_type,
                            int64_t accelerator_count) {
  if (accelerator_count <= 0) return machine_type;
  return machine_type + " with " + std::to_string(accelerator_count) + " x " +
         (accelerator_type.empty() ? std::string("(no acceleratorType)") : accelerator_type);
}

}  // namespace

const std::vector<GpuHostRow>& gpuHostTable() {
  // N1 hosts with 8 V100s reach 100 Gbps at the top vCPU count; A2 machine types carry their
  // GPUs in the name, and the 8- and 16-GPU shapes are the 100 Gbps ones.
  static const std::vector<GpuHostRow> rows = {
      {"n1-highmem-96", "NVIDIA_TESLA_V100", 8, 100},
      {"n1-standard-96", "NVIDIA_TESLA_V100", 8, 100},
      {"n1-highcpu-96", "NVIDIA_TESLA_V100", 8, 100},
      {"a2-highgpu-8g", "", 0, 100},
      {"a2-ultragpu-8g", "", 0, 100},
      {"a2-megagpu-16g", "", 0, 100},
  };
  return rows;
}

Status parseBandwidthOverride(const std::string& text, BandwidthOverrides* overrides) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return Status::invalidUsage("--bandwidth " + text + ": expected MACHINE=GBPS, e.g. " +
                                "n1-highcpu-16=32");
  }
  std::string machine = text.substr(0, eq);
  std::string number = text.substr(eq + 1);
  errno = 0;
  char* end = nullptr;
  double gbps = std::strtod(number.c_str(), &end);
  if (errno != 0 || end != number.c_str() + number.size() || !std::isfinite(gbps) || gbps <= 0) {
    return Status::invalidUsage("--bandwidth " + text + ": expected a positive number of Gbps, " +
                                "got \"" + number + "\"");
  }
  (*overrides)[machine] = gbps;
  return Status::ok();
}

Status machineEgress(const std::string& machine_type, const std::string& accelerator_type,
                     int64_t accelerator_count, const BandwidthOverrides& overrides, Egress* out) {
  if (auto it = overrides.find(machine_type); it != overrides.end()) {
    *out = Egress{it->second, "--bandwidth " + machine_type + "=" + formatGbps(it->second)};
    return Status::ok();
  }
  for (const auto& row : gpuHostTable()) {
    if (machine_type != row.machine_type) continue;
    bool fixed_gpus = row.accelerator_count == 0;  // a2: the machine type implies its GPUs
    if (fixed_gpus ||
        (accelerator_type == row.accelerator_type && accelerator_count == row.accelerator_count)) {
      *out = Egress{row.gbps, "table: GPU host"};
      return Status::ok();
    }
  }
  std::string family;
  int vcpus = cpuShapeVcpus(machine_type, &family);
  if (vcpus >= kCpuRuleMinVcpus && accelerator_count <= 0) {
    double gbps = std::min(kGbpsPerVcpu * vcpus, kCpuRuleMaxGbps);
    *out = Egress{gbps, family + " rule: 2 Gbps x " + std::to_string(vcpus) + " vCPUs, max 32"};
    return Status::ok();
  }
  return Status::invalidUsage("no egress bandwidth known for " +
                              describeMachine(machine_type, accelerator_type, accelerator_count) +
                              ": pass --bandwidth " + machine_type +
                              "=GBPS with its published maximum egress in Gbps");
}

}  // namespace tally::plan
