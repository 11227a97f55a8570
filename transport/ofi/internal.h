// SPDX-License-Identifier: Apache-2.0
// Factories shared by the files of the ofi backend; not part of its interface.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "transport/ofi/endpoint.h"
#include "transport/ofi/fabric.h"
#include "transport/ofi/wire.h"
#include "transport/side_channel.h"
#include "transport/transport.h"

namespace tally::transport::ofi {

inline constexpr const char* kBackendName = "ofi";
// Magic of the ConnectHandle a device's listener publishes (side::encodeHandle).
inline constexpr uint32_t kHandleMagic = 0x48696f54u;  // "ToiH"
// Control slot size: a header plus up to kSlotBytes - kHeaderBytes payload bytes inline.
inline constexpr size_t kSlotBytes = 4096;

// What connections of a network share.
struct ConnectContext {
  OfiOptions options;
  side::SideOptions side;
};

// A Connection over a finished side channel and an endpoint whose peer is `peer` (its setup).
// On error everything given is closed.
Status makeConnection(std::unique_ptr<Endpoint> endpoint, std::unique_ptr<side::SideChannel> side,
                      const SetupMessage& peer, int max_requests, int64_t io_timeout_ms,
                      std::unique_ptr<Connection>* out);

// A resumable connect to a side listener at `address` ("host:port"), making its endpoint in
// `domain`.
Status makePendingConnection(std::shared_ptr<Domain> domain, const std::string& address,
                             const ConnectContext& context, const ConnectionOptions& options,
                             std::unique_ptr<PendingConnection>* out);

// A listener on "host:port" whose connections get their endpoints in `domain`; handle() carries
// the bound address (side::encodeHandle with kHandleMagic).
Status makeListener(std::shared_ptr<Domain> domain, const std::string& host_port,
                    const ConnectContext& context, std::unique_ptr<Listener>* out);

}  // namespace tally::transport::ofi
