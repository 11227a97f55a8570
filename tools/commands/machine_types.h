// Egress bandwidth of the Compute Engine machine types a Vertex AI job runs on, for `tally plan`.
//
// The figure is the VM's maximum egress rate in Gbps with the default network tier, as Compute
// Engine publishes it (docs/plan.md lists every row and where it comes from):
//   - n1 and n2 standard/highmem/highcpu shapes without GPUs: 2 Gbps per vCPU, at most 32;
//   - GPU hosts, by machine type and attached GPUs: an n1-*-96 with 8 x NVIDIA_TESLA_V100,
//     a2-highgpu-8g, a2-ultragpu-8g and a2-megagpu-16g: 100 Gbps.
// Anything else is unknown: the lookup fails and asks for `--bandwidth MACHINE=GBPS`, which also
// overrides a known figure (Tier_1 networking, a newer published number).
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
// leaving *overrides untouched.
Status parseBandwidthOverride(const std::string& text, BandwidthOverrides* overrides);

struct Egress {
  double gbps = 0;
  std::string source;  // how the figure was found, e.g. "n1 rule: 2 Gbps x 16 vCPUs, max 32"
};

// The egress of one replica of `machine_type` with `accelerator_count` x `accelerator_type`
// attached (type empty and count 0 for none). kInvalidUsage naming the machine and asking for
// --bandwidth when the figure is unknown; *out is written only on success.
Status machineEgress(const std::string& machine_type, const std::string& accelerator_type,
                     int64_t accelerator_count, const BandwidthOverrides& overrides, Egress* out);

// The fixed rows of the table (GPU hosts), for `tally plan` output and docs/plan.md.
struct GpuHostRow {
  const char* machine_type;
  const char* accelerator_type;  // "" when the machine type fixes its GPUs (a2)
  int64_t accelerator_count;     // 0 with an empty accelerator_type
  double gbps;
};
const std::vector<GpuHostRow>& gpuHostTable();

}  // namespace tally::plan
