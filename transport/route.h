// SPDX-License-Identifier: Apache-2.0
// Which interface carries the connections to a peer, and the link speed to report for them.
//
// The interface is the one the kernel routes the peer's address to, not the one TCP would pick
// for its own devices: a reducer on 127.0.0.1 is reached over loopback even when net device 0 is
// eth0, and a reducer on a second network is reached over that network's NIC. The plugin tells
// NCCL that link's speed (CollNet and net device 0 alike) and cuts CollNet slices for it;
// `tally doctor` reports the same choice from the same function.
//
// Threads: every function may be called from any thread; none keeps state.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "transport/network.h"
#include "transport/transport.h"

namespace tally::transport {

// The speed NCCL assumes for a NIC that reports none (its topology turns a speed <= 0 into this),
// and so what Tally reports when neither TALLY_LINK_MBPS nor the kernel gives one.
inline constexpr int kUnknownLinkMbps = 10000;

// The slowest link NCCL (2.21 to 2.30) builds a CollNet channel on: its topology search stops at
// 0.12 GB/s per channel, and a NIC of S Mb/s carries S / 8000 GB/s. Below it NCCL turns CollNet
// off for the communicator (docs/nccl.md).
inline constexpr int kNcclMinCollNetMbps = 960;

// The interface the kernel sends from toward `host` (a numeric IPv4 or IPv6 address, or a name
// resolved with getaddrinfo; the first address wins). An address of this host itself travels
// over loopback whatever interface owns it, so it gives the loopback interface; any other gives
// the interface that owns the source address a UDP socket connected to `host` is bound to (the
// connect consults the routing table and sends nothing). *out (name, that address, loopback) is
// written only on success. Errors: kInvalidUsage when `host` is empty or does not resolve,
// kSystem when there is no route or no interface owns the source address.
Status routeInterface(const std::string& host, Interface* out);

using RouteLookup = std::function<Status(const std::string& host, Interface* out)>;

// What the link choice looks at.
struct LinkQuery {
  int64_t override_mbps = 0;  // TALLY_LINK_MBPS; > 0 wins over everything else
  std::string peer;           // "host:port" the connections go to (the first reducer); may be empty
  // The connections run over the kernel's IP interfaces (TCP): the peer's route names the
  // interface, and sysfs gives its speed. False for ofi and verbs, whose own device carries them
  // and reports its own speed.
  bool over_ip = true;
  std::string transport = "tcp";             // the network's name, for the reason
  const DeviceProperties* device = nullptr;  // net device 0; null when there is none
  std::string sys_class_net = "/sys/class/net";
  RouteLookup route;  // empty: routeInterface
};

struct LinkChoice {
  std::string interface;              // "eth0", "lo", a device name; empty when none was found
  int speed_mbps = kUnknownLinkMbps;  // what NCCL is told, Mb/s, > 0
  // speed_mbps came from TALLY_LINK_MBPS, the kernel or the device, not kUnknownLinkMbps.
  bool speed_known = false;
  bool loopback = false;  // the interface is loopback: slices are cut for the CPU, not a wire
  // Why, in one clause list: "reducer 127.0.0.1:5555 is routed over lo; loopback has no link
  // speed, so 10000 Mb/s, NCCL's value for an unknown speed".
  std::string reason;
};

// The link for the connections to query.peer:
//   1. the interface: with a peer over IP, routeInterface's answer for its host (when that fails,
//      the reason says why and net device 0 stands in); with a peer over ofi or verbs, net
//      device 0; without a peer, net device 0.
//   2. the speed: TALLY_LINK_MBPS when set; else, over IP, the interface's
//      <sys_class_net>/<name>/speed, and the device's own speed otherwise; else kUnknownLinkMbps,
//      which is also what loopback gets: it has no wire, and its rate is the CPU's, which no speed
//      figure describes.
LinkChoice chooseLink(const LinkQuery& query);

// The choice in one line: "link lo, 10000 Mb/s told to NCCL: reducer 127.0.0.1:5555 is routed
// over lo; ...".
std::string describeLink(const LinkChoice& choice);

}  // namespace tally::transport
