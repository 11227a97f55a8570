// SPDX-License-Identifier: Apache-2.0
#include "transport/tcp/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <map>

#include "common/strings.h"

namespace tally::transport::tcp {
namespace {

bool matchesAny(const std::string& name, const std::vector<std::string>& patterns, bool exact) {
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) {
    return exact ? name == p : name.compare(0, p.size(), p) == 0;
  });
}

}  // namespace

Status selectInterfaces(const std::string& spec, const std::vector<Interface>& candidates,
                        std::vector<Interface>* out) {
  std::vector<Interface> chosen;
  if (spec.empty()) {
    for (const Interface& iface : candidates) {
      if (!iface.loopback) chosen.push_back(iface);
    }
    if (chosen.empty()) {
      for (const Interface& iface : candidates) {
        if (iface.loopback) chosen.push_back(iface);
      }
    }
  } else {
    size_t pos = 0;
    bool exclude = false;
    bool exact = false;
    if (pos < spec.size() && spec[pos] == '^') {
      exclude = true;
      ++pos;
    }
    if (pos < spec.size() && spec[pos] == '=') {
      exact = true;
      ++pos;
    }
    std::vector<std::string> patterns = splitList(spec.substr(pos));
    for (const Interface& iface : candidates) {
      if (matchesAny(iface.name, patterns, exact) != exclude) chosen.push_back(iface);
    }
  }
  if (chosen.empty()) {
    std::string names;
    for (const Interface& iface : candidates) names += (names.empty() ? "" : ",") + iface.name;
    return Status::invalidUsage("no network interface matches \"" + spec +
                                "\" (have: " + (names.empty() ? std::string("none") : names) + ")");
  }
  *out = std::move(chosen);
  return Status::ok();
}

Status listInterfaces(std::vector<Interface>* out) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Status::fromErrno("getifaddrs", errno);
  struct Found {
    Interface iface;
    bool has_v4 = false;
    size_t order = 0;
  };
  std::map<std::string, Found> found;
  size_t order = 0;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || (ifa->ifa_flags & IFF_UP) == 0) continue;
    int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    char host[INET6_ADDRSTRLEN] = {};
    std::string address;
    if (family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(ifa->ifa_addr)->sin_addr, host,
                sizeof(host));
      address = host;
    } else {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(ifa->ifa_addr);
      inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
      address = host;
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) address += std::string("%") + ifa->ifa_name;
    }
    auto [it, inserted] = found.try_emplace(ifa->ifa_name);
    Found& f = it->second;
    if (inserted) {
      f.iface.name = ifa->ifa_name;
      f.iface.loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
      f.order = order++;
    }
    // The first IPv4 address wins; an IPv6 one only until an IPv4 one turns up.
    if (family == AF_INET && !f.has_v4) {
      f.iface.address = address;
      f.has_v4 = true;
    } else if (family == AF_INET6 && !f.has_v4 && f.iface.address.empty()) {
      f.iface.address = address;
    }
  }
  freeifaddrs(list);
  std::vector<const Found*> sorted;
  for (const auto& [name, f] : found) sorted.push_back(&f);
  auto rank = [](const Found* f) { return f->iface.loopback ? 2 : (f->has_v4 ? 0 : 1); };
  std::sort(sorted.begin(), sorted.end(), [&](const Found* a, const Found* b) {
    return rank(a) != rank(b) ? rank(a) < rank(b) : a->order < b->order;
  });
  std::vector<Interface> result;
  for (const Found* f : sorted) result.push_back(f->iface);
  *out = std::move(result);
  return Status::ok();
}

}  // namespace tally::transport::tcp

namespace tally::transport {

// The network layer's interface choice (network.h) is TCP's.
Status findInterfaces(const std::string& spec, std::vector<Interface>* out) {
  std::vector<Interface> candidates;
  TALLY_RETURN_IF_ERROR(tcp::listInterfaces(&candidates));
  return tcp::selectInterfaces(spec, candidates, out);
}

int linkSpeedMbps(const std::string& name, const std::string& sys_class_net) {
  std::ifstream file(sys_class_net + "/" + name + "/speed");
  int speed = 0;
  if (!(file >> speed) || speed <= 0) return 0;
  return speed;
}

}  // namespace tally::transport
