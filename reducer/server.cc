// SPDX-License-Identifier: Apache-2.0
// ReducerServer: the listener, the accept thread and the list of connections.
#include "reducer/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>

#include "common/log.h"
#include "reducer/loop.h"
#include "reducer/server_internal.h"

namespace tally::reducer {
namespace wire = protocol::wire;

namespace {

constexpr int64_t kAcceptPollMs = 100;

ServerObserver* observerOf(const ServerOptions& options) {
  return options.observer != nullptr ? options.observer : nullServerObserver();
}

size_t openingLimit(const ServerOptions& options) {
  if (options.max_opening_connections > 0) return options.max_opening_connections;
  return std::max<size_t>(16, options.max_connections / 4);
}

class ServerImpl final : public ReducerServer {
 public:
  explicit ServerImpl(const ServerOptions& options)
      : engine_(options.threads, options.pool_cache_bytes, observerOf(options)),
        registry_(&engine_, options, observerOf(options)),
        loops_(&ctx_, options.threads) {
    ctx_.options = options;
    ctx_.engine = &engine_;
    ctx_.registry = &registry_;
    ctx_.observer = observerOf(options);
    ctx_.openings.setLimit(openingLimit(options));
  }
  ~ServerImpl() override { stop(); }

  Status listen() {
    network_ = ctx_.options.network;
    if (!network_) {
      // The default interface choice: a TCP network's devices do not matter to a listener.
      transport::NetworkConfig config;
      config.timeouts = ctx_.options.timeouts;
      // The reader completes slices (Engine::submit) and posts their results, the writer reaps
      // them: both may write small ones to the socket themselves.
      config.tcp.inline_sends = true;
      TALLY_RETURN_IF_ERROR(transport::openDefaultNetwork(config, &network_));
    }
    TALLY_RETURN_IF_ERROR(network_->listenAt(ctx_.options.listen, &listener_));
    address_ = listener_->address();
    TALLY_RETURN_IF_ERROR(loops_.start());
    try {
      accept_thread_ = std::thread([this] { acceptLoop(); });
    } catch (const std::system_error& e) {
      return Status::system(std::string("cannot start the reducer's accept thread: ") + e.what());
    }
    return Status::ok();
  }

  std::string address() const override { return address_; }
  const char* transportName() const { return network_->name(); }

