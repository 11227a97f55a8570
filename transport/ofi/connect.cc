// Setting up ofi connections: each end opens its endpoint, the two exchange endpoint names over
// the side channel, and each inserts the other's into its address vector.
#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "common/log.h"
#include "transport/ofi/internal.h"

namespace tally::transport::ofi {
namespace {

using Clock = std::chrono::steady_clock;

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
  setup.max_chunk = domain.max_chunk;
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
                        context.options.io_timeout_ms, out);
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

// A side connection accepted, its setup under way.
struct Incoming {
  std::unique_ptr<Endpoint> endpoint;
  std::unique_ptr<side::SideSetup> setup;
};

class OfiListener final : public Listener {
 public:
  OfiListener(std::shared_ptr<Domain> domain, std::unique_ptr<side::SideListener> side,
              const ConnectHandle& handle, const ConnectContext& context)
      : domain_(std::move(domain)), side_(std::move(side)), handle_(handle), context_(context) {}

  const ConnectHandle& handle() const override { return handle_; }
  std::string address() const override { return side_->address(); }

  // Non-blocking: takes the side connections the kernel has queued, steps every setup under
  // way, and hands out at most one finished connection per call. A peer whose setup fails is
  // logged and dropped; the listener carries on.
  Status accept(std::unique_ptr<Connection>* conn) override {
    std::lock_guard<std::mutex> lock(mu_);
    *conn = nullptr;
    for (;;) {
      std::unique_ptr<Connection> tcp;
      TALLY_RETURN_IF_ERROR(side_->accept(&tcp));
      if (!tcp) break;
      TALLY_RETURN_IF_ERROR(addIncoming(std::move(tcp)));
    }
    stepIncoming();
    if (!ready_.empty()) {
      *conn = std::move(ready_.front());
      ready_.pop_front();
    }
    return Status::ok();
  }

  Status acceptWait(int64_t timeout_ms, std::unique_ptr<Connection>* conn) override {
    const auto deadline =
        Clock::now() + std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0));
    int64_t nap_us = 50;
    for (;;) {
      TALLY_RETURN_IF_ERROR(accept(conn));
      if (*conn) return Status::ok();
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (timeout_ms >= 0 && left <= 0) return Status::ok();
      bool setting_up = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        setting_up = !incoming_.empty();
      }
      if (setting_up) {
        // A setup is a round trip away: short naps, growing to a few milliseconds.
        std::this_thread::sleep_for(std::chrono::microseconds(nap_us));
        nap_us = std::min<int64_t>(nap_us * 2, 2000);
        continue;
      }
      nap_us = 50;
      std::unique_ptr<Connection> tcp;
      const int64_t wait_ms = timeout_ms < 0 ? 100 : std::min<int64_t>(left, 100);
      TALLY_RETURN_IF_ERROR(side_->acceptWait(wait_ms, &tcp));
      if (tcp) {
        std::lock_guard<std::mutex> lock(mu_);
        TALLY_RETURN_IF_ERROR(addIncoming(std::move(tcp)));
      }
    }
  }

 private:
  // The endpoint is opened only once the peer's setup is in and names the same provider.
  Status addIncoming(std::unique_ptr<Connection> tcp) {
    auto in = std::make_unique<Incoming>();
    Incoming* slot = in.get();
    const std::string peer = tcp->peerName();
    auto reply = [this, slot, peer](const std::vector<uint8_t>& bytes,
                                    std::vector<uint8_t>* local) -> Status {
      SetupMessage setup;
      TALLY_RETURN_IF_ERROR(decodeSetup(bytes, peer, &setup));
      TALLY_RETURN_IF_ERROR(checkProvider(setup, *domain_, peer));
      TALLY_RETURN_IF_ERROR(
          Endpoint::open(domain_, queueSize(context_.options.max_requests), &slot->endpoint));
      *local = localSetup(*domain_, *slot->endpoint);
      return Status::ok();
    };
    TALLY_RETURN_IF_ERROR(
        side::SideSetup::accept(std::move(tcp), kBackendName, reply, context_.side, &in->setup));
    incoming_.push_back(std::move(in));
    return Status::ok();
  }

  void stepIncoming() {
    for (size_t i = 0; i < incoming_.size();) {
      Incoming& in = *incoming_[i];
      std::unique_ptr<side::SideChannel> channel;
      Status status = in.setup->step(&channel);
      if (status.isOk() && !channel) {
        ++i;
        continue;
      }
      const std::string peer = in.setup->peerName();
      std::unique_ptr<Connection> conn;
      if (status.isOk()) {
        status = finish(std::move(in.endpoint), std::move(channel), context_.options.max_requests,
                        context_, &conn);
      }
      if (status.isOk()) {
        ready_.push_back(std::move(conn));
      } else {
        TALLY_WARN("ofi: listener %s dropped peer %s: %s", side_->address().c_str(),
                   peer.c_str(), status.toString().c_str());
      }
      incoming_.erase(incoming_.begin() + static_cast<long>(i));
    }
  }

  const std::shared_ptr<Domain> domain_;
  const std::unique_ptr<side::SideListener> side_;
  const ConnectHandle handle_;
  const ConnectContext context_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Incoming>> incoming_;  // stable addresses for the replies
  std::deque<std::unique_ptr<Connection>> ready_;
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
  *out = std::make_unique<OfiListener>(std::move(domain), std::move(side), handle, context);
  return Status::ok();
}

}  // namespace tally::transport::ofi
