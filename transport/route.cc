// SPDX-License-Identifier: Apache-2.0
#include "transport/route.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/fd.h"
#include "common/strings.h"

namespace tally::transport {
namespace {

// One address of one interface that is up.
struct LocalAddress {
  std::string name;
  sockaddr_storage addr{};
  bool loopback = false;
};

Status localAddresses(std::vector<LocalAddress>* out) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Status::fromErrno("getifaddrs", errno);
  std::vector<LocalAddress> found;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || (ifa->ifa_flags & IFF_UP) == 0) continue;
    const int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    LocalAddress a;
    a.name = ifa->ifa_name;
    a.loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    std::memcpy(&a.addr, ifa->ifa_addr,
                family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    found.push_back(std::move(a));
  }
  freeifaddrs(list);
  *out = std::move(found);
  return Status::ok();
}

// Same family and address; a link-local IPv6 address also needs the same interface.
bool sameAddress(const sockaddr* a, const LocalAddress& local) {
  const auto* b = reinterpret_cast<const sockaddr*>(&local.addr);
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  const auto* a6 = reinterpret_cast<const sockaddr_in6*>(a);
  const auto* b6 = reinterpret_cast<const sockaddr_in6*>(b);
  if (std::memcmp(&a6->sin6_addr, &b6->sin6_addr, sizeof(in6_addr)) != 0) return false;
  return !IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr) || a6->sin6_scope_id == 0 ||
         a6->sin6_scope_id == if_nametoindex(local.name.c_str());
}

std::string numericAddress(const sockaddr* addr) {
  char host[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, host, sizeof(host));
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, host,
              sizeof(host));
  }
  return host;
}

// The source address the kernel picks for datagrams to `dest`.
Status sourceAddressToward(const sockaddr* dest, socklen_t dest_len, sockaddr_storage* source) {
  Fd fd(::socket(dest->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status::fromErrno("socket", errno);
  sockaddr_storage to{};
  std::memcpy(&to, dest, dest_len);
  // A datagram connect needs a port; any will do, nothing is sent.
  if (to.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&to)->sin_port = htons(9);
  } else {
    reinterpret_cast<sockaddr_in6*>(&to)->sin6_port = htons(9);
  }
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), dest_len) != 0) {
    return Status::fromErrno("no route to " + numericAddress(dest) + ": connect", errno);
  }
  socklen_t len = sizeof(*source);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(source), &len) != 0) {
    return Status::fromErrno("getsockname", errno);
  }
  return Status::ok();
}

// The reason's clause for a speed the kernel or the device did not give.
std::string unknownSpeedClause(const std::string& name, bool loopback) {
  const std::string value =
      std::to_string(kUnknownLinkMbps) + " Mb/s, NCCL's value for an " + "unknown speed";
  if (loopback) return "loopback has no link speed (the CPU is its limit), so " + value;
  return name + " reports no speed, so " + value;
}

}  // namespace

Status routeInterface(const std::string& host, Interface* out) {
  if (host.empty()) return Status::invalidUsage("no host to route to");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return Status::invalidUsage("cannot resolve \"" + host + "\": " + ::gai_strerror(rc));
  }
  sockaddr_storage dest{};
  const socklen_t dest_len = found->ai_addrlen;
  std::memcpy(&dest, found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  const auto* dest_addr = reinterpret_cast<const sockaddr*>(&dest);

  std::vector<LocalAddress> locals;
  TALLY_RETURN_IF_ERROR(localAddresses(&locals));
  // An address of this host: the kernel delivers it through loopback.
  for (const LocalAddress& local : locals) {
    if (!sameAddress(dest_addr, local)) continue;
    for (const LocalAddress& lo : locals) {
      if (!lo.loopback) continue;
      out->name = lo.name;
      out->address = numericAddress(dest_addr);
      out->loopback = true;
      return Status::ok();
    }
  }
  sockaddr_storage source{};
  TALLY_RETURN_IF_ERROR(sourceAddressToward(dest_addr, dest_len, &source));
  const auto* source_addr = reinterpret_cast<const sockaddr*>(&source);
  for (const LocalAddress& local : locals) {
    if (!sameAddress(source_addr, local)) continue;
    out->name = local.name;
    out->address = numericAddress(source_addr);
    out->loopback = local.loopback;
    return Status::ok();
  }
  return Status::system("no interface owns " + numericAddress(source_addr) +
                        ", the source address toward " + host);
}

LinkChoice chooseLink(const LinkQuery& query) {
  LinkChoice choice;
  bool routed = false;  // the interface came from the routing table, its speed from sysfs
  std::string why;
  if (!query.peer.empty() && query.over_ip) {
    std::string host;
    uint16_t port = 0;
    Interface iface;
    Status st = splitHostPort(query.peer, &host, &port);
    if (st) st = query.route ? query.route(host, &iface) : routeInterface(host, &iface);
    if (st) {
      routed = true;
      choice.interface = iface.name;
      choice.loopback = iface.loopback;
      why = "reducer " + query.peer + " is routed over " + iface.name;
    } else {
      why = "no route to reducer " + query.peer + " (" + st.message() + ")";
    }
  } else if (!query.peer.empty()) {
    why = "the " + query.transport + " device carries the connections to reducer " + query.peer;
  } else {
    why = "no reducers";
  }
  if (!routed) {
    if (query.device != nullptr) {
      choice.interface = query.device->name;
      choice.loopback = query.device->loopback;
      why += "; net device 0 is " + query.device->name;
    } else {
      why += "; no net device";
    }
  }

  if (query.override_mbps > 0) {
    choice.speed_mbps = static_cast<int>(query.override_mbps);
    choice.speed_known = true;
    why += "; TALLY_LINK_MBPS sets the speed";
  } else {
    int mbps = 0;  // loopback has none
    if (!choice.loopback && query.over_ip && !choice.interface.empty()) {
      mbps = linkSpeedMbps(choice.interface, query.sys_class_net);
    } else if (!choice.loopback && !query.over_ip && query.device != nullptr) {
      mbps = query.device->speed_mbps;
    }
    if (mbps > 0) {
      choice.speed_mbps = mbps;
      choice.speed_known = true;
      why += query.over_ip ? "; " + query.sys_class_net + "/" + choice.interface + "/speed says " +
                                 std::to_string(mbps) + " Mb/s"
                           : "; the device reports " + std::to_string(mbps) + " Mb/s";
    } else {
      choice.speed_mbps = kUnknownLinkMbps;
      why += "; " + unknownSpeedClause(choice.interface, choice.loopback);
    }
  }
  choice.reason = why;
  return choice;
}

std::string describeLink(const LinkChoice& choice) {
  return "link " + (choice.interface.empty() ? std::string("(none)") : choice.interface) + ", " +
         std::to_string(choice.speed_mbps) + " Mb/s told to NCCL: " + choice.reason;
}

}  // namespace tally::transport
