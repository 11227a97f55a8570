// SPDX-License-Identifier: Apache-2.0
// The libibverbs backend of transport.h: reliable-connected queue pairs on an RDMA device
// (InfiniBand or RoCE), set up over a TCP side channel (transport/side_channel.h).
//
// Data path (connection.h): every message is an RDMA write with immediate data straight from the
// sender's buffer into the receiver's, after the receiver announced its buffers in a small
// "clear to send" control message. Large messages are cut across the connection's queue pairs.
// See connection.h for why this and not send/receive.
//
// libibverbs is loaded at run time (loader.h): a host without it, or without an RDMA device, gets
// a clear kInvalidUsage from createNetwork and can use another transport.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "transport/network.h"

namespace tally::transport::verbs {

struct VerbsOptions {
  // TALLY_IB_HCA: which device ports (ports.h for the syntax). Empty: every active port.
  std::string hca;
  int qps_per_connection = 2;           // TALLY_IB_QPS_PER_CONNECTION, 1..16
  int max_requests = 256;               // in-flight requests per direction, by default
  // connect_ms bounds connect and setup. io_ms: a send whose data the device has not delivered,
  // or a receive that got part of its data and then nothing, for this long fails the connection.
  // Waiting for the peer to post a receive or to send is idle time and never times out.
  Timeouts timeouts;
  // TALLY_SOCKET_IFNAME syntax: the interface whose address Device::listen's side channel binds.
  std::string side_ifname;
  int gid_index = -1;  // RoCE GID table index; -1 picks one (ports.h chooseGidIndex)
  uint8_t service_level = 0;
  uint8_t traffic_class = 0;
  uint8_t ack_timeout = 20;  // 4.096 us * 2^ack_timeout per retry
  uint8_t retry_count = 7;
  // Messages of at least 2 * min_stripe bytes are cut over the queue pairs.
  uint64_t min_stripe = 128 * 1024;
  // Registrations no request holds any more are kept (and reused) up to these bounds; 0 drops
  // them at once. See reg_cache.h on freed memory before raising them.
  size_t reg_cache_entries = 0;
  uint64_t reg_cache_bytes = 0;
  // Where sysfs is mounted: the NIC's PCI path and whether a GPU peer-memory client is loaded
  // are read under it. Tests point it at a tree of their own.
  std::string sysfs_root = "/sys";
};

// Opens every selected port as one Device and returns the Network over them (listenAt and
// connectTo use the first). Fails with kInvalidUsage when libibverbs cannot be loaded ("cannot
// load libibverbs.so.1 ..."), lists no device ("no RDMA device ..."), or TALLY_IB_HCA selects
// no active port; *out is untouched then.
Status createNetwork(const VerbsOptions& options, std::shared_ptr<Network>* out);

}  // namespace tally::transport::verbs
