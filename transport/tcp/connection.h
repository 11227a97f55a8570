// SPDX-License-Identifier: Apache-2.0
// The TCP Connection: `streams` sockets, each with a send and a receive helper thread.
//
// Data path (see wire.h for the bytes):
//   isend cuts the message into stripes and queues stripe i on stream i, stripe 0 behind the
//   message header, all under the connection lock, so every stream sees messages in posting
//   order. Each send thread writes its queue with blocking sendmsg straight from the user buffer.
//   The stream-0 receive thread reads a header, matches it to the oldest posted receive, queues
//   stripes 1.. on the other streams' receive threads and reads stripe 0 itself; every thread
//   reads straight into the user buffer. One exception: a message of at most 64 KiB that
//   arrives before its receive is posted is read into a connection buffer and copied when the
//   receive comes, so a header and its payload cost no extra thread wake-ups. A request is done
//   when all its stripes are. With TcpOptions::inline_sends the posting thread writes a
//   small send itself when nothing is queued.
//
// Threads and locks
//   One mutex per connection (Core::mu_) guards queues, requests and the sticky error. Helper
//   threads never hold it during I/O. Idle threads sleep on condition variables or in a blocking
//   recv, so an idle connection costs no CPU. A failure shuts every socket down, which wakes any
//   thread blocked in I/O, and is then visible to every request.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/tcp/fd.h"
#include "transport/transport.h"

namespace tally::transport::tcp {

// Builds a Connection over connected sockets, fds[i] being stream i (its helper threads start
// with the first isend or irecv; until then a one-socket connection can hand its socket over). On error the sockets are closed and *out is untouched.
// io_timeout_ms and inline_sends are TcpOptions::timeouts.io_ms and TcpOptions::inline_sends.
Status makeConnection(std::vector<Fd> fds, const std::string& peer, int max_requests,
                      uint64_t min_stripe, int64_t io_timeout_ms, bool inline_sends,
                      std::unique_ptr<Connection>* out);

}  // namespace tally::transport::tcp
