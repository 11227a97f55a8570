// Raw TCP sockets to a reducer for tests that play a misbehaving peer: a plain connect, and a
// connection of one or more streams that said the TCP transport's hello and then do whatever the
// test makes them do (nothing, junk, a stall). Loopback only.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "transport/tcp/fd.h"
#include "transport/tcp/wire.h"

namespace tally::reducer::test {

// The port of "HOST:PORT".
inline int portOf(const std::string& address) {
  return std::stoi(address.substr(address.rfind(':') + 1));
}

// A socket connected to 127.0.0.1:port that has said nothing; invalid when none could be made.
// Close-on-exec, so a reducer started later does not inherit it.
inline transport::tcp::Fd rawConnect(int port) {
  transport::tcp::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return fd;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return transport::tcp::Fd();
  }
  return fd;
}

// One connection of `streams` raw sockets to `address`, each of which sent its transport hello
// (connection `id`). Empty when a socket could not be connected or its hello not sent whole.
inline std::vector<transport::tcp::Fd> connectStreams(const std::string& address, int streams,
                                                      uint64_t id) {
  std::vector<transport::tcp::Fd> fds;
  for (int i = 0; i < streams; ++i) {
    transport::tcp::Fd fd = rawConnect(portOf(address));
    if (!fd.valid()) return {};
    transport::tcp::Hello hello;
    hello.index = static_cast<uint16_t>(i);
    hello.count = static_cast<uint16_t>(streams);
    hello.connection_id = id;
    hello.min_stripe = 64 * 1024;
    uint8_t bytes[transport::tcp::kHelloBytes];
    transport::tcp::encodeHello(hello, bytes);
    if (::send(fd.get(), bytes, sizeof(bytes), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(sizeof(bytes))) {
      return {};
    }
    fds.push_back(std::move(fd));
  }
  return fds;
}

}  // namespace tally::reducer::test
