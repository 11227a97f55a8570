// SPDX-License-Identifier: Apache-2.0
// Choosing network interfaces by a TALLY_SOCKET_IFNAME spec, split from the system query so the
// matching can be tested on a made-up list.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "transport/tcp/tcp.h"

namespace tally::transport::tcp {

// Picks from `candidates` (one entry per interface, in preference order) those `spec` selects:
//   ""            every non-loopback candidate; the loopback ones when there is no other
//   "eth,ib"      names starting with "eth" or "ib"
//   "=eth0,eth1"  exactly these names
//   "^docker,lo"  every name not starting with these ("^=" excludes exact names)
// Empty entries in the list are ignored. Fails with kInvalidUsage naming the spec when nothing
// is selected; *out is written only on success.
Status selectInterfaces(const std::string& spec, const std::vector<Interface>& candidates,
                        std::vector<Interface>* out);

// The interfaces of this host that are up and have an address, one entry each (its IPv4
// address, else its IPv6 one; link-local IPv6 carries "%name"), ordered: non-loopback with IPv4,
// non-loopback with IPv6 only, loopback.
Status listInterfaces(std::vector<Interface>* out);

}  // namespace tally::transport::tcp
