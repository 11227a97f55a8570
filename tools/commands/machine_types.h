// SPDX-License-Identifier: Apache-2.0
// Compute Engine machine types for `tally plan`: which names exist (family, type, size), how many
// vCPUs they have, and their egress bandwidth.
//
// A machine type is a known family shape, "<family>-<type>-<size>": n1, n2, n2d, e2, c2, c2d, c3
// and g2 with a predefined vCPU count (n1-highcpu-16), a2 and a3 with a GPU count (a2-highgpu-8g).
// Anything else is an input error that lists the known families, even when --bandwidth gives its
// figure. An accelerator type is one of Vertex AI's (acceleratorTypes()); a mistyped one is an
// input error that names the nearest.
//
// The egress figure is the VM's maximum egress rate in Gbps, as Compute Engine publishes it
// (docs/plan.md lists every row and where it comes from):
//   - n1 and n2 standard/highmem/highcpu shapes without GPUs: 2 Gbps per vCPU, at most 32;
//   - GPU hosts (gpuHostTable()): a2, a3 and g2 by machine type; n1 with T4 or V100 GPUs by GPU
//     count once the vCPUs reach that count's minimum (below it, and with P100, P4 or K80 GPUs,
//     the n1 rule above);
//   - with Tier_1 networking (--tier1), n2, n2d, c2 and c2d shapes large enough for it: 50, 75 or
//     100 Gbps by vCPU count (tier1Table()).
// Anything else has no known figure: the lookup fails and asks for `--bandwidth MACHINE=GBPS`,
// which also overrides a known figure.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace tally::plan {

// Machine type -> Gbps given with --bandwidth; wins over the table for that machine type, whatever
// GPUs are attached.
using BandwidthOverrides = std::map<std::string, double>;

// Parses one "MACHINE=GBPS" (GBPS a positive number, e.g. "n1-highcpu-16=32" or "x=12.5") into
// *overrides; a repeated machine type takes the later value. kInvalidUsage on anything else,
// leaving *overrides untouched. The machine type itself is checked when it is used.
Status parseBandwidthOverride(const std::string& text, BandwidthOverrides* overrides);

struct MachineShape {
  std::string family;  // "n1", "c2d", "a2"
  std::string type;    // "standard", "highcpu", "megagpu"
  int vcpus = 0;       // from the name; 0 where the name counts GPUs instead (a2, a3)
  int gpus = 0;        // the GPUs the machine type comes with (a2/a3 "8g", g2 by size); 0 for none
  // The machine's memory in GiB (Compute Engine's "GB" are binary), from its type's memory per
  // vCPU (n1-highcpu 0.9, n1-standard 3.75, n2-standard 4, ...); 0 where the name counts GPUs.
  double memory_gib = 0;
};

// Splits a predefined machine type into its shape. kInvalidUsage naming the machine type and
// listing the known families when it is not one; *out is written only on success.
Status parseMachineType(const std::string& machine_type, MachineShape* out);
// "n1, n2, n2d, e2, c2, c2d, c3, g2 (<family>-<type>-<vCPUs>); a2, a3 (<family>-<type>-<GPUs>g)"
std::string knownFamiliesText();

struct EgressOptions {
  BandwidthOverrides overrides;
  bool tier1 = false;  // the VMs use Tier_1 networking (per VM Tier_1 networking performance)
};

struct Egress {
  double gbps = 0;
  std::string source;  // how the figure was found, e.g. "n1 rule: 2 Gbps x 16 vCPUs, max 32"
};

// The egress of one replica of `machine_type` with `accelerator_count` x `accelerator_type`
// attached (type empty and count 0 for none). kInvalidUsage when the machine type is not a known
// shape (even with an override), or naming the machine and asking for --bandwidth when its figure
// is unknown; *out is written only on success.
Status machineEgress(const std::string& machine_type, const std::string& accelerator_type,
                     int64_t accelerator_count, const EgressOptions& options, Egress* out);

// The GPU rows of the table. A row is either a machine type that comes with its GPUs (a2, a3,
// g2: `machine` is its name, whatever acceleratorType says) or `accelerator_count` x
// `accelerator_type` on a machine of family `machine` ("n1") with at least `min_vcpus` vCPUs.
struct GpuHostRow {
  const char* machine;
  const char* accelerator_type;  // "" when the machine type fixes its GPUs
  int64_t accelerator_count;     // 0 with an empty accelerator_type
  int min_vcpus;                 // family rows only
  double gbps;
  const char* source;  // what the output says after "table: ", e.g. "A2 Standard"
};
const std::vector<GpuHostRow>& gpuHostTable();

// Vertex AI's accelerator types (MachineSpec.acceleratorType), without
// ACCELERATOR_TYPE_UNSPECIFIED.
const std::vector<std::string>& acceleratorTypes();
// kInvalidUsage unless `accelerator_type` is one of acceleratorTypes(): "unknown accelerator type
// NVIDIA_TESLA_V10 (did you mean NVIDIA_TESLA_V100?)", or the list when none is near.
Status checkAcceleratorType(const std::string& accelerator_type);
// NVIDIA GPUs (what NCCL and so Tally run on), not TPUs.
bool isGpuType(const std::string& accelerator_type);

// Tier_1 egress by family and vCPU count: a machine of `family` with at least `min_vcpus` gets
// `gbps` (the last row it reaches). Smaller shapes of these families keep their default figure.
struct Tier1Row {
  const char* family;
  int min_vcpus;
  double gbps;
};
const std::vector<Tier1Row>& tier1Table();

}  // namespace tally::plan
