// SPDX-License-Identifier: Apache-2.0
// Setting up ofi connections: each end opens its endpoint, the two exchange endpoint names over
// the side channel, and each inserts the other's into its address vector.
#include <algorithm>
#include <vector>

#include "transport/ofi/internal.h"
#include "transport/setup_listener.h"

namespace tally::transport::ofi {
namespace {

size_t queueSize(int max_requests) {
  // Room for the control receives, every send's control message and a chunk per request.
  return static_cast<size_t>(std::max(max_requests, 1)) * 3 + 256;
}

int requestLimit(const ConnectContext& context, const ConnectionOptions& options) {
  return options.max_requests > 0 ? options.max_requests : context.options.max_requests;
}

std::vector<uint8_t> localSetup(const Domain& domain, const Endpoint& endpoint) {
  SetupMessage setup;
  setup.provider = domain.provider;
  setup.max_chunk = endpoint.maxChunk();
  setup.slot_bytes = static_cast<uint32_t>(kSlotBytes);
  setup.no_inline = domain.no_inline;
  setup.endpoint = endpoint.name();
  return encodeSetup(setup);
}

Status checkProvider(const SetupMessage& peer, const Domain& domain, const std::string& name) {
  if (peer.provider == domain.provider) return Status::ok();
  return Status::invalidUsage("peer " + name + " uses ofi provider " + peer.provider +
                              ", this end " + domain.provider +
                              ": set the same provider (FI_PROVIDER) everywhere");
}

// Checks the peer's setup against this end and makes the connection.
Status finish(std::unique_ptr<Endpoint> endpoint, std::unique_ptr<side::SideChannel> channel,
              int max_requests, const ConnectContext& context, std::unique_ptr<Connection>* out) {
  SetupMessage peer;
  TALLY_RETURN_IF_ERROR(decodeSetup(channel->peerSetup(), channel->peerName(), &peer));
  TALLY_RETURN_IF_ERROR(checkProvider(peer, *endpoint->domain(), channel->peerName()));
  return makeConnection(std::move(endpoint), std::move(channel), peer, max_requests,
                        context.options.timeouts.io_ms, out);
}

enum class ConnectState { kStart, kSetup, kDone };

class OfiPendingConnection final : public PendingConnection {
 public:
  OfiPendingConnection(std::shared_ptr<Domain> domain, std::string address,
                       const ConnectContext& context, int max_requests)
      : domain_(std::move(domain)),
        address_(std::move(address)),
        context_(context),
        max_requests_(max_requests) {}

  // Re-entry contract: call until *conn is set or an error comes back; never blocks. kStart
  // opens the endpoint and starts the side channel's connect; kSetup steps the side channel
  // (its connect retries and setup deadline) and, once the peer's setup is in, makes the
  // Connection (kDone). An error is final and is returned again by later calls.
  Status step(std::unique_ptr<Connection>* conn) override {
    *conn = nullptr;
    if (!error_.isOk()) return error_;
    Status status = advance(conn);
    if (!status.isOk()) {
      error_ = status;
      setup_.reset();
      endpoint_.reset();
    }
    return status;
  }

 private:
  Status advance(std::unique_ptr<Connection>* conn) {
    switch (state_) {
      case ConnectState::kStart:
        TALLY_RETURN_IF_ERROR(Endpoint::open(domain_, queueSize(max_requests_), &endpoint_));
        TALLY_RETURN_IF_ERROR(side::SideSetup::connect(
            address_, kBackendName, localSetup(*domain_, *endpoint_), context_.side, &setup_));
        state_ = ConnectState::kSetup;
        [[fallthrough]];
      case ConnectState::kSetup: {
        std::unique_ptr<side::SideChannel> channel;
        TALLY_RETURN_IF_ERROR(setup_->step(&channel));
        if (!channel) return Status::ok();
        setup_.reset();
        state_ = ConnectState::kDone;
        return finish(std::move(endpoint_), std::move(channel), max_requests_, context_, conn);
      }
      case ConnectState::kDone:
        return Status::internal("ofi connect to " + address_ + " stepped after it finished");
    }
    return Status::internal("ofi connect: bad state");
  }

  const std::shared_ptr<Domain> domain_;
  const std::string address_;
  const ConnectContext context_;
  const int max_requests_;
  ConnectState state_ = ConnectState::kStart;
  std::unique_ptr<Endpoint> endpoint_;
  std::unique_ptr<side::SideSetup> setup_;
  Status error_;
};

// A side connection accepted, its setup under way. The endpoint is opened only once the peer's
// setup is in and names the same provider.
class OfiAcceptedSetup final : public AcceptedSetup {
 public:
  OfiAcceptedSetup(std::shared_ptr<Domain> domain, const ConnectContext& context)
      : domain_(std::move(domain)), context_(context) {}

  Status start(std::unique_ptr<Connection> tcp) {
    const std::string peer = tcp->peerName();
    auto reply = [this, peer](const std::vector<uint8_t>& bytes,
                              std::vector<uint8_t>* local) -> Status {
      SetupMessage setup;
      TALLY_RETURN_IF_ERROR(decodeSetup(bytes, peer, &setup));
      TALLY_RETURN_IF_ERROR(checkProvider(setup, *domain_, peer));
      TALLY_RETURN_IF_ERROR(
          Endpoint::open(domain_, queueSize(context_.options.max_requests), &endpoint_));
      *local = localSetup(*domain_, *endpoint_);
      return Status::ok();
    };
    return side::SideSetup::accept(std::move(tcp), kBackendName, reply, context_.side, &setup_);
  }

  Status step(std::unique_ptr<Connection>* conn) override {
    std::unique_ptr<side::SideChannel> channel;
    TALLY_RETURN_IF_ERROR(setup_->step(&channel));
    if (!channel) return Status::ok();
    return finish(std::move(endpoint_), std::move(channel), context_.options.max_requests,
                  context_, conn);
  }

  std::string peerName() const override { return setup_->peerName(); }

 private:
  const std::shared_ptr<Domain> domain_;
  const ConnectContext context_;
  std::unique_ptr<Endpoint> endpoint_;
  std::unique_ptr<side::SideSetup> setup_;
};

}  // namespace

Status makePendingConnection(std::shared_ptr<Domain> domain, const std::string& address,
                             const ConnectContext& context, const ConnectionOptions& options,
                             std::unique_ptr<PendingConnection>* out) {
  *out = std::make_unique<OfiPendingConnection>(std::move(domain), address, context,
                                                requestLimit(context, options));
  return Status::ok();
}

Status makeListener(std::shared_ptr<Domain> domain, const std::string& host_port,
                    const ConnectContext& context, std::unique_ptr<Listener>* out) {
  std::unique_ptr<side::SideListener> side;
  TALLY_RETURN_IF_ERROR(side::SideListener::listen(host_port, context.side, &side));
  ConnectHandle handle{};
  TALLY_RETURN_IF_ERROR(side::encodeHandle(kHandleMagic, side->address(), &handle));
  auto admit = [domain, context](std::unique_ptr<Connection> tcp,
                                 std::unique_ptr<AcceptedSetup>* setup) -> Status {
    auto accepted = std::make_unique<OfiAcceptedSetup>(domain, context);
    TALLY_RETURN_IF_ERROR(accepted->start(std::move(tcp)));
    *setup = std::move(accepted);
    return Status::ok();
  };
  *out = std::make_unique<SetupListener>(kBackendName, std::move(side), handle, std::move(admit));
  return Status::ok();
}

}  // namespace tally::transport::ofi
