// SPDX-License-Identifier: Apache-2.0
// MetricsServer: `tally-reducer --metrics HOST:PORT`. Serves a ReducerMetrics over HTTP at
// http://HOST:PORT/metrics (prometheus-cpp's Exposer, on civetweb) for Prometheus to scrape.
//
// Threads: the HTTP server runs its own threads, started by start(); they inherit the caller's
// signal mask. The destructor stops them. observer() stays valid until then, so destroy a
// ReducerServer using it first.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "reducer/observer.h"

namespace tally::metrics {

// Checks a --metrics address, "HOST:PORT": HOST a numeric IPv4 address (0.0.0.0 for every
// interface; the HTTP server Debian ships has no IPv6), PORT 0 to 65535 (0 picks a free port).
// kInvalidUsage naming what is wrong.
Status checkBindAddress(const std::string& host_port);

class MetricsServer {
 public:
  // Binds host_port and serves GET /metrics. On failure nothing runs and *out is untouched:
  // kInvalidUsage for a malformed address, kSystem when the address cannot be bound.
  static Status start(const std::string& host_port, std::unique_ptr<MetricsServer>* out);

  virtual ~MetricsServer() = default;
  // Borrowed by ServerOptions::observer.
  virtual reducer::ServerObserver* observer() = 0;
  // The bound address, "127.0.0.1:9464" (the real port when 0 was asked for).
  virtual std::string address() const = 0;
  // "http://127.0.0.1:9464/metrics"
  std::string url() const { return "http://" + address() + "/metrics"; }
};

}  // namespace tally::metrics
