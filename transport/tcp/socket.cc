// SPDX-License-Identifier: Apache-2.0
#include "transport/tcp/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace tally::transport::tcp {

uint16_t SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SockAddr::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

std::string SockAddr::toString() const {
  char host[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = {};
  if (family() == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    std::string text = std::string("[") + host;
    char scope[IF_NAMESIZE] = {};
    if (in6->sin6_scope_id != 0 && if_indextoname(in6->sin6_scope_id, scope) != nullptr) {
      text += "%";
      text += scope;
    }
    return text + "]:" + std::to_string(port());
  }
  return "<unknown address family " + std::to_string(family()) + ">";
}

Status resolve(const std::string& host, uint16_t port, bool passive, SockAddr* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  if (passive) hints.ai_flags |= AI_PASSIVE;
  const char* node = host.empty() ? (passive ? "0.0.0.0" : "127.0.0.1") : host.c_str();
  addrinfo* result = nullptr;
  int rc = getaddrinfo(node, nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    return Status::invalidUsage("cannot resolve \"" + host + "\": " + gai_strerror(rc));
  }
  SockAddr addr;
  std::memcpy(&addr.storage, result->ai_addr, result->ai_addrlen);
  addr.length = result->ai_addrlen;
  freeaddrinfo(result);
  addr.setPort(port);
  *out = addr;
  return Status::ok();
}

Status localAddress(int fd, SockAddr* out) {
  SockAddr addr;
  addr.length = sizeof(addr.storage);
  if (getsockname(fd, addr.get(), &addr.length) != 0) {
    return Status::fromErrno("getsockname", errno);
  }
  *out = addr;
  return Status::ok();
}

Status peerAddress(int fd, SockAddr* out) {
  SockAddr addr;
  addr.length = sizeof(addr.storage);
  if (getpeername(fd, addr.get(), &addr.length) != 0) {
    return Status::fromErrno("getpeername", errno);
  }
  *out = addr;
  return Status::ok();
}

Status newSocket(int family, Fd* out) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
  if (fd < 0) return Status::fromErrno("socket", errno);
  *out = Fd(fd);
  return Status::ok();
}

Status setNonBlocking(int fd, bool non_blocking) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return Status::fromErrno("fcntl(F_GETFL)", errno);
  flags = non_blocking ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, flags) != 0) return Status::fromErrno("fcntl(F_SETFL)", errno);
  return Status::ok();
}

Status setIoTimeout(int fd, int64_t timeout_ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout_ms % 1000) * 1000);
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0) {
    return Status::fromErrno("setsockopt(SO_RCVTIMEO)", errno);
  }
  if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return Status::fromErrno("setsockopt(SO_SNDTIMEO)", errno);
  }
  return Status::ok();
}

Status setNoDelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return Status::fromErrno("setsockopt(TCP_NODELAY)", errno);
  }
  return Status::ok();
}

}  // namespace tally::transport::tcp
