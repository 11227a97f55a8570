// Machine type shapes, the egress table, the n1/n2 per-vCPU rule and the Tier_1 rows. Where each
// figure comes from is in docs/plan.md.
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
  std::string_view family;
  std::string_view type;
  std::vector<int> sizes;  // vCPUs, or GPUs when gpu_sizes
  bool gpu_sizes = false;  // the size is a GPU count written "<n>g" (a2, a3)
};

// The predefined machine types of the families a Vertex AI training job runs on (Compute
// Engine's general-purpose, compute-optimized and accelerator-optimized machine tables).
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> table = {
      {"n1", "standard", {1, 2, 4, 8, 16, 32, 64, 96}},
      {"n1", "highmem", {2, 4, 8, 16, 32, 64, 96}},
      {"n1", "highcpu", {2, 4, 8, 16, 32, 64, 96}},
      {"n2", "standard", {2, 4, 8, 16, 32, 48, 64, 80, 96, 128}},
      {"n2", "highmem", {2, 4, 8, 16, 32, 48, 64, 80, 96, 128}},
      {"n2", "highcpu", {2, 4, 8, 16, 32, 48, 64, 80, 96}},
      {"n2d", "standard", {2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224}},
      {"n2d", "highmem", {2, 4, 8, 16, 32, 48, 64, 80, 96}},
      {"n2d", "highcpu", {2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224}},
      {"e2", "standard", {2, 4, 8, 16, 32}},
      {"e2", "highmem", {2, 4, 8, 16}},
      {"e2", "highcpu", {2, 4, 8, 16, 32}},
      {"c2", "standard", {4, 8, 16, 30, 60}},
      {"c2d", "standard", {2, 4, 8, 16, 32, 56, 112}},
      {"c2d", "highmem", {2, 4, 8, 16, 32, 56, 112}},
      {"c2d", "highcpu", {2, 4, 8, 16, 32, 56, 112}},
      {"c3", "standard", {4, 8, 22, 44, 88, 176}},
      {"c3", "highmem", {4, 8, 22, 44, 88, 176}},
      {"c3", "highcpu", {4, 8, 22, 44, 88, 176}},
      {"g2", "standard", {4, 8, 12, 16, 24, 32, 48, 96}},
      {"a2", "highgpu", {1, 2, 4, 8}, true},
      {"a2", "megagpu", {16}, true},
      {"a2", "ultragpu", {1, 2, 4, 8}, true},
      {"a3", "highgpu", {1, 2, 4, 8}, true},
      {"a3", "megagpu", {8}, true},
      {"a3", "ultragpu", {8}, true},
      {"a3", "edgegpu", {8}, true},
  };
  return table;
}

// "16" -> 16: 1 to 3 digits, no leading zero; 0 otherwise.
int smallNumber(std::string_view text) {
  if (text.empty() || text.size() > 3 || text.front() == '0' ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return 0;
  }
  return std::atoi(std::string(text).c_str());
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

// The Tier_1 figure for a CPU machine of this shape, or 0 when Tier_1 does not apply.
double tier1Gbps(const MachineShape& shape) {
  double gbps = 0;
  for (const auto& row : tier1Table()) {
    if (shape.family == row.family && shape.vcpus >= row.min_vcpus) gbps = row.gbps;
  }
  return gbps;
}

}  // namespace

std::string knownFamiliesText() {
  std::string cpu, gpu;
  for (const auto& shape : shapes()) {
    std::string& list = shape.gpu_sizes ? gpu : cpu;
    std::string family(shape.family);
    if (list.find(family + ",") == std::string::npos && !list.ends_with(family)) {
      list += (list.empty() ? "" : ", ") + family;
    }
  }
  return cpu + " (<family>-<type>-<vCPUs>, e.g. n1-highcpu-16); " + gpu +
         " (<family>-<type>-<GPUs>g, e.g. a2-highgpu-8g)";
}

Status parseMachineType(const std::string& machine_type, MachineShape* out) {
  for (const auto& shape : shapes()) {
    std::string prefix = std::string(shape.family) + "-" + std::string(shape.type) + "-";
    if (!machine_type.starts_with(prefix)) continue;
    std::string_view size = std::string_view(machine_type).substr(prefix.size());
    if (shape.gpu_sizes) {
      if (!size.ends_with("g")) continue;
      size.remove_suffix(1);
    }
    int n = smallNumber(size);
    if (n == 0 || std::find(shape.sizes.begin(), shape.sizes.end(), n) == shape.sizes.end()) {
      continue;
    }
    MachineShape parsed;
    parsed.family = std::string(shape.family);
    parsed.type = std::string(shape.type);
    (shape.gpu_sizes ? parsed.gpus : parsed.vcpus) = n;
    *out = parsed;
    return Status::ok();
  }
  return Status::invalidUsage("unknown machine type " + machine_type +
                              ": expected a predefined Compute Engine machine type of a known "
                              "family: " +
                              knownFamiliesText());
}

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

const std::vector<Tier1Row>& tier1Table() {
  // Compute Engine, "Configure per VM Tier_1 networking performance"
  // (https://cloud.google.com/compute/docs/networking/configure-vm-with-high-bandwidth-configuration):
  // Tier_1 is offered on N2, N2D, C2, C2D (and C3) VMs with at least 30 vCPUs, and "Network
  // bandwidth" (https://cloud.google.com/compute/docs/network-bandwidth) puts N2, N2D, C2 and
  // C2D with Tier_1 at up to 100 Gbps. The steps by vCPU count below are the Tier_1 page's
  // bandwidth table as recalled when this was written, not re-read in full: docs/plan.md says so,
  // and --bandwidth overrides any row. C3 is left out (its figures reach 200 Gbps and its default
  // figure is not in this table).
  static const std::vector<Tier1Row> rows = {
      {"n2", 32, 50}, {"n2", 48, 75},  {"n2", 64, 100}, {"n2d", 48, 50},   {"n2d", 96, 100},
      {"c2", 30, 50}, {"c2", 60, 100}, {"c2d", 56, 50}, {"c2d", 112, 100},
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
                     int64_t accelerator_count, const EgressOptions& options, Egress* out) {
  MachineShape shape;
  TALLY_RETURN_IF_ERROR(parseMachineType(machine_type, &shape));
  if (auto it = options.overrides.find(machine_type); it != options.overrides.end()) {
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
  if (options.tier1 && accelerator_count <= 0) {
    if (double gbps = tier1Gbps(shape); gbps > 0) {
      *out = Egress{gbps,
                    "Tier_1: " + shape.family + " with " + std::to_string(shape.vcpus) + " vCPUs"};
      return Status::ok();
    }
  }
  bool cpu_rule = (shape.family == "n1" || shape.family == "n2") &&
                  (shape.type == "standard" || shape.type == "highmem" || shape.type == "highcpu");
  if (cpu_rule && shape.vcpus >= kCpuRuleMinVcpus && accelerator_count <= 0) {
    double gbps = std::min(kGbpsPerVcpu * shape.vcpus, kCpuRuleMaxGbps);
    *out = Egress{
        gbps, shape.family + " rule: 2 Gbps x " + std::to_string(shape.vcpus) + " vCPUs, max 32"};
    return Status::ok();
  }
  return Status::invalidUsage("no egress bandwidth known for " +
                              describeMachine(machine_type, accelerator_type, accelerator_count) +
                              ": pass --bandwidth " + machine_type +
                              "=GBPS with its published maximum egress in Gbps");
}

}  // namespace tally::plan
