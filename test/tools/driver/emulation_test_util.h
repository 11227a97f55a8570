// SPDX-License-Identifier: Apache-2.0
// Shared by the emulated-cluster tests: whether emulation works here, a shell probe of what
// exists, and bounded TCP helpers for children entered into nodes.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "tools/driver/emulated_cluster.h"

namespace tally::driver::test {

// stdout and stderr of a shell command (tests only; the library never uses a shell).
inline std::string shell(const std::string& command) {
  std::string out;
  FILE* f = ::popen((command + " 2>&1").c_str(), "r");
  if (f == nullptr) return "popen failed";
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  ::pclose(f);
  return out;
}

// "tly<pid>-": the prefix of every namespace a run of `pid` makes.
inline std::string runPrefix(pid_t pid) { return "tly" + std::to_string(pid) + "-"; }

// True when `ip netns list` shows a namespace of the run of `pid`.
inline bool anyNamespaceOf(pid_t pid) {
  return shell("ip netns list").find(runPrefix(pid)) != std::string::npos;
}

// Root, iproute2 present and a one-node cluster can really be made (containers without
// CAP_SYS_ADMIN fail there). Probed once per process.
inline bool emulationAvailable(std::string* why) {
  static bool probed = false, ok = false;
  static std::string reason;
  if (!probed) {
    probed = true;
    ok = EmulatedCluster::canEmulate(&reason);
    if (ok) {
      EmulationOptions options;
      options.nodes = 1;
      std::unique_ptr<EmulatedCluster> cluster;
      Status s = EmulatedCluster::create(options, &cluster);
      ok = s.isOk() && cluster->destroy().isOk();
      if (!ok) reason = "ip netns does not work here: " + s.toString();
    }
  }
  *why = reason;
  return ok;
}

class EmulationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!emulationAvailable(&why)) GTEST_SKIP() << "emulated cluster unavailable: " << why;
  }
};

inline sockaddr_in ipv4(const std::string& host, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  return a;
}

// A connected, blocking TCP socket to host:port, or -errno; waits at most timeout_ms.
inline int connectWithin(const std::string& host, int port, int timeout_ms) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  sockaddr_in a = ipv4(host, port);
  int r = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  int err = r == 0 ? 0 : errno;
  if (err == EINPROGRESS) {
    pollfd p = {fd, POLLOUT, 0};
    err = ::poll(&p, 1, timeout_ms) == 1 ? 0 : ETIMEDOUT;
    socklen_t len = sizeof(int);
    if (err == 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  }
  if (err != 0) {
    ::close(fd);
    return -err;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace tally::driver::test
