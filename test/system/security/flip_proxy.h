// SPDX-License-Identifier: Apache-2.0
// A TCP proxy for the checksum tests: forwards every connection it accepts to an upstream
// address, byte for byte in both directions, and when armed flips one bit of the first
// occurrence of a byte pattern in one direction (once over all connections). The pattern is a
// payload value the test planted, so the flip lands in a payload, never in a header. Throttled,
// it forwards one direction at a given rate instead: a slow link (the worker's slow-link test).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tally::security_test {

class FlipProxy {
 public:
  enum class Direction { kToServer, kToClient };

  // Listens on 127.0.0.1 (ephemeral port) and forwards to upstream "127.0.0.1:port". Null when
  // the socket calls fail.
  static std::unique_ptr<FlipProxy> start(const std::string& upstream);
  ~FlipProxy();

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // Arms the flip: XOR `mask` into byte `at` of the first `pattern` seen going `dir`.
  void arm(Direction dir, std::vector<uint8_t> pattern, size_t at, uint8_t mask);
  bool flipped() const { return flipped_.load(); }
  // Forwards `dir` at about `bytes_per_second` (at least 100) on every connection from now on.
  void throttle(Direction dir, uint64_t bytes_per_second);
  // Forwards `dir` as fast as it comes again.
  void unthrottle(Direction dir);

 private:
  FlipProxy() = default;
  void acceptLoop();
  void forward(int client, int server);
  // Looks for the pattern in `data` (after the `tail` kept from earlier chunks of this stream);
  // flips in place when found and still armed.
  void maybeFlip(Direction dir, std::vector<uint8_t>* tail, uint8_t* data, size_t n);

  int listen_fd_ = -1;
  int port_ = 0;
  int upstream_port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> forwarders_;
  bool armed_ = false;
  Direction dir_ = Direction::kToServer;
  std::vector<uint8_t> pattern_;
  size_t at_ = 0;
  uint8_t mask_ = 0;
  std::atomic<bool> flipped_{false};
  std::atomic<uint64_t> throttle_rate_[2] = {0, 0};  // by Direction; 0: as fast as it comes
};

}  // namespace tally::security_test
