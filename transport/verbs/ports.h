// SPDX-License-Identifier: Apache-2.0
// Which RDMA device ports the verbs transport uses.
//
// TALLY_IB_HCA (VerbsOptions::hca) picks ports by device name: a comma list of name prefixes,
// each optionally with ":port" (1-based); a leading '^' excludes the listed ports instead, a
// leading '=' (after any '^') makes names match exactly. "mlx5_0:1,mlx5_1" takes port 1 of
// mlx5_0 (and of mlx5_0x..., a prefix match) and every port of mlx5_1...; "^=mlx5_2" takes
// everything but mlx5_2. Empty: every active port. Only active ports are ever chosen.
//
// The selection is a pure function over PortRecords, so it is tested without a device;
// listPorts() produces the records from libibverbs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/verbs/loader.h"

namespace tally::transport::verbs {

struct PortRecord {
  std::string device;   // "mlx5_0"
  int port = 1;         // 1-based
  bool active = false;  // IBV_PORT_ACTIVE
  int link_layer = 0;   // IBV_LINK_LAYER_INFINIBAND or IBV_LINK_LAYER_ETHERNET
  int speed_mbps = 0;
};

struct HcaSpec {
  struct Entry {
    std::string name;
    int port = 0;  // 0: every port
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Entry> entries;
};

// Parses the TALLY_IB_HCA syntax. Fails with kInvalidUsage naming the bad item (an empty name,
// a port that is not a number from 1 to 255).
Status parseHcaSpec(const std::string& text, HcaSpec* out);

// The active ports that `spec` selects, in the order of `ports`. Fails with kInvalidUsage when
// none is left, naming the spec and listing the ports that exist and their states.
Status selectPorts(const std::string& spec, const std::vector<PortRecord>& ports,
                   std::vector<PortRecord>* out);

// Link speed in Mb/s from ibv_port_attr's active_width and active_speed codes; 0 when unknown.
int portSpeedMbps(uint8_t active_width, uint8_t active_speed);

// One GID table entry, as sysfs describes it.
struct GidEntry {
  int index = 0;
  uint8_t gid[16] = {};
  std::string type;  // sysfs gid_attrs/types: "RoCE v2", "IB/RoCE v1"
};

// The GID index a RoCE port should use: RoCE v2 with an IPv4-mapped address first, then RoCE v2
// with any other non-zero, non-link-local address, then any non-zero entry. -1 when none is
// usable.
int chooseGidIndex(const std::vector<GidEntry>& entries);

// Every port of every device libibverbs lists. Fails with kInvalidUsage "no RDMA device" when
// the list is empty (or libibverbs cannot list devices at all).
Status listPorts(const VerbsApi& api, std::vector<PortRecord>* out);

// The GID entries of `port`, from sysfs under `sys_class_infiniband` and ibv_query_gid.
Status readGidEntries(const VerbsApi& api, ibv_context* context, const std::string& device,
                      int port, int table_size, std::vector<GidEntry>* out,
                      const std::string& sys_class_infiniband = "/sys/class/infiniband");

}  // namespace tally::transport::verbs
