// What io_uring would save a reducer's receiving on loopback. Four sender threads (the workers)
// each stream 128 KiB messages over TCP to one receiving thread (a reducer's loop), which reads
// them into 8 buffers reused last-in first-out. Modes:
//   epoll   non-blocking recv until EAGAIN after each epoll_wait, SO_RCVLOWAT set to what the
//           message still misses (what tally-reducer's loops do);
//   uring   one IORING_OP_RECV per socket in flight for what its message still misses, with
//           SO_RCVLOWAT set to that as in epoll, resubmitted as each completes, one
//           io_uring_submit_and_wait per batch of completions;
//   fixed   the same with the 8 buffers registered and IORING_OP_READ_FIXED.
// Prints the receiving side's CPU seconds per GiB (the process's CPU less the senders' threads,
// so io_uring's own workers count) and the rate.
// Build: g++ -O2 -o recv_probe recv_probe.cc -luring -lpthread
#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kMsg = 128 << 10;
constexpr int kSenders = 4;
constexpr size_t kPerSender = size_t(1) << 30;
constexpr int kBuffers = 8;

double threadCpu() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

double processCpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

struct Conn {
  int fd = -1;
  uint8_t* buf = nullptr;
  int index = -1;  // which of the buffers
  size_t got = 0;
  size_t total = 0;
};

// LIFO pool of the receive buffers.
struct Pool {
  std::vector<uint8_t*> all;
  std::vector<int> free;
  int take() {
    int i = free.back();
    free.pop_back();
    return i;
  }
  void give(int i) { free.push_back(i); }
};

void consume(Conn& c, Pool& pool) {
  // A reducer would fold the buffer; here it goes back to the pool, still warm.
  volatile uint8_t sink = c.buf[c.got - 1];
  (void)sink;
  pool.give(c.index);
  c.total += c.got;
  c.got = 0;
  c.index = pool.take();
  c.buf = pool.all[c.index];
}

void runEpoll(std::vector<Conn>& conns, Pool& pool) {
  int ep = epoll_create1(0);
  for (size_t i = 0; i < conns.size(); ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
    int lowat = static_cast<int>(kMsg);
    setsockopt(conns[i].fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
  }
  size_t done = 0;
  while (done < conns.size()) {
    epoll_event evs[8];
    int n = epoll_wait(ep, evs, 8, -1);
    for (int k = 0; k < n; ++k) {
      Conn& c = conns[evs[k].data.u64];
      for (;;) {
        ssize_t r = recv(c.fd, c.buf + c.got, kMsg - c.got, MSG_DONTWAIT);
        if (r <= 0) break;
        c.got += static_cast<size_t>(r);
        if (c.got == kMsg) {
          consume(c, pool);
          if (c.total == kPerSender) {
            ++done;
            epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
            break;
          }
        }
      }
      if (c.total < kPerSender && c.got > 0) {
        int lowat = static_cast<int>(kMsg - c.got);
        setsockopt(c.fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
      }
    }
  }
  close(ep);
}

void runUring(std::vector<Conn>& conns, Pool& pool, bool fixed) {
  io_uring ring;
  io_uring_queue_init(64, &ring, 0);
  if (fixed) {
    std::vector<iovec> iov(kBuffers);
    for (int i = 0; i < kBuffers; ++i) iov[i] = {pool.all[i], kMsg};
    if (io_uring_register_buffers(&ring, iov.data(), kBuffers) != 0) {
      std::fprintf(stderr, "register_buffers failed\n");
      return;
    }
  }
  auto post = [&](size_t i) {
    Conn& c = conns[i];
    // As the epoll mode: readiness only once the rest of the message is there (poll-armed
    // requests wait on the same socket readiness).
    int lowat = static_cast<int>(kMsg - c.got);
    setsockopt(c.fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (fixed) {
      io_uring_prep_read_fixed(sqe, c.fd, c.buf + c.got, static_cast<unsigned>(kMsg - c.got), 0,
                               c.index);
    } else {
      io_uring_prep_recv(sqe, c.fd, c.buf + c.got, kMsg - c.got, 0);
    }
    io_uring_sqe_set_data64(sqe, i);
  };
  for (size_t i = 0; i < conns.size(); ++i) post(i);
  size_t done = 0;
  while (done < conns.size()) {
    io_uring_submit_and_wait(&ring, 1);
    io_uring_cqe* cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      ++seen;
      size_t i = cqe->user_data;
      Conn& c = conns[i];
      if (cqe->res <= 0) {
        std::fprintf(stderr, "recv: %s\n", strerror(-cqe->res));
        ++done;
        continue;
      }
      c.got += static_cast<size_t>(cqe->res);
      if (c.got == kMsg) consume(c, pool);
      if (c.total == kPerSender) {
        ++done;
      } else {
        post(i);
      }
    }
    io_uring_cq_advance(&ring, seen);
  }
  io_uring_queue_exit(&ring);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "epoll";
  if (mode != "epoll" && mode != "uring" && mode != "fixed") {
    std::fprintf(stderr, "usage: %s epoll|uring|fixed\n", argv[0]);
    return 2;
  }
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  bind(listener, reinterpret_cast<sockaddr*>(&addr), len);
  listen(listener, 8);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::vector<int> out(kSenders);
  std::vector<Conn> conns(kSenders);
  for (int i = 0; i < kSenders; ++i) {
    out[i] = socket(AF_INET, SOCK_STREAM, 0);
    connect(out[i], reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    conns[i].fd = accept(listener, nullptr, nullptr);
  }
  Pool pool;
  for (int i = 0; i < kBuffers; ++i) {
    pool.all.push_back(static_cast<uint8_t*>(aligned_alloc(4096, kMsg)));
    std::memset(pool.all.back(), 0, kMsg);
    pool.free.push_back(i);
  }
  for (Conn& c : conns) {
    c.index = pool.take();
    c.buf = pool.all[c.index];
  }
  // Four connections, eight buffers: each connection holds one, the rest wait warm.
  std::atomic<double> sender_cpu{0};
  std::vector<std::thread> senders;
  for (int i = 0; i < kSenders; ++i) {
    senders.emplace_back([&, i] {
      std::vector<uint8_t> msg(kMsg, static_cast<uint8_t>(i));
      const double c0 = threadCpu();
      for (size_t sent = 0; sent < kPerSender;) {
        ssize_t n = send(out[i], msg.data(), kMsg, 0);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
      }
      double mine = threadCpu() - c0;
      double prev = sender_cpu.load();
      while (!sender_cpu.compare_exchange_weak(prev, prev + mine)) {
      }
    });
  }
  const double p0 = processCpu();
  const auto t0 = std::chrono::steady_clock::now();
  if (mode == "epoll") {
    runEpoll(conns, pool);
  } else {
    runUring(conns, pool, mode == "fixed");
  }
  for (std::thread& t : senders) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double receiver = processCpu() - p0 - sender_cpu.load();
  const double gib = static_cast<double>(kPerSender) * kSenders / (1 << 30);
  std::printf("%-6s receiver %.3f s/GiB  senders %.3f s/GiB  %.2f GB/s\n", mode.c_str(),
              receiver / gib, sender_cpu.load() / gib, gib * 1.073741824 / seconds);
  return 0;
}
