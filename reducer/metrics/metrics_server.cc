// SPDX-License-Identifier: Apache-2.0
// MetricsServer: address checks and the Exposer around a ReducerMetrics.
#include "reducer/metrics/metrics_server.h"

#include <arpa/inet.h>

#include <exception>

#include "common/strings.h"
#include "prometheus/exposer.h"
#include "reducer/metrics/reducer_metrics.h"

namespace tally::metrics {
namespace {

// Splits "HOST:PORT". IPv4 only: the civetweb that Debian ships (under prometheus-cpp's
// Exposer) is built without IPv6 and would fail every "[::1]:PORT" bind with a vague error.
Status splitAddress(const std::string& host_port, std::string* host, int* port) {
  std::string h;
  uint16_t p = 0;
  const Status split = splitHostPort(host_port, &h, &p);
  if (!split.isOk()) return Status::invalidUsage("metrics address: " + split.message());
  in_addr addr;
  if (inet_pton(AF_INET, h.c_str(), &addr) != 1) {
    return Status::invalidUsage("metrics address '" + host_port +
                                "' needs a numeric IPv4 host such as 127.0.0.1 or 0.0.0.0 "
                                "(the metrics endpoint serves IPv4 only)");
  }
  *host = h;
  *port = p;
  return Status::ok();
}

class MetricsServerImpl final : public MetricsServer {
 public:
  reducer::ServerObserver* observer() override { return &metrics_; }
  std::string address() const override { return address_; }

  Status listen(const std::string& host, int port) {
    const std::string bind = host + ":" + std::to_string(port);
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(bind, /*num_threads=*/2);
      for (auto& c : metrics_.collectables()) exposer_->RegisterCollectable(c);
      const std::vector<int> ports = exposer_->GetListeningPorts();
      if (ports.empty()) return Status::system("metrics server on " + bind + " has no port");
      address_ = host + ":" + std::to_string(ports.front());
    } catch (const std::exception& e) {
      exposer_.reset();
      // civetweb does not say why; these are the usual reasons.
      return Status::system("cannot serve metrics on " + bind +
                            " (port in use, or not an address of this host): " + e.what());
    }
    return Status::ok();
  }

 private:
  // Declared first, destroyed last: the Exposer's threads read it until they are stopped.
  ReducerMetrics metrics_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string address_;
};

}  // namespace

Status checkBindAddress(const std::string& host_port) {
  std::string host;
  int port = 0;
  return splitAddress(host_port, &host, &port);
}

Status MetricsServer::start(const std::string& host_port, std::unique_ptr<MetricsServer>* out) {
  std::string host;
  int port = 0;
  TALLY_RETURN_IF_ERROR(splitAddress(host_port, &host, &port));
  auto server = std::make_unique<MetricsServerImpl>();
  TALLY_RETURN_IF_ERROR(server->listen(host, port));
  *out = std::move(server);
  return Status::ok();
}

}  // namespace tally::metrics
