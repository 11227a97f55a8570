// SPDX-License-Identifier: Apache-2.0
// The TCP listener under pressure: running out of file descriptors, more
// sockets waiting for their hello than it keeps, and a connection that cannot be set up. In each
// case the listener must drop what does not fit, log it once per interval, and go on serving.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "test/transport/test_util.h"
#include "transport/tcp/connection.h"
#include "transport/tcp/internal.h"
#include "transport/tcp/wire.h"

namespace tally::transport::test {
namespace {

uint16_t portOf(const std::string& address) {
  return static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

// A raw blocking client socket connected to `port` on loopback; -1 when none can be made.
int rawConnect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// True when the other end closed `fd` (EOF or a reset) within timeout_ms.
bool closedByPeer(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return false;
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

// Sends one message a -> b and checks it arrives.
void exchange(Connection* a, Connection* b, uint32_t seed) {
  std::vector<uint8_t> data = pattern(5000, seed);
  std::vector<uint8_t> got(data.size());
  std::unique_ptr<Request> s;
  std::unique_ptr<Request> r;
  void* ptr = got.data();
  size_t size = got.size();
  int tag = 3;
  ASSERT_TRUE(b->irecv(1, &ptr, &size, &tag, nullptr, &r).isOk());
  ASSERT_TRUE(a->isend(data.data(), data.size(), tag, nullptr, &s).isOk());
  ASSERT_TRUE(s && r);
  ASSERT_TRUE(s->wait(kWaitMs, nullptr).isOk());
  ASSERT_TRUE(r->wait(kWaitMs, nullptr).isOk());
  EXPECT_EQ(got, data);
}

// A real client connects and exchanges a message with what the listener hands out.
void connectsAndTalks(Listener* listener, int sockets) {
  tcp::TcpOptions options;
  options.timeouts.connect_ms = 5000;
  ConnectionOptions conn_options;
  conn_options.sockets = sockets;
  std::unique_ptr<Connection> client;
  Status st = tcp::connectBlocking(listener->address(), options, conn_options, &client);
  ASSERT_TRUE(st.isOk()) << st.toString();
  std::unique_ptr<Connection> server;
  st = listener->acceptWait(kWaitMs, &server);
  ASSERT_TRUE(st.isOk()) << st.toString();
  ASSERT_NE(server, nullptr);
  exchange(client.get(), server.get(), 11);
  exchange(server.get(), client.get(), 12);
}

// Counts WARN lines that contain a string, while installed.
class WarnCounter {
 public:
  explicit WarnCounter(const char* needle) {
    std::lock_guard<std::mutex> lock(mu_);
    needle_ = needle;
    count_ = 0;
    log::setSink(&sink, log::Level::kWarn);
  }
  ~WarnCounter() { log::setSink(&log::stderrSink, log::Level::kWarn); }
  int count() const { return count_.load(); }

 private:
  static void sink(log::Level level, unsigned long subsys, const char* file, int line,
                   const char* message) {
    log::stderrSink(level, subsys, file, line, message);
    std::lock_guard<std::mutex> lock(mu_);
    if (std::strstr(message, needle_) != nullptr) ++count_;
  }
  static inline std::mutex mu_;
  static inline const char* needle_ = "";
  static inline std::atomic<int> count_{0};
};

// Lowers this process's descriptor limit for the life of the object.
class DescriptorLimit {
 public:
  explicit DescriptorLimit(rlim_t soft) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    ok_ = ::setrlimit(RLIMIT_NOFILE, &lowered) == 0;
  }
  ~DescriptorLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

// Out of descriptors: with sockets already waiting for their hello, more connections queue than
// the process can accept. accept() must not fail, the queued connections that do not fit are
// closed (one report for all of them), the waiting sockets are still read, so once their peers
// leave their descriptors come back, and a real client then gets through.
TEST(TcpListener, SurvivesRunningOutOfDescriptors) {
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(tcp::listenAt("127.0.0.1:0", {}, &listener).isOk());
  const uint16_t port = portOf(listener->address());
  WarnCounter warns("Too many open files");

  std::vector<int> waiting;  // accepted by the listener, never say their hello
  std::vector<int> queued;   // connected while the process had no descriptor left
  {
    // Room for 50 more descriptors: 20 silent clients and their 20 accepted sockets, then
    // clients until the table is full, all left in the accept queue.
    const int highest = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(highest, 0);
    ::close(highest);
    DescriptorLimit limit(static_cast<rlim_t>(highest + 50));
    ASSERT_TRUE(limit.ok());
    for (int i = 0; i < 20; ++i) {
      int fd = rawConnect(port);
      ASSERT_GE(fd, 0);
      waiting.push_back(fd);
      std::unique_ptr<Connection> none;
      ASSERT_TRUE(listener->accept(&none).isOk());
      EXPECT_EQ(none, nullptr);
    }
    for (int fd; (fd = rawConnect(port)) >= 0;) queued.push_back(fd);
    ASSERT_FALSE(queued.empty());
    std::vector<int> filler;  // whatever a failed connect left free
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) filler.push_back(fd);

    // accept() finds no descriptor for the queued ones: it closes them and carries on.
    for (int round = 0; round < 5; ++round) {
      std::unique_ptr<Connection> none;
      Status st = listener->acceptWait(300, &none);
      ASSERT_TRUE(st.isOk()) << st.toString();
      EXPECT_EQ(none, nullptr);
      // One more connection in the queue, in the descriptor of a client it has closed.
      ASSERT_TRUE(closedByPeer(queued.back(), 2000));
      ::close(queued.back());
      queued.back() = rawConnect(port);
      ASSERT_GE(queued.back(), 0);
    }
    std::unique_ptr<Connection> none;
    ASSERT_TRUE(listener->acceptWait(300, &none).isOk());
    for (int fd : queued) EXPECT_TRUE(closedByPeer(fd, 2000)) << "a queued connection was kept";
    EXPECT_EQ(warns.count(), 1) << "one report per interval, not one per failure";

    // The peers of the waiting sockets leave; the listener closes its side.
    for (int fd : waiting) ::close(fd);
    for (int fd : queued) ::close(fd);
    for (int fd : filler) ::close(fd);
    ASSERT_TRUE(listener->acceptWait(300, &none).isOk());
    // The descriptors are back: as many sockets as before fit again.
    std::vector<int> again;
    for (int i = 0; i < 45; ++i) {
      int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      ASSERT_GE(fd, 0) << "descriptors still held after their peers left (" << i << " free)";
      again.push_back(fd);
    }
    for (int fd : again) ::close(fd);
    connectsAndTalks(listener.get(), 2);
  }
}

// The listener keeps max_pending_sockets sockets that have not completed a connection (no hello
// yet, or a connection's other streams missing); past that the oldest is closed.
TEST(TcpListener, SocketsWaitingForAConnectionAreCappedOldestFirst) {
  tcp::TcpOptions options;
  options.max_pending_sockets = 4;
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(tcp::listenAt("127.0.0.1:0", options, &listener).isOk());
  const uint16_t port = portOf(listener->address());

  // Two first streams of two-stream connections that never send their second, then silence.
  std::vector<int> fds;
  for (int i = 0; i < 6; ++i) {
    int fd = rawConnect(port);
    ASSERT_GE(fd, 0);
    if (i < 2) {
      tcp::Hello hello;
      hello.index = 0;
      hello.count = 2;
      hello.connection_id = 0x5107 + static_cast<uint64_t>(i);
      uint8_t bytes[tcp::kHelloBytes];
      tcp::encodeHello(hello, bytes);
      ASSERT_EQ(::send(fd, bytes, sizeof(bytes), MSG_NOSIGNAL),
                static_cast<ssize_t>(sizeof(bytes)));
    }
    fds.push_back(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::unique_ptr<Connection> none;
    ASSERT_TRUE(listener->accept(&none).isOk());
    EXPECT_EQ(none, nullptr);
  }
  EXPECT_TRUE(closedByPeer(fds[0], 2000));
  EXPECT_TRUE(closedByPeer(fds[1], 2000));
  for (int i = 2; i < 6; ++i) EXPECT_FALSE(closedByPeer(fds[i], 100)) << "socket " << i;
  // A real connection of two streams still gets through, closing two more of the silent ones.
  connectsAndTalks(listener.get(), 2);
  EXPECT_TRUE(closedByPeer(fds[2], 2000));
  EXPECT_TRUE(closedByPeer(fds[3], 2000));
  for (int fd : fds) ::close(fd);
}

// A connection whose set-up fails (here: as if its threads could not be created) is closed
// alone; the listener reports it and serves the next one.
TEST(TcpListener, AConnectionThatCannotBeSetUpIsClosedAlone) {
  std::atomic<int> calls{0};
  tcp::ConnectionMaker failFirst = [&](std::vector<tcp::Fd> fds, const std::string& peer,
                                       int max_requests, uint64_t min_stripe,
                                       int64_t io_timeout_ms, bool inline_sends,
                                       std::unique_ptr<Connection>* out) {
    if (calls.fetch_add(1) == 0) {
      return Status::system("cannot start TCP helper threads: Resource temporarily unavailable");
    }
    return tcp::makeConnection(std::move(fds), peer, max_requests, min_stripe, io_timeout_ms,
                               inline_sends, out);
  };
  tcp::SockAddr addr;
  ASSERT_TRUE(tcp::resolve("127.0.0.1", 0, true, &addr).isOk());
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(tcp::makeListener(addr, {}, &listener, failFirst).isOk());
  WarnCounter warns("Resource temporarily unavailable");

  tcp::TcpOptions options;
  options.timeouts.connect_ms = 5000;
  ConnectionOptions conn_options;
  conn_options.sockets = 2;
  std::unique_ptr<Connection> refused;
  ASSERT_TRUE(tcp::connectBlocking(listener->address(), options, conn_options, &refused).isOk());
  std::unique_ptr<Connection> none;
  Status st = listener->acceptWait(500, &none);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(warns.count(), 1);
  // The refused client finds its connection closed.
  int data = 0;
  void* ptr = &data;
  size_t size = sizeof(data);
  int tag = 1;
  std::unique_ptr<Request> r;
  st = refused->irecv(1, &ptr, &size, &tag, nullptr, &r);  // fails here or in the wait
  if (st.isOk()) st = r->wait(kWaitMs, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kRemote) << st.toString();

  for (int i = 0; i < 3; ++i) connectsAndTalks(listener.get(), 1 + i);
  EXPECT_EQ(calls.load(), 4);
}

}  // namespace
}  // namespace tally::transport::test
