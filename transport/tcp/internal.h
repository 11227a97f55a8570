// Factories shared by the files of the TCP backend; not part of its interface.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "transport/tcp/socket.h"
#include "transport/tcp/tcp.h"

namespace tally::transport::tcp {

// A PendingConnection to `addr`; `peer` names it in log lines and errors. The streams and the
// request limit come from conn_options, else options. Nothing is sent until the first step().
Status makePendingConnection(const SockAddr& addr, const std::string& peer,
                             const TcpOptions& options, const ConnectionOptions& conn_options,
                             std::unique_ptr<PendingConnection>* out);

// A listener bound to `addr` (port 0: an ephemeral port).
Status makeListener(const SockAddr& addr, const TcpOptions& options,
                    std::unique_ptr<Listener>* out);

}  // namespace tally::transport::tcp
