// SPDX-License-Identifier: Apache-2.0
// The loop threads (loop.h): epoll over their connections' sockets, an eventfd for new sockets
// and resumed readers, a tick for timeouts.
#include "reducer/loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <system_error>

#include "common/log.h"

namespace tally::reducer::server {
namespace {

constexpr auto kTick = std::chrono::milliseconds(100);
constexpr int kMaxEvents = 64;

}  // namespace

Loop::Loop(ServerContext* ctx, int index) : ctx_(ctx), index_(index) {}

Loop::~Loop() { stop(); }

Status Loop::start() {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return Status::fromErrno("epoll_create1", errno);
  wake_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_.valid()) return Status::fromErrno("eventfd", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wake-up
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0) {
    return Status::fromErrno("epoll_ctl", errno);
  }
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error& e) {
    return Status::system(std::string("cannot start a reducer loop thread: ") + e.what());
  }
  return Status::ok();
}

void Loop::stop() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) {
    wake();
    thread_.join();
  }
  std::lock_guard<std::mutex> lock(mu_);
  adopted_.clear();
  resumed_.clear();
}

void Loop::wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (woken_) return;
    woken_ = true;
  }
  const uint64_t one = 1;
  if (wake_.valid()) (void)!::write(wake_.get(), &one, sizeof(one));
}

void Loop::adopt(Fd fd, std::string name) {
  count_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    adopted_.emplace_back(std::move(fd), std::move(name));
  }
  wake();
}

void Loop::resume(const std::shared_ptr<LoopPeer>& peer) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    resumed_.push_back(peer);
  }
  wake();
}

void Loop::run() {
  std::array<epoll_event, kMaxEvents> events;
  auto next_tick = std::chrono::steady_clock::now() + kTick;
  std::vector<std::pair<Fd, std::string>> adopted;
  std::vector<std::weak_ptr<LoopPeer>> resumed;
  auto forget = [&](LoopPeer* p) {
    auto it = peers_.find(p);
    if (it != peers_.end() && it->second->finished()) {
      peers_.erase(it);
      count_.fetch_sub(1, std::memory_order_relaxed);
    }
  };
  // Any exception is one connection's (an allocation): it ends that connection, not the loop.
  auto guarded = [&](LoopPeer* p, auto&& step) {
    try {
      step();
    } catch (const std::exception& e) {
      ctx_->observer->error(ServerError::kInternal);
      TALLY_WARN("reducer: loop %d: connection %s: %s", index_, p->name().c_str(), e.what());
      p->abort();
    }
    forget(p);
  };
  while (!stop_.load(std::memory_order_acquire)) {
    const auto now = std::chrono::steady_clock::now();
    // Rounded up: rounded down, the last millisecond before each tick polled in a busy loop.
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_tick - now).count();
    const int n = ::epoll_wait(epoll_.get(), events.data(), kMaxEvents,
                               static_cast<int>(std::max<int64_t>(0, wait)));
    if (n < 0 && errno != EINTR) {
      TALLY_WARN("reducer: loop %d: epoll_wait: %s", index_, std::strerror(errno));
    }
    for (int i = 0; i < n; ++i) {
      auto* p = static_cast<LoopPeer*>(events[i].data.ptr);
      if (p == nullptr) {
        uint64_t value = 0;
        (void)!::read(wake_.get(), &value, sizeof(value));
        {
          std::lock_guard<std::mutex> lock(mu_);
          woken_ = false;
          adopted.swap(adopted_);
          resumed.swap(resumed_);
        }
        for (auto& [fd, name] : adopted) {
          auto peer = std::make_shared<LoopPeer>(ctx_, this, std::move(fd), std::move(name));
          peers_.emplace(peer.get(), peer);
          guarded(peer.get(), [&] {
            Status st = peer->open();
            if (!st.isOk()) {
              TALLY_WARN("reducer: cannot serve peer %s: %s", peer->name().c_str(),
                         st.toString().c_str());
              peer->abort();
            }
          });
        }
        adopted.clear();
        for (auto& weak : resumed) {
          std::shared_ptr<LoopPeer> peer = weak.lock();
          if (peer && peers_.count(peer.get()) != 0) {
            guarded(peer.get(), [&] { peer->onEvents(EPOLLIN); });
          }
        }
        resumed.clear();
        continue;
      }
      if (peers_.count(p) == 0) continue;  // ended earlier in this batch
      guarded(p, [&] { p->onEvents(events[i].events); });
    }
    const auto after = std::chrono::steady_clock::now();
    if (after >= next_tick) {
      next_tick = after + kTick;
      std::vector<LoopPeer*> all;
      all.reserve(peers_.size());
      for (auto& [p, owner] : peers_) all.push_back(p);
      for (LoopPeer* p : all) guarded(p, [&] { p->onTick(after); });
    }
  }
  for (auto& [p, peer] : peers_) peer->abort();
  count_.fetch_sub(peers_.size(), std::memory_order_relaxed);
  peers_.clear();
}

EventLoops::EventLoops(ServerContext* ctx, int threads) {
  for (int i = 0; i < threads; ++i) loops_.push_back(std::make_unique<Loop>(ctx, i));
}

Status EventLoops::start() {
  for (auto& loop : loops_) {
    Status st = loop->start();
    if (!st.isOk()) {
      stop();
      return st;
    }
  }
  return Status::ok();
}

void EventLoops::stop() {
  for (auto& loop : loops_) loop->stop();
}

void EventLoops::adopt(Fd fd, std::string name) {
  Loop* best = loops_.front().get();
  for (auto& loop : loops_) {
    if (loop->connections() < best->connections()) best = loop.get();
  }
  best->adopt(std::move(fd), std::move(name));
}

size_t EventLoops::connections() const {
  size_t total = 0;
  for (const auto& loop : loops_) total += loop->connections();
  return total;
}

}  // namespace tally::reducer::server
