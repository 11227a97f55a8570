// SPDX-License-Identifier: Apache-2.0
// Socket helpers shared by the TCP backend: addresses, parsing, socket options.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "common/status.h"
#include "transport/tcp/fd.h"

namespace tally::transport::tcp {

// A resolved socket address (IPv4 or IPv6).
struct SockAddr {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const { return storage.ss_family; }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* get() { return reinterpret_cast<sockaddr*>(&storage); }
  uint16_t port() const;
  void setPort(uint16_t port);
  // "10.0.0.1:5000" or "[fe80::1%eth0]:5000".
  std::string toString() const;
};

// Resolves host (a name or a numeric address, IPv6 may carry "%scope") with getaddrinfo. An
// empty host with `passive` is the IPv4 wildcard. The first result wins.
Status resolve(const std::string& host, uint16_t port, bool passive, SockAddr* out);

// The address a connected or bound socket has on this side / the peer side.
Status localAddress(int fd, SockAddr* out);
Status peerAddress(int fd, SockAddr* out);

// A new TCP socket for `family`, non-blocking, close-on-exec.
Status newSocket(int family, Fd* out);
Status setNonBlocking(int fd, bool non_blocking);
// TCP_NODELAY: messages are framed by us, Nagle only adds latency.
Status setNoDelay(int fd);
// SO_RCVTIMEO and SO_SNDTIMEO: a blocking recv or send that moves nothing for timeout_ms fails with
// EAGAIN.
Status setIoTimeout(int fd, int64_t timeout_ms);

}  // namespace tally::transport::tcp
