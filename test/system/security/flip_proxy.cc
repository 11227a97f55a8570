// SPDX-License-Identifier: Apache-2.0
#include "test/system/security/flip_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

namespace tally::security_test {
namespace {

constexpr int kPollMs = 50;

int connectLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

bool writeAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

std::unique_ptr<FlipProxy> FlipProxy::start(const std::string& upstream) {
  std::unique_ptr<FlipProxy> p(new FlipProxy());
  p->upstream_port_ = std::stoi(upstream.substr(upstream.rfind(':') + 1));
  p->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (p->listen_fd_ < 0) return nullptr;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(p->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(p->listen_fd_, 64) != 0 ||
      ::getsockname(p->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return nullptr;
  }
  p->port_ = ntohs(addr.sin_port);
  p->acceptor_ = std::thread([raw = p.get()] { raw->acceptLoop(); });
  return p;
}

FlipProxy::~FlipProxy() {
  stop_.store(true);
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(forwarders_);
  }
  for (auto& t : threads) t.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void FlipProxy::arm(Direction dir, std::vector<uint8_t> pattern, size_t at, uint8_t mask) {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = true;
  dir_ = dir;
  pattern_ = std::move(pattern);
  at_ = at;
  mask_ = mask;
}

void FlipProxy::acceptLoop() {
  while (!stop_.load()) {
    pollfd pfd{listen_fd_, POLLIN, 0};
    if (::poll(&pfd, 1, kPollMs) <= 0) continue;
    int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int server = connectLoopback(upstream_port_);
    if (server < 0) {
      ::close(client);
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    forwarders_.emplace_back([this, client, server] { forward(client, server); });
  }
}

void FlipProxy::maybeFlip(Direction dir, std::vector<uint8_t>* tail, uint8_t* data, size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!armed_ || dir != dir_ || pattern_.empty()) return;
  const size_t k = pattern_.size();
  // Search tail + data; a match must end inside `data` (earlier ones were already searched).
  std::vector<uint8_t> joined(*tail);
  joined.insert(joined.end(), data, data + n);
  auto it = std::search(joined.begin(), joined.end(), pattern_.begin(), pattern_.end());
  if (it != joined.end()) {
    const size_t pos = static_cast<size_t>(it - joined.begin()) + at_;
    if (pos >= tail->size()) {
      data[pos - tail->size()] ^= mask_;
      armed_ = false;
      flipped_.store(true);
    }
    // A match whose flipped byte went out with an earlier chunk cannot be flipped any more:
    // the pattern is planted once per stream, so report nothing and let the test fail.
  }
  const size_t keep = std::min(joined.size(), k - 1);
  tail->assign(joined.end() - static_cast<std::ptrdiff_t>(keep), joined.end());
}

void FlipProxy::throttle(Direction dir, uint64_t bytes_per_second) {
  throttle_rate_[dir == Direction::kToServer ? 0 : 1].store(std::max<uint64_t>(100, bytes_per_second));
}

void FlipProxy::unthrottle(Direction dir) {
  throttle_rate_[dir == Direction::kToServer ? 0 : 1].store(0);
}

void FlipProxy::forward(int client, int server) {
  std::vector<uint8_t> buf(256 * 1024);
  std::vector<uint8_t> tails[2];
  pollfd pfds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
  bool open = true;
  while (open && !stop_.load()) {
    if (::poll(pfds, 2, kPollMs) <= 0) continue;
    for (int i = 0; i < 2 && open; ++i) {
      if ((pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      // Throttled: a hundredth of a second's bytes at a time, then a hundredth of a second.
      const uint64_t rate = throttle_rate_[i].load();
      const size_t room = rate == 0 ? buf.size() : std::min<size_t>(buf.size(), rate / 100);
      ssize_t n = ::recv(pfds[i].fd, buf.data(), room, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        open = false;
        break;
      }
      const Direction dir = i == 0 ? Direction::kToServer : Direction::kToClient;
      maybeFlip(dir, &tails[i], buf.data(), static_cast<size_t>(n));
      if (!writeAll(pfds[1 - i].fd, buf.data(), static_cast<size_t>(n))) open = false;
      if (rate != 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ::close(client);
  ::close(server);
}

}  // namespace tally::security_test
