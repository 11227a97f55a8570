// SPDX-License-Identifier: Apache-2.0
// Factories shared by the files of the TCP backend; not part of its interface.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/tcp/socket.h"
#include "transport/tcp/tcp.h"

namespace tally::transport::tcp {

// A PendingConnection to `addr`; `peer` names it in log lines and errors. The streams and the
// request limit come from conn_options, else options. Nothing is sent until the first step().
Status makePendingConnection(const SockAddr& addr, const std::string& peer,
                             const TcpOptions& options, const ConnectionOptions& conn_options,
                             std::unique_ptr<PendingConnection>* out);

// How a listener turns the complete streams of one connection into a Connection; the
// arguments are makeConnection's (connection.h).
using ConnectionMaker =
    std::function<Status(std::vector<Fd> fds, const std::string& peer, int max_requests,
                         uint64_t min_stripe, int64_t io_timeout_ms, bool inline_sends,
                         std::unique_ptr<Connection>* out)>;

// A listener bound to `addr` (port 0: an ephemeral port). `make` is makeConnection unless a test
// stands in for it (to fail one connection on purpose).
Status makeListener(const SockAddr& addr, const TcpOptions& options,
                    std::unique_ptr<Listener>* out, ConnectionMaker make = nullptr);

}  // namespace tally::transport::tcp
