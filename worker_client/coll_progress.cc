// SPDX-License-Identifier: Apache-2.0
// The CollClient's progress for its RawLinks (coll_raw_link.h): one epoll set over every link's
// socket, plus an eventfd that stop() writes; run by a thread of its own or by poll()'s callers.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include "common/log.h"
#include "worker_client/coll_raw_link.h"

namespace tally::worker_client {
namespace {

// How often the loop looks for timed-out links, at the latest.
constexpr int kPollMs = 100;
constexpr int kMaxEvents = 64;

}  // namespace

Status Progress::create(bool threaded, std::shared_ptr<Progress>* out) {
  std::shared_ptr<Progress> p(new Progress(threaded));
  p->epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!p->epoll_.valid()) return Status::fromErrno("epoll_create1", errno);
  p->wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!p->wake_.valid()) return Status::fromErrno("eventfd", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the eventfd
  if (::epoll_ctl(p->epoll_.get(), EPOLL_CTL_ADD, p->wake_.get(), &ev) != 0) {
    return Status::fromErrno("epoll_ctl", errno);
  }
  *out = std::move(p);
  return Status::ok();
}

Progress::~Progress() { stop(); }

Status Progress::add(RawLink* link, int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = link;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    return Status::fromErrno("epoll_ctl", errno);
  }
  std::lock_guard<std::mutex> lock(links_mu_);
  links_.push_back(link);
  return Status::ok();
}

Status Progress::start() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (stop_.load() || started_.load()) return Status::ok();
  next_check_ns_ = nowNs() + kPollMs * 1000000LL;
  if (threaded_) {
    try {
      thread_ = std::thread([this] { loop(); });
    } catch (const std::system_error& e) {
      return Status::system(std::string("cannot start the CollNet progress thread: ") + e.what());
    }
  }
  started_.store(true, std::memory_order_release);
  return Status::ok();
}

void Progress::poll() {
  if (threaded_ || !started_.load(std::memory_order_acquire)) return;
  std::unique_lock<std::mutex> lock(poll_mu_, std::try_to_lock);
  if (!lock.owns_lock() || stop_.load(std::memory_order_acquire)) return;
  (void)round(0);
}

void Progress::watch(RawLink* link, int fd, bool output) {
  epoll_event ev{};
  ev.events = EPOLLIN | (output ? EPOLLOUT : 0u);
  ev.data.ptr = link;
  // Fails only for a socket no longer in the set (being closed): nothing to watch then.
  (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev);
}

void Progress::unwatch(int fd) { (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr); }

uint64_t Progress::forget(RawLink* link) {
  {
    std::lock_guard<std::mutex> lock(links_mu_);
    links_.erase(std::remove(links_.begin(), links_.end(), link), links_.end());
  }
  // A round begun from here on finds the link neither among the events (its socket left the
  // set before) nor in links_; one begun before may hold it until it ends.
  return rounds_begun_.load(std::memory_order_acquire);
}

void Progress::stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  stop_.store(true, std::memory_order_release);
  if (!threaded_) {
    // A poll() under way finishes its round; none starts after this.
    std::lock_guard<std::mutex> wait_for_poll(poll_mu_);
    return;
  }
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  // The counter cannot overflow with one write per stop; a failure would only delay the stop
  // until the next poll interval.
  (void)!::write(wake_.get(), &one, sizeof(one));
  thread_.join();
}

void Progress::loop() {
  while (!stop_.load(std::memory_order_acquire)) {
    if (!round(kPollMs)) break;
  }
}

bool Progress::round(int wait_ms) {
  rounds_begun_.fetch_add(1, std::memory_order_acq_rel);
  struct Ended {
    std::atomic<uint64_t>* finished;
    ~Ended() { finished->fetch_add(1, std::memory_order_acq_rel); }
  } ended{&rounds_finished_};
  epoll_event events[kMaxEvents];
  const int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, wait_ms);
  if (n < 0 && errno != EINTR) {
    TALLY_WARN("CollNet progress: epoll_wait failed: %s", std::strerror(errno));
    return false;
  }
  for (int i = 0; i < n; ++i) {
    auto* link = static_cast<RawLink*>(events[i].data.ptr);
    if (link == nullptr) {
      uint64_t v;
      (void)!::read(wake_.get(), &v, sizeof(v));
      continue;
    }
    const uint32_t e = events[i].events;
    link->onEvents((e & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) != 0, (e & EPOLLOUT) != 0,
                   (e & EPOLLERR) != 0);
  }
  const int64_t now = nowNs();
  if (now >= next_check_ns_) {
    // A copy (into kept room: nothing allocated per round): a timeout's report may reach a
    // join that adds a link (which takes links_mu_).
    {
      std::lock_guard<std::mutex> lock(links_mu_);
      checked_.assign(links_.begin(), links_.end());
    }
    for (RawLink* link : checked_) link->checkTimeout(now);
    next_check_ns_ = now + kPollMs * 1000000LL;
  }
  return true;
}

}  // namespace tally::worker_client
