// SPDX-License-Identifier: Apache-2.0
// Machine type shapes, the egress table, the n1/n2 per-vCPU rule and the Tier_1 rows. Where each
// figure comes from is in docs/plan.md.
#include "tools/commands/machine_types.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "common/suggest.h"

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
  // GPUs that come with each size, where the name counts vCPUs but the machine type has GPUs (g2).
  std::vector<int> gpus_by_size = {};
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
      {"g2", "standard", {4, 8, 12, 16, 24, 32, 48, 96}, false, {1, 1, 1, 1, 2, 1, 4, 8}},
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

// Memory per vCPU in GiB of the families whose names count vCPUs, as Compute Engine's machine
// tables give it; 0 for a shape not listed.
double gibPerVcpu(std::string_view family, std::string_view type) {
  struct Row {
    std::string_view family;
    std::string_view type;
    double gib;
  };
  static constexpr Row kRows[] = {
      {"n1", "standard", 3.75}, {"n1", "highmem", 6.5}, {"n1", "highcpu", 0.9},
      {"n2", "standard", 4},    {"n2", "highmem", 8},   {"n2", "highcpu", 1},
      {"n2d", "standard", 4},   {"n2d", "highmem", 8},  {"n2d", "highcpu", 1},
      {"e2", "standard", 4},    {"e2", "highmem", 8},   {"e2", "highcpu", 1},
      {"c2", "standard", 4},    {"c2d", "standard", 4}, {"c2d", "highmem", 8},
      {"c2d", "highcpu", 2},    {"c3", "standard", 4},  {"c3", "highmem", 8},
      {"c3", "highcpu", 2},     {"g2", "standard", 4},
  };
  for (const Row& row : kRows) {
    if (row.family == family && row.type == type) return row.gib;
  }
  return 0;
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

// Whether an N1 or N2 VM with these GPUs has its machine type's own figure: without GPUs; N1 with
// P100, P4 or K80 GPUs (their maximum is the N1 one); N1 with T4 or V100 GPUs below the vCPUs the
// table's row for their count asks for (a row that matched would have been taken already).
bool n1KeepsItsOwnFigure(const MachineShape& shape, const std::string& accelerator_type,
                         int64_t accelerator_count) {
  if (accelerator_count <= 0) return true;
  if (shape.family != "n1") return false;
  if (accelerator_type == "NVIDIA_TESLA_P100" || accelerator_type == "NVIDIA_TESLA_P4" ||
      accelerator_type == "NVIDIA_TESLA_K80") {
    return true;
  }
  for (const auto& row : gpuHostTable()) {
    if (row.machine == shape.family && accelerator_type == row.accelerator_type &&
        accelerator_count == row.accelerator_count) {
      return true;
    }
  }
  return false;
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
    parsed.memory_gib = parsed.vcpus * gibPerVcpu(shape.family, shape.type);
    if (!shape.gpus_by_size.empty()) {
      size_t index = static_cast<size_t>(std::find(shape.sizes.begin(), shape.sizes.end(), n) -
                                         shape.sizes.begin());
      parsed.gpus = shape.gpus_by_size[index];
    }
    *out = parsed;
    return Status::ok();
  }
  return Status::invalidUsage("unknown machine type " + machine_type +
                              ": expected a predefined Compute Engine machine type of a known "
                              "family: " +
                              knownFamiliesText());
}