  void stop() override {
    std::lock_guard<std::mutex> stop_lock(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
    ctx_.stopping.store(true);
    if (accept_thread_.joinable()) accept_thread_.join();
    std::list<std::shared_ptr<server::Peer>> peers;
    {
      std::lock_guard<std::mutex> lock(peers_mu_);
      peers.swap(peers_);
    }
    for (auto& p : peers) p->abort();
    for (auto& p : peers) p->join();
    loops_.stop();
    registry_.clear();
    engine_.stop();
    peers.clear();
    listener_.reset();
    TALLY_INFO(log::kInit, "reducer: stopped listening on %s", address_.c_str());
  }

 private:
  void acceptLoop() {
    while (!ctx_.stopping.load()) {
      std::unique_ptr<transport::Connection> conn;
      Status st = listener_->acceptWait(kAcceptPollMs, &conn);
      reapFinished();
      countDroppedHellos();
      if (!st.isOk()) {
        // A failed handshake is one bad peer, not the end of the server.
        TALLY_WARN_LIMITED(ctx_.warnings.transport, "reducer: accept on %s failed: %s",
                           address_.c_str(), st.toString().c_str());
        ctx_.observer->error(ServerError::kAccept);
        std::this_thread::sleep_for(std::chrono::milliseconds(kAcceptPollMs));
        continue;
      }
      if (!conn) continue;
      size_t open = loops_.connections();
      {
        std::lock_guard<std::mutex> lock(peers_mu_);
        open += peers_.size();
      }
      // Members are held to max_connections when they say Hello, and opening connections to
      // their own budget (the oldest gives way), so this is only reached while evicted ones are
      // still closing.
      if (open >= ctx_.options.max_connections + ctx_.openings.limit()) {
        // Closing at once tells the worker; its connect fails with "connection closed".
        TALLY_WARN_LIMITED(ctx_.warnings.refused,
                           "reducer: refused peer %s: %zu connections open, the limit "
                           "(--max-connections members and the opening budget)",
                           conn->peerName().c_str(), open);
        ctx_.observer->error(ServerError::kLimit);
        conn->close();
        continue;
      }
      std::string name = conn->peerName();
      Fd socket(conn->takeSocket());
      if (socket.valid()) {
        // A one-socket TCP connection: served by an event loop.
        TALLY_INFO(log::kNet, "reducer: accepted peer %s", name.c_str());
        loops_.adopt(std::move(socket), std::move(name));
        continue;
      }
      auto peer = std::make_shared<server::Peer>(std::move(conn), &ctx_);
      TALLY_INFO(log::kNet, "reducer: accepted peer %s", peer->name().c_str());
      Status started = peer->start();
      if (!started.isOk()) {
        // Out of threads or memory: this connection is closed, the next one may fit.
        ctx_.observer->error(ServerError::kAccept);
        uint64_t count = 0;
        if (start_failures_.note(&count)) {
          TALLY_WARN("reducer: closed a connection on %s: %s; %" PRIu64
                     " closed so since the last report",
                     address_.c_str(), started.toString().c_str(), count);
        }
        continue;
      }
      std::lock_guard<std::mutex> lock(peers_mu_);
      peers_.push_back(std::move(peer));
    }
  }

  // The transport hellos the listener dropped since the last look go into the metrics: a
  // malformed one, or a connection closed unheard for lack of a descriptor, as `accept` (a
  // failed transport handshake, a failed accept); one that never came as `timeout`; a socket
  // closed at the limit of sockets waiting for their hello as `limit`.
  void countDroppedHellos() {
    const transport::Listener::DroppedHellos now = listener_->droppedHellos();
    auto count = [this](uint64_t seen, uint64_t total, ServerError cause) {
      for (uint64_t i = seen; i < total; ++i) ctx_.observer->error(cause);
    };
    count(seen_hellos_.bad_hellos, now.bad_hellos, ServerError::kAccept);
    count(seen_hellos_.no_descriptors, now.no_descriptors, ServerError::kAccept);
    count(seen_hellos_.pending_full, now.pending_full, ServerError::kLimit);
    count(seen_hellos_.hello_timeouts, now.hello_timeouts, ServerError::kTimeout);
    seen_hellos_ = now;
  }

  void reapFinished() {
    std::list<std::shared_ptr<server::Peer>> done;
    {
      std::lock_guard<std::mutex> lock(peers_mu_);
      for (auto it = peers_.begin(); it != peers_.end();) {
        if ((*it)->finished()) {
          done.push_back(std::move(*it));
          it = peers_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& p : done) p->join();
  }

  server::ServerContext ctx_;
  server::Engine engine_;
  server::CommunicatorRegistry registry_;
  server::EventLoops loops_;
  std::shared_ptr<transport::Network> network_;
  std::unique_ptr<transport::Listener> listener_;
  transport::Listener::DroppedHellos seen_hellos_;  // accept thread only
  std::string address_;
  std::thread accept_thread_;
  std::mutex peers_mu_;
  std::list<std::shared_ptr<server::Peer>> peers_;
  std::mutex stop_mu_;
  bool stopped_ = false;
  log::RateLimitedLog start_failures_{std::chrono::seconds(10)};  // accept thread only
};

}  // namespace

Status ReducerServer::start(const ServerOptions& options, std::unique_ptr<ReducerServer>* out) {
  if (options.threads < 1 || options.threads > 1024) {
    return Status::invalidUsage("reducer threads must be 1 to 1024, not " +
                                std::to_string(options.threads));
  }
  if (options.window < 1 || options.window > static_cast<int>(wire::kMaxWindow)) {
    return Status::invalidUsage("reducer window must be 1 to " + std::to_string(wire::kMaxWindow) +
                                ", not " + std::to_string(options.window));
  }
  auto server = std::make_unique<ServerImpl>(options);
  TALLY_RETURN_IF_ERROR(server->listen());
  TALLY_INFO(log::kInit, "reducer: listening on %s (%s), %d threads, window %d",
             server->address().c_str(), server->transportName(), options.threads, options.window);
  *out = std::move(server);
  return Status::ok();
}

}  // namespace tally::reducer
