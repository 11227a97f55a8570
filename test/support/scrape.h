// SPDX-License-Identifier: Apache-2.0
// Test helpers for the metrics tests: a plain-socket HTTP GET (no client library, every step
// bounded by a timeout) and a reader for the Prometheus text exposition format.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>

#include "common/status.h"

namespace tally::metrics::test {

// GET http://127.0.0.1:port/path over HTTP/1.0, so the server closes once it has answered.
// On success *body holds what follows the headers; a status other than 200 is an error.
inline Status httpGet(int port, const std::string& path, std::string* body, int timeout_ms = 5000) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::fromErrno("socket", errno);
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  // Linux bounds connect by SO_SNDTIMEO, and each recv by SO_RCVTIMEO.
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::fromErrno("connect to metrics port " + std::to_string(port), errno);
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return Status::fromErrno("send HTTP request", errno);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string response;
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) return Status::fromErrno("recv HTTP response", errno);
    response.append(buf, static_cast<size_t>(n));
    if (std::chrono::steady_clock::now() > deadline) return Status::timeout("HTTP response");
  }
  const size_t end_of_headers = response.find("\r\n\r\n");
  if (end_of_headers == std::string::npos) return Status::remote("no HTTP headers: " + response);
  const std::string status_line = response.substr(0, response.find("\r\n"));
  if (status_line.find(" 200 ") == std::string::npos) {
    return Status::remote("HTTP answer: " + status_line);
  }
  *body = response.substr(end_of_headers + 4);
  return Status::ok();
}

// The value of one series in exposition text: `series` is the name with its labels exactly as
// written, e.g. "tally_reducer_errors_total{cause=\"protocol\"}". Nothing when absent.
inline std::optional<double> seriesValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
  }
  return std::nullopt;
}

}  // namespace tally::metrics::test
