// SPDX-License-Identifier: Apache-2.0
// Factories shared by the files of the verbs backend; not part of its interface.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "transport/network.h"
#include "transport/side_channel.h"
#include "transport/transport.h"
#include "transport/verbs/context.h"

namespace tally::transport::verbs {

// The magic of a verbs ConnectHandle (side::encodeHandle): "TlyB".
inline constexpr uint32_t kHandleMagic = 0x42796c54u;
// The tag of the ready byte that follows the setup exchange on the side channel.
inline constexpr int kReadyTag = side::kSetupTag + 1;

side::SideOptions sideOptions(const VerbsOptions& options);

// createNetwork over an explicit function table (tests pass a software device).
Status createNetworkWith(const VerbsApi* api, const VerbsOptions& options,
                         std::shared_ptr<Network>* out);

// A PendingConnection to a side listener at `address` ("host:port") on `device`.
// conn_options.max_requests overrides the device's default; sockets is not used.
Status makePendingConnection(std::shared_ptr<DeviceContext> device, const std::string& address,
                             const ConnectionOptions& conn_options,
                             std::unique_ptr<PendingConnection>* out);

// A listener on "host:port" (port 0 picks one) whose connections use `device`. Its handle is
// side::encodeHandle(kHandleMagic, the bound address).
Status makeListener(std::shared_ptr<DeviceContext> device, const std::string& host_port,
                    std::unique_ptr<Listener>* out);

}  // namespace tally::transport::verbs
