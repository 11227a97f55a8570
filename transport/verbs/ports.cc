// SPDX-License-Identifier: Apache-2.0
#include "transport/verbs/ports.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/strings.h"

namespace tally::transport::verbs {
namespace {

bool nameMatches(const std::string& device, const std::string& pattern, bool exact) {
  return exact ? device == pattern : device.compare(0, pattern.size(), pattern) == 0;
}

bool entryMatches(const PortRecord& record, const HcaSpec& spec) {
  return std::any_of(spec.entries.begin(), spec.entries.end(), [&](const HcaSpec::Entry& e) {
    return nameMatches(record.device, e.name, spec.exact) && (e.port == 0 || e.port == record.port);
  });
}

const char* linkLayerName(int link_layer) {
  return link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB";
}

// Lane speed of an active_speed code, in Mb/s (the data rate, after encoding overhead for the
// 64b/66b generations rounded to the marketing figure).
int laneMbps(uint8_t speed) {
  switch (speed) {
    case 1:
      return 2500;  // SDR
    case 2:
      return 5000;  // DDR
    case 4:
      return 10000;  // QDR
    case 8:
      return 10000;  // FDR10
    case 16:
      return 14000;  // FDR
    case 32:
      return 25000;  // EDR
    case 64:
      return 50000;  // HDR
    case 128:
      return 100000;  // NDR
    default:
      return 0;
  }
}

int lanes(uint8_t width) {
  switch (width) {
    case 1:
      return 1;
    case 2:
      return 4;
    case 4:
      return 8;
    case 8:
      return 12;
    case 16:
      return 2;
    default:
      return 0;
  }
}

bool isZero(const uint8_t gid[16]) {
  return std::all_of(gid, gid + 16, [](uint8_t b) { return b == 0; });
}

bool isIpv4Mapped(const uint8_t gid[16]) {
  return std::all_of(gid, gid + 10, [](uint8_t b) { return b == 0; }) && gid[10] == 0xff &&
         gid[11] == 0xff;
}

bool isLinkLocal(const uint8_t gid[16]) { return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80; }

}  // namespace

Status parseHcaSpec(const std::string& text, HcaSpec* out) {
  HcaSpec spec;
  size_t pos = 0;
  if (pos < text.size() && text[pos] == '^') {
    spec.exclude = true;
    ++pos;
  }
  if (pos < text.size() && text[pos] == '=') {
    spec.exact = true;
    ++pos;
  }
  for (const std::string& item : splitList(text.substr(pos))) {
    HcaSpec::Entry entry;
    size_t colon = item.find(':');
    entry.name = item.substr(0, colon);
    if (entry.name.empty()) {
      return Status::invalidUsage("TALLY_IB_HCA \"" + text + "\": item \"" + item +
                                  "\" has no device name");
    }
    if (colon != std::string::npos) {
      std::string digits = item.substr(colon + 1);
      bool numeric =
          !digits.empty() && digits.size() <= 3 &&
          std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
      entry.port = numeric ? std::stoi(digits) : 0;
      if (entry.port < 1 || entry.port > 255) {
        return Status::invalidUsage("TALLY_IB_HCA \"" + text + "\": item \"" + item +
                                    "\" has a bad port (expected 1 to 255)");
      }
    }
    spec.entries.push_back(std::move(entry));
  }
  if ((spec.exclude || spec.exact) && spec.entries.empty()) {
    return Status::invalidUsage("TALLY_IB_HCA \"" + text + "\" names no device");
  }
  *out = std::move(spec);
  return Status::ok();
}

Status selectPorts(const std::string& text, const std::vector<PortRecord>& ports,
                   std::vector<PortRecord>* out) {
  HcaSpec spec;
  TALLY_RETURN_IF_ERROR(parseHcaSpec(text, &spec));
  std::vector<PortRecord> chosen;
  for (const PortRecord& record : ports) {
    if (!record.active) continue;
    if (spec.entries.empty() || entryMatches(record, spec) != spec.exclude) {
      chosen.push_back(record);
    }
  }
  if (chosen.empty()) {
    std::string have;
    for (const PortRecord& r : ports) {
      have += (have.empty() ? "" : ", ") + r.device + ":" + std::to_string(r.port) + " " +
              linkLayerName(r.link_layer) + (r.active ? " active" : " down");
    }
    return Status::invalidUsage("no active RDMA port matches TALLY_IB_HCA \"" + text +
                                "\" (have: " + (have.empty() ? std::string("none") : have) + ")");
  }
  *out = std::move(chosen);
  return Status::ok();
}

int portSpeedMbps(uint8_t active_width, uint8_t active_speed) {
  return lanes(active_width) * laneMbps(active_speed);
}

int chooseGidIndex(const std::vector<GidEntry>& entries) {
  auto find = [&](auto accept) {
    for (const GidEntry& e : entries) {
      if (!isZero(e.gid) && accept(e)) return e.index;
    }
    return -1;
  };
  int index = find([](const GidEntry& e) { return e.type == "RoCE v2" && isIpv4Mapped(e.gid); });
  if (index < 0) {
    index = find([](const GidEntry& e) { return e.type == "RoCE v2" && !isLinkLocal(e.gid); });
  }
  if (index < 0) index = find([](const GidEntry&) { return true; });
  return index;
}

Status listPorts(const VerbsApi& api, std::vector<PortRecord>* out) {
  int count = 0;
  errno = 0;
  ibv_device** list = api.get_device_list(&count);
  if (list == nullptr || count <= 0) {
    int err = errno;
    if (list != nullptr) api.free_device_list(list);
    std::string why = err != 0 ? std::string(" (") + std::strerror(err) + ")" : "";
    return Status::invalidUsage("no RDMA device: libibverbs lists none" + why);
  }
  std::vector<PortRecord> records;
  Status status;
  for (int i = 0; i < count && status.isOk(); ++i) {
    std::string name = api.get_device_name(list[i]);
    ibv_context* context = api.open_device(list[i]);
    if (context == nullptr) {
      status = Status::fromErrno("ibv_open_device " + name, errno);
      break;
    }
    ibv_device_attr device_attr{};
    int rc = api.query_device(context, &device_attr);
    for (int port = 1; rc == 0 && port <= device_attr.phys_port_cnt; ++port) {
      ibv_port_attr attr{};
      if (api.queryPort(context, static_cast<uint8_t>(port), &attr) != 0) {
        rc = errno != 0 ? errno : EIO;
        break;
      }
      PortRecord record;
      record.device = name;
      record.port = port;
      record.active = attr.state == IBV_PORT_ACTIVE;
      record.link_layer = attr.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET
                                                                     : IBV_LINK_LAYER_INFINIBAND;
      record.speed_mbps = portSpeedMbps(attr.active_width, attr.active_speed);
      records.push_back(std::move(record));
    }
    if (rc != 0) status = Status::fromErrno("query RDMA device " + name, rc);
    api.close_device(context);
  }
  api.free_device_list(list);
  TALLY_RETURN_IF_ERROR(status);
  *out = std::move(records);
  return Status::ok();
}

Status readGidEntries(const VerbsApi& api, ibv_context* context, const std::string& device,
                      int port, int table_size, std::vector<GidEntry>* out,
                      const std::string& sys_class_infiniband) {
  std::vector<GidEntry> entries;
  const std::string types =
      sys_class_infiniband + "/" + device + "/ports/" + std::to_string(port) + "/gid_attrs/types/";
  for (int index = 0; index < table_size; ++index) {
    GidEntry entry;
    entry.index = index;
    ibv_gid gid{};
    if (api.query_gid(context, static_cast<uint8_t>(port), index, &gid) != 0) continue;
    std::memcpy(entry.gid, gid.raw, sizeof(entry.gid));
    if (isZero(entry.gid)) continue;
    // The type file is unreadable (EINVAL) for unused entries; the type stays empty then.
    std::ifstream file(types + std::to_string(index));
    std::getline(file, entry.type);
    entries.push_back(std::move(entry));
  }
  *out = std::move(entries);
  return Status::ok();
}

}  // namespace tally::transport::verbs
