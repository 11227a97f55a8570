// SPDX-License-Identifier: Apache-2.0
// Helpers for the transport tests: connected pairs over loopback, byte patterns, deadlines.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/tcp/tcp.h"
#include "transport/transport.h"

namespace tally::transport::test {

// Every bounded wait in these tests uses this; a test that needs longer is broken.
inline constexpr int64_t kWaitMs = 20000;

inline std::vector<uint8_t> pattern(size_t size, uint32_t seed) {
  std::vector<uint8_t> bytes(size);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < size; ++i) {
    x = x * 1103515245u + 12345u;
    bytes[i] = static_cast<uint8_t>(x >> 16);
  }
  return bytes;
}

// Steps `pending` and accepts on `listener` until both sides have their connection.
inline Status finishConnect(PendingConnection* pending, Listener* listener,
                            std::unique_ptr<Connection>* client,
                            std::unique_ptr<Connection>* server) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  while (!*client || !*server) {
    if (!*client) TALLY_RETURN_IF_ERROR(pending->step(client));
    if (!*server) TALLY_RETURN_IF_ERROR(listener->accept(server));
    if (std::chrono::steady_clock::now() > deadline) return Status::timeout("connect in test");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return Status::ok();
}

inline std::shared_ptr<Device> loopbackDevice(const tcp::TcpOptions& options = {}) {
  std::shared_ptr<Device> device;
  Status status = tcp::createDevice({"lo", "127.0.0.1", true}, options, &device);
  EXPECT_TRUE(status.isOk()) << status.toString();
  return device;
}

// A connected pair over a loopback TCP device.
inline Status tcpPair(const tcp::TcpOptions& options, const ConnectionOptions& conn_options,
                      std::unique_ptr<Connection>* client, std::unique_ptr<Connection>* server) {
  std::shared_ptr<Device> device = loopbackDevice(options);
  if (!device) return Status::internal("no loopback device");
  std::unique_ptr<Listener> listener;
  TALLY_RETURN_IF_ERROR(device->listen(&listener));
  std::unique_ptr<PendingConnection> pending;
  TALLY_RETURN_IF_ERROR(device->connect(listener->handle(), conn_options, &pending));
  return finishConnect(pending.get(), listener.get(), client, server);
}

}  // namespace tally::transport::test