const std::vector<GpuHostRow>& gpuHostTable() {
  // Compute Engine, "Networking and GPU machines" (formerly "Network bandwidths and GPUs",
  // https://cloud.google.com/compute/docs/gpus/gpu-network-bandwidth): A2, A3 and G2 machine types
  // by machine type; N1 with T4 or V100 GPUs by GPU count once the VM has the vCPUs that count
  // needs (below that, and with P100 or P4 GPUs, an N1 VM has its machine type's own figure).
  // a3-highgpu-8g and a3-megagpu-8g spread 1,000 and 1,800 Gbps over five and nine 200 Gbps NICs
  // of which one is for general traffic and the rest for GPU-to-GPU traffic (GPUDirect-TCPX/O) on
  // networks of their own; the reducers are reached over the general NIC, so the row is its 200.
  static const std::vector<GpuHostRow> rows = {
      {"n1", "NVIDIA_TESLA_T4", 1, 24, 50, "N1 + 1 x T4 at 24 or more vCPUs"},
      {"n1", "NVIDIA_TESLA_T4", 2, 48, 50, "N1 + 2 x T4 at 48 or more vCPUs"},
      {"n1", "NVIDIA_TESLA_T4", 4, 96, 100, "N1 + 4 x T4 at 96 vCPUs"},
      {"n1", "NVIDIA_TESLA_V100", 1, 12, 24, "N1 + 1 x V100 at 12 or more vCPUs"},
      {"n1", "NVIDIA_TESLA_V100", 2, 24, 32, "N1 + 2 x V100 at 24 or more vCPUs"},
      {"n1", "NVIDIA_TESLA_V100", 4, 48, 100, "N1 + 4 x V100 at 48 or more vCPUs"},
      {"n1", "NVIDIA_TESLA_V100", 8, 96, 100, "N1 + 8 x V100 at 96 vCPUs"},
      {"a2-highgpu-1g", "", 0, 0, 24, "A2 Standard"},
      {"a2-highgpu-2g", "", 0, 0, 32, "A2 Standard"},
      {"a2-highgpu-4g", "", 0, 0, 50, "A2 Standard"},
      {"a2-highgpu-8g", "", 0, 0, 100, "A2 Standard"},
      {"a2-megagpu-16g", "", 0, 0, 100, "A2 Standard"},
      {"a2-ultragpu-1g", "", 0, 0, 24, "A2 Ultra"},
      {"a2-ultragpu-2g", "", 0, 0, 32, "A2 Ultra"},
      {"a2-ultragpu-4g", "", 0, 0, 50, "A2 Ultra"},
      {"a2-ultragpu-8g", "", 0, 0, 100, "A2 Ultra"},
      {"a3-highgpu-1g", "", 0, 0, 25, "A3 High, one NIC"},
      {"a3-highgpu-2g", "", 0, 0, 50, "A3 High, one NIC"},
      {"a3-highgpu-4g", "", 0, 0, 100, "A3 High, one NIC"},
      {"a3-highgpu-8g", "", 0, 0, 200, "A3 High, its general-purpose NIC of five"},
      {"a3-megagpu-8g", "", 0, 0, 200, "A3 Mega, its general-purpose NIC of nine"},
      {"g2-standard-4", "", 0, 0, 10, "G2"},
      {"g2-standard-8", "", 0, 0, 16, "G2"},
      {"g2-standard-12", "", 0, 0, 16, "G2"},
      {"g2-standard-16", "", 0, 0, 32, "G2"},
      {"g2-standard-24", "", 0, 0, 32, "G2"},
      {"g2-standard-32", "", 0, 0, 32, "G2"},
      {"g2-standard-48", "", 0, 0, 50, "G2"},
      {"g2-standard-96", "", 0, 0, 100, "G2"},
  };
  return rows;
}

const std::vector<std::string>& acceleratorTypes() {
  // Vertex AI's AcceleratorType (aiplatform v1), without ACCELERATOR_TYPE_UNSPECIFIED, which
  // parseJobSpec reads as no accelerator.
  static const std::vector<std::string> types = {
      "NVIDIA_TESLA_K80",
      "NVIDIA_TESLA_P100",
      "NVIDIA_TESLA_V100",
      "NVIDIA_TESLA_P4",
      "NVIDIA_TESLA_T4",
      "NVIDIA_TESLA_A100",
      "NVIDIA_A100_80GB",
      "NVIDIA_L4",
      "NVIDIA_H100_80GB",
      "NVIDIA_H100_MEGA_80GB",
      "NVIDIA_H200_141GB",
      "NVIDIA_B200",
      "NVIDIA_GB200",
      "NVIDIA_RTX_PRO_6000",
      "TPU_V2",
      "TPU_V3",
      "TPU_V4_POD",
      "TPU_V5_LITEPOD",
  };
  return types;
}

Status checkAcceleratorType(const std::string& accelerator_type) {
  const auto& known = acceleratorTypes();
  if (std::find(known.begin(), known.end(), accelerator_type) != known.end()) {
    return Status::ok();
  }
  std::string message = "unknown accelerator type " + accelerator_type;
  if (std::string near = nearestName(accelerator_type, known); !near.empty()) {
    return Status::invalidUsage(message + " (did you mean " + near + "?)");
  }
  std::string list;
  for (const auto& type : known) list += (list.empty() ? "" : ", ") + type;
  return Status::invalidUsage(message + " (known types: " + list + ")");
}

bool isGpuType(const std::string& accelerator_type) {
  return accelerator_type.starts_with("NVIDIA_");
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
    bool fixed_gpus = row.accelerator_count == 0;  // a2, a3, g2: the machine type brings its GPUs
    bool match = fixed_gpus ? machine_type == row.machine
                            : shape.family == row.machine && shape.vcpus >= row.min_vcpus &&
                                  accelerator_type == row.accelerator_type &&
                                  accelerator_count == row.accelerator_count;
    if (match) {
      *out = Egress{row.gbps, std::string("table: ") + row.source};
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
  if (cpu_rule && shape.vcpus >= kCpuRuleMinVcpus &&
      n1KeepsItsOwnFigure(shape, accelerator_type, accelerator_count)) {
    double gbps = std::min(kGbpsPerVcpu * shape.vcpus, kCpuRuleMaxGbps);
    std::string source =
        shape.family + " rule: 2 Gbps x " + std::to_string(shape.vcpus) + " vCPUs, max 32";
    if (accelerator_count > 0) source += ", as with no GPUs";
    *out = Egress{gbps, source};
    return Status::ok();
  }
  return Status::invalidUsage("no egress bandwidth known for " +
                              describeMachine(machine_type, accelerator_type, accelerator_count) +
                              ": pass --bandwidth " + machine_type +
                              "=GBPS with its published maximum egress in Gbps");
}

}  // namespace tally::plan
