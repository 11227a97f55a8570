// SPDX-License-Identifier: Apache-2.0
// One real tally-reducer per case under each pressure it must survive, applied from raw
// sockets and attacker processes speaking the wire protocol: A members that stall (mid-payload,
// not reading their results), B more connections than it has descriptors for, D Hellos that
// squat memory for communicators that never form, E silent connections filling the opening
// budget while a token-holding job connects, F junk (bad transport hello, none at all, bad
// frame magic, an oversized frame, an undecodable slice header). C, running out of threads,
// needs another user to bind RLIMIT_NPROC and is tested the same way in
// test/reducer/exhaustion_test.cc.
//
// Each case then checks what a shared reducer owes its other users: the pressure is counted
// under its cause on /metrics; once it is handled the process does not spin (its CPU time over
// an idle second); a legitimate two-rank job of forked workers through the plugin connects
// within its connect timeout and all-reduces correctly (checked against the reference); and once
// everyone has left, no connection, communicator or reserved byte is left. The reducer's
// timeouts are short (TALLY_TIMEOUT_MS, TALLY_CONNECT_TIMEOUT_MS in its environment).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/store.h"
#include "protocol/wire.h"
#include "test/support/scrape.h"
#include "test/support/raw_streams.h"
#include "test/support/reducer_child.h"
#include "test/system/reliability/reliability_support.h"
#include "transport/raw_stream.h"

namespace tally::reliability {
namespace {

namespace tcp = transport::tcp;
namespace wire = protocol::wire;
using reducer::test::connectStreams;
using reducer::test::rawConnect;
using reducer::test::recvMsg;
using reducer::test::sendMsg;
using reducer::test::sendPartOfASlice;
using reducer::test::sendSlicesUntilBlocked;
using std::chrono::milliseconds;

constexpr int64_t kIoTimeoutMs = 500;     // the reducer's TALLY_TIMEOUT_MS
constexpr int64_t kJoinTimeoutMs = 3000;  // the reducer's TALLY_CONNECT_TIMEOUT_MS
constexpr int64_t kJobConnectMs = 5000;   // the legitimate workers' TALLY_CONNECT_TIMEOUT_MS
constexpr int64_t kWaitMs = 5000;
constexpr int kWindow = 4;
constexpr uint64_t kSliceBytes = 4096;  // the attackers' slices
constexpr size_t kJobCount = 300007;    // floats per call of the legitimate job
// A process that spins on a dead connection burns about a core: 1 s of CPU per idle second.
constexpr double kIdleCpuSeconds = 0.2;
const char* const kToken = "pressure-test-job-token-5b0e9d21c4";

// A tally-reducer child with a metrics endpoint; stopped when destroyed.
class PressuredReducer {
 public:
  // Starts `tally-reducer --listen 127.0.0.1:0 --threads 1 --window 4 --metrics 127.0.0.1:0`
  // and `args`, with the short timeouts; `in_child` runs in the child before exec.
  Status start(const std::vector<std::string>& args,
               const std::function<void()>& in_child = {}) {
    std::vector<std::string> all = {"--listen",  "127.0.0.1:0", "--threads", "1",
                                    "--window",  std::to_string(kWindow),
                                    "--metrics", "127.0.0.1:0"};
    all.insert(all.end(), args.begin(), args.end());
    reducer::test::ReducerChild c = reducer::test::spawnReducer(
        all,
        {{"TALLY_TIMEOUT_MS", std::to_string(kIoTimeoutMs)},
         {"TALLY_CONNECT_TIMEOUT_MS", std::to_string(kJoinTimeoutMs)}},
        in_child);
    if (c.pid <= 0 || c.out == nullptr) return Status::system("could not start tally-reducer");
    pid_ = c.pid;
    // Both ready lines, or EOF when it exits early (the test's own timeout bounds a hang).
    char line[256] = {};
    const std::string listening = "tally-reducer listening on ";
    const std::string metrics = "tally-reducer metrics on http://";
    for (int i = 0; i < 2 && fgets(line, sizeof(line), c.out) != nullptr; ++i) {
      std::string s(line);
      if (!s.empty() && s.back() == '\n') s.pop_back();
      if (s.rfind(listening, 0) == 0) address_ = s.substr(listening.size());
      if (s.rfind(metrics, 0) == 0) {
        const std::string host_port = s.substr(metrics.size(), s.find('/', metrics.size()) -
                                                                   metrics.size());
        metrics_port_ = reducer::test::portOf(host_port);
      }
    }
    fclose(c.out);
    if (address_.empty() || metrics_port_ == 0) return Status::system("no ready lines");
    return Status::ok();
  }
  ~PressuredReducer() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    reducer::test::reapReducer(pid_);
  }

  pid_t pid() const { return pid_; }
  const std::string& address() const { return address_; }
  bool alive() const {
    int status = 0;
    return waitpid(pid_, &status, WNOHANG) == 0;
  }

  // One series of /metrics ("tally_reducer_connections"); nothing when it cannot be read.
  std::optional<double> metric(const std::string& series) const {
    std::string body;
    if (!metrics::test::httpGet(metrics_port_, "/metrics", &body).isOk()) return std::nullopt;
    return metrics::test::seriesValue(body, series);
  }
  double errors(const std::string& cause) const {
    return metric("tally_reducer_errors_total{cause=\"" + cause + "\"}").value_or(-1);
  }
  double gauge(const std::string& name) const { return metric(name).value_or(-1); }
  // Waits up to timeout_ms for `done`, scraping every 50 ms.
  bool waitFor(const std::function<bool()>& done, int64_t timeout_ms = kWaitMs) const {
    const auto deadline = Clock::now() + milliseconds(timeout_ms);
    for (;;) {
      if (done()) return true;
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(milliseconds(50));
    }
  }
  // Its user and system CPU time so far, from /proc/PID/stat.
  double cpuSeconds() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // The command name may hold spaces: the fields after it start past its closing ')'.
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i == 14) utime = std::stoull(field);
      if (i == 15) stime = std::stoull(field);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  int openDescriptors() const {
    std::error_code ec;
    int n = 0;
    for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/fd",
                                                       ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      ++n;
    }
    return n;
  }

 private:
  pid_t pid_ = -1;
  std::string address_;
  int metrics_port_ = 0;
};

// The reducer uses less than kIdleCpuSeconds of CPU over one second with nothing to do.
void expectIdle(const PressuredReducer& r, const std::string& when) {
  const double before = r.cpuSeconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double used = r.cpuSeconds() - before;
  EXPECT_LT(used, kIdleCpuSeconds) << "the reducer spins " << when << ": " << used
                                   << " s of CPU in an idle second";
}

// Once everyone has left: no connection, communicator or reservation is left.
void expectSettled(const PressuredReducer& r) {
  EXPECT_TRUE(r.waitFor([&] {
    return r.gauge("tally_reducer_connections") == 0 &&
           r.gauge("tally_reducer_communicators") == 0 &&
           r.gauge("tally_reducer_reserved_bytes") == 0;
  })) << r.gauge("tally_reducer_connections") << " connections, "
      << r.gauge("tally_reducer_communicators") << " communicators and "
      << r.gauge("tally_reducer_reserved_bytes") << " reserved bytes left";
}

// A legitimate job: two forked workers load the plugin, connect to the reducer (within
// kJobConnectMs: their TALLY_CONNECT_TIMEOUT_MS) with `token` when given, and run two float
// sums checked against the reference. "" when both did all of it, else what failed.
std::string runJob(const PressuredReducer& r, const std::string& token) {
  std::unique_ptr<driver::TempDir> dir;
  std::unique_ptr<Store> store;
  if (!driver::TempDir::create("pressure", &dir).isOk() ||
      !createFileStore(dir->path(), &store).isOk()) {
    return "no store";
  }
  return functional::runAll(2, [&](int rank) -> int {
    setFailureEnvironment(r.address());
    ::setenv("TALLY_CONNECT_TIMEOUT_MS", std::to_string(kJobConnectMs).c_str(), 1);
    if (!token.empty()) ::setenv("TALLY_JOB_TOKEN", token.c_str(), 1);
    std::unique_ptr<driver::PluginLibrary> lib;
    std::unique_ptr<driver::CollNetApi> api;
    std::unique_ptr<driver::CollComm> comm;
    if (!functional::openCollNet(11, &lib, &api)) return 2;
    driver::CollCommOptions options;
    options.call_bytes = kJobCount * sizeof(float);
    options.timeout_ms = 20000;
    const auto begin = Clock::now();
    if (!functional::check(rank,
                           driver::CollComm::create(api.get(), store.get(), "job", rank, 2,
                                                    options, &comm),
                           "connect")) {
      return 3;
    }
    if (msSince(begin) > kJobConnectMs) {
      std::fprintf(stderr, "worker %d: connected after %lld ms\n", rank,
                   static_cast<long long>(msSince(begin)));
      return 4;
    }
    for (uint64_t seed : {1, 2}) {
      if (!functional::check(rank, checkedAllreduce(comm.get(), kJobCount, seed), "all-reduce")) {
        return 5;
      }
    }
    return functional::check(rank, comm->close(), "close") ? 0 : 6;
  }, 60000);
}

wire::Hello helloFor(uint64_t id, uint32_t nranks, uint64_t slice_bytes) {
  wire::Hello hello;
  hello.comm = wire::CommId{0x9e55, id};
  hello.nranks = nranks;
  hello.nreducers = 1;
  hello.slice_bytes = slice_bytes;
  hello.min_slice_bytes = slice_bytes;
  hello.window = kWindow;
  return hello;
}

// Reads the Challenge and says `hello` on stream 0; with `ready`, reads the Ready too.
void join(int fd, const wire::Hello& hello, bool ready) {
  std::array<uint8_t, wire::kMaxHeaderBytes> buf;
  size_t got = 0;
  ASSERT_TRUE(recvMsg(fd, &buf, &got).isOk());  // the Challenge
  ASSERT_TRUE(sendMsg(fd, wire::encodeHello(hello)).isOk());
  if (ready) {
    ASSERT_TRUE(recvMsg(fd, &buf, &got).isOk());
  }
}

enum class Stall { kMidPayload, kNotReading };

// Joins a one-rank communicator over `streams` sockets, then stalls: stops 100 bytes into a
// slice's payload, or sends slices and never reads their results until the socket takes no more.
void stallMember(const std::string& address, int streams, Stall stall, uint64_t id,
                 std::vector<Fd>* out) {
  std::vector<Fd> fds = connectStreams(address, streams, id);
  ASSERT_EQ(fds.size(), static_cast<size_t>(streams));
  const int fd = fds[0].get();
  ASSERT_NO_FATAL_FAILURE(join(fd, helloFor(id, 1, kSliceBytes), true));
  std::vector<float> payload(kSliceBytes / sizeof(float), 1.0f);
  wire::SliceHeader h;
  h.count = payload.size();
  h.total_count = payload.size();
  const Status st = stall == Stall::kMidPayload
                        ? sendPartOfASlice(fd, h, payload.data(), kSliceBytes, 100)
                        : sendSlicesUntilBlocked(fd, h, payload.data(), kSliceBytes);
  ASSERT_TRUE(st.isOk()) << st.toString();
  *out = std::move(fds);
}

// A: members that stall, over an event loop (one socket) and over threads (two), are dropped at
// the I/O timeout with their communicators and reservations, and nothing polls their dead
// connections while the attacker still holds the sockets open.
TEST(Pressure, A_StalledMembersAreReleasedAtTheIoTimeout) {
  PressuredReducer r;
  Status st = r.start({});
  ASSERT_TRUE(st.isOk()) << st.toString();
  std::vector<std::vector<Fd>> held;
  uint64_t id = 0;
  for (int streams : {1, 2}) {
    for (Stall stall : {Stall::kMidPayload, Stall::kNotReading}) {
      held.emplace_back();
      ASSERT_NO_FATAL_FAILURE(stallMember(r.address(), streams, stall, ++id, &held.back()));
    }
  }
  EXPECT_EQ(r.gauge("tally_reducer_communicators"), 4);
  EXPECT_GT(r.gauge("tally_reducer_reserved_bytes"), 0);
  EXPECT_TRUE(r.waitFor(
      [&] {
        return r.errors("timeout") == 4 && r.gauge("tally_reducer_connections") == 0 &&
               r.gauge("tally_reducer_communicators") == 0 &&
               r.gauge("tally_reducer_reserved_bytes") == 0;
      },
      10 * kIoTimeoutMs + kWaitMs))
      << r.errors("timeout") << " timeouts, " << r.gauge("tally_reducer_connections")
      << " connections, " << r.gauge("tally_reducer_communicators") << " communicators";
  expectIdle(r, "with the stalled members' sockets still open");
  held.clear();  // the pressure ends
  EXPECT_EQ(runJob(r, ""), "");
  expectSettled(r);
  EXPECT_EQ(r.errors("timeout"), 4);
  EXPECT_EQ(r.errors("internal"), 0);
  expectIdle(r, "after the job");
}

// B: 300 silent sockets to a reducer with 64 descriptors. It runs out, sheds what does not fit
// without spinning, keeps its metrics endpoint, and once the sockets go serves a job.
TEST(Pressure, B_RunningOutOfDescriptors) {
  PressuredReducer r;
  Status st = r.start({}, [] {
    rlimit limit{64, 64};
    ::setrlimit(RLIMIT_NOFILE, &limit);
  });
  ASSERT_TRUE(st.isOk()) << st.toString();
  const int port = reducer::test::portOf(r.address());
  std::vector<Fd> held;
  for (int i = 0; i < 300; ++i) {
    held.push_back(rawConnect(port));
    ASSERT_TRUE(held.back().valid());
  }
  EXPECT_TRUE(r.waitFor([&] { return r.openDescriptors() >= 62; }))
      << r.openDescriptors() << " descriptors open";
  ASSERT_TRUE(r.alive());
  expectIdle(r, "out of descriptors");
  held.clear();  // the pressure ends
  EXPECT_TRUE(r.waitFor([&] { return r.openDescriptors() < 40; }))
      << r.openDescriptors() << " descriptors still open";
  EXPECT_EQ(runJob(r, ""), "");
  expectSettled(r);
  // The connections it closed unheard for want of a descriptor are counted as failed accepts.
  EXPECT_GT(r.errors("accept"), 0);
  EXPECT_EQ(r.errors("internal"), 0);
  expectIdle(r, "after the job");
}

// D: Hellos as rank 0 of 15-rank communicators with 64 MiB slices squat --max-memory (two fit,
// two more are refused); at the join timeout the communicators fail, their members are closed
// and their reservations freed, though the squatter keeps its sockets open.
TEST(Pressure, D_SquattedCommunicatorsAreFreedAtTheJoinTimeout) {
  PressuredReducer r;
  Status st = r.start({"--max-memory", "1280M"});
  ASSERT_TRUE(st.isOk()) << st.toString();
  std::vector<std::vector<Fd>> held;
  for (uint64_t id = 1; id <= 4; ++id) {
    held.push_back(connectStreams(r.address(), 1, id));
    ASSERT_EQ(held.back().size(), 1u);
    ASSERT_NO_FATAL_FAILURE(join(held.back()[0].get(), helloFor(id, 15, 64ull << 20), false));
  }
  // Each that fits reserves its results and its first member: 2 x (window + a prompt slice) x
  // 64 MiB.
  EXPECT_TRUE(r.waitFor([&] {
    return r.gauge("tally_reducer_communicators") == 2 && r.errors("limit") == 2 &&
           r.gauge("tally_reducer_reserved_bytes") ==
               2.0 * 2 * (kWindow + protocol::wire::kPromptSlices) * (64 << 20);
  })) << r.gauge("tally_reducer_communicators") << " communicators, " << r.errors("limit")
      << " refused, " << r.gauge("tally_reducer_reserved_bytes") << " bytes reserved";
  EXPECT_TRUE(r.waitFor(
      [&] {
        return r.gauge("tally_reducer_communicators") == 0 &&
               r.gauge("tally_reducer_connections") == 0 &&
               r.gauge("tally_reducer_reserved_bytes") == 0;
      },
      kJoinTimeoutMs + kWaitMs))
      << "the squatted communicators were not freed at the join timeout";
  EXPECT_EQ(r.errors("timeout"), 2);
  EXPECT_EQ(r.gauge("tally_reducer_communicator_failures_total"), 2);
  expectIdle(r, "with the squatters' sockets still open");
  EXPECT_EQ(runJob(r, ""), "");
  held.clear();
  expectSettled(r);
  expectIdle(r, "after the job");
}

// A file holding a job token (and a newline), removed when destroyed.
struct TokenFile {
  char path[64] = "/tmp/tally-pressure-token-XXXXXX";
  bool made = false;
  void write(const std::string& secret) {
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    made = true;
    const std::string text = secret + "\n";
    const ssize_t wrote = ::write(fd, text.data(), text.size());
    ::close(fd);
    ASSERT_EQ(wrote, static_cast<ssize_t>(text.size()));
  }
  ~TokenFile() {
    if (made) ::unlink(path);
  }
};

// A process that connects `count` one-stream connections to `address`, says nothing past the
// transport hello, and holds them until killed. Returns its pid once they are all connected
// (-1 when it failed).
pid_t startSquatter(const std::string& address, int count) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::close(ready[0]);
    std::vector<std::vector<Fd>> held;
    for (int i = 0; i < count; ++i) {
      held.push_back(connectStreams(address, 1, 0x5100 + static_cast<uint64_t>(i)));
      if (held.back().empty()) _exit(1);
      std::this_thread::sleep_for(milliseconds(5));  // oldest first, in a known order
    }
    const char c = 1;
    if (::write(ready[1], &c, 1) != 1) _exit(2);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  const bool ok = pid > 0 && ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
  if (!ok && pid > 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

// E: an attacker process fills the opening budget with connections that never answer the
// Challenge; a job that holds the token still connects at once (the newest connection evicts
// the oldest opening one) and sums correctly while the attacker is there.
TEST(Pressure, E_SilentConnectionsCannotKeepATokenHolderOut) {
  TokenFile token;
  ASSERT_NO_FATAL_FAILURE(token.write(kToken));
  const char* path = token.path;
  PressuredReducer r;
  Status st = r.start({"--token-file", path, "--max-connections", "4",
                       "--max-opening-connections", "4"});
  ASSERT_TRUE(st.isOk()) << st.toString();
  const pid_t squatter = startSquatter(r.address(), 8);
  ASSERT_GT(squatter, 0);
  struct Reap {
    pid_t pid;
    ~Reap() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reap{squatter};
  // The budget holds four; the four after them evicted the four before.
  EXPECT_TRUE(r.waitFor([&] {
    return r.errors("limit") == 4 && r.gauge("tally_reducer_connections") == 4;
  })) << r.errors("limit") << " evicted, " << r.gauge("tally_reducer_connections") << " open";
  expectIdle(r, "with the opening budget full");
  EXPECT_EQ(runJob(r, kToken), "");
  ::kill(squatter, SIGKILL);  // the pressure ends
  expectSettled(r);
  EXPECT_GE(r.errors("limit"), 5);  // the job's connections evicted one or two more
  EXPECT_EQ(r.errors("auth"), 0);
  EXPECT_EQ(r.errors("timeout"), 0);
  expectIdle(r, "after the job");
}

// E, the race in it: a connection evicted from the opening budget that resets before its next
// tick (every 100 ms) sees the eviction is still counted as evicted (`limit`), not as a lost
// peer. The Challenge the newer connection reads shows the reducer took it in, and so evicted the
// older one; the older one resets microseconds later.
TEST(Pressure, E_AnEvictedConnectionThatResetsIsCountedAsEvicted) {
  TokenFile token;
  ASSERT_NO_FATAL_FAILURE(token.write(kToken));
  const char* path = token.path;
  PressuredReducer r;
  Status st = r.start({"--token-file", path, "--max-opening-connections", "1"});
  ASSERT_TRUE(st.isOk()) << st.toString();
  std::array<uint8_t, wire::kMaxHeaderBytes> buf;
  size_t got = 0;
  constexpr int kRounds = 5;
  for (int i = 0; i < kRounds; ++i) {
    std::vector<Fd> older = connectStreams(r.address(), 1, 0xe100 + static_cast<uint64_t>(i));
    ASSERT_EQ(older.size(), 1u);
    ASSERT_TRUE(recvMsg(older[0].get(), &buf, &got).isOk());  // its Challenge: it holds the slot
    std::vector<Fd> newer = connectStreams(r.address(), 1, 0xe200 + static_cast<uint64_t>(i));
    ASSERT_EQ(newer.size(), 1u);
    ASSERT_TRUE(recvMsg(newer[0].get(), &buf, &got).isOk());  // taken in: the older one evicted
    const struct linger reset = {1, 0};
    ASSERT_EQ(::setsockopt(older[0].get(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)), 0);
    older.clear();  // an RST, before the reducer's tick
    newer.clear();  // a plain close of the one holding the slot
    // The reducer has seen both go before the next round: otherwise, on a loaded machine, the next
    // round's first connection evicts this round's newer one (counted as evicted too).
    ASSERT_TRUE(r.waitFor([&] { return r.gauge("tally_reducer_connections") == 0; }))
        << "round " << i << ": " << r.gauge("tally_reducer_connections") << " open";
  }
  EXPECT_TRUE(r.waitFor([&] {
    return r.errors("limit") == kRounds && r.gauge("tally_reducer_connections") == 0;
  })) << r.errors("limit") << " evicted, " << r.errors("peer_lost") << " lost, "
      << r.gauge("tally_reducer_connections") << " open";
  EXPECT_EQ(r.errors("timeout"), 0);
  expectIdle(r, "after the evictions");
}

// F: junk of every kind, each dropped and counted under its own cause: a bad transport hello
// (`accept`), a socket that sends none (`timeout`), a bad frame magic, an oversized frame and an
// undecodable slice header (`protocol`, the last with an Error that says why). None is a lost
// peer or an internal error.
TEST(Pressure, F_JunkIsDroppedAndCountedByCause) {
  PressuredReducer r;
  Status st = r.start({});
  ASSERT_TRUE(st.isOk()) << st.toString();
  const int port = reducer::test::portOf(r.address());
  Fd bad_hello = rawConnect(port);
  std::array<uint8_t, tcp::kHelloBytes> junk;
  junk.fill(0x5a);
  ASSERT_EQ(::send(bad_hello.get(), junk.data(), junk.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(junk.size()));
  Fd no_hello = rawConnect(port);
  ASSERT_TRUE(no_hello.valid());

  std::array<uint8_t, wire::kMaxHeaderBytes> buf;
  size_t got = 0;
  std::vector<Fd> bad_magic = connectStreams(r.address(), 1, 0xf1);
  ASSERT_EQ(bad_magic.size(), 1u);
  ASSERT_TRUE(recvMsg(bad_magic[0].get(), &buf, &got).isOk());  // the Challenge
  std::array<uint8_t, tcp::kHeaderBytes + 8> garbage;
  garbage.fill(0xee);
  ASSERT_EQ(::send(bad_magic[0].get(), garbage.data(), garbage.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(garbage.size()));

  std::vector<Fd> oversized = connectStreams(r.address(), 2, 0xf2);
  ASSERT_EQ(oversized.size(), 2u);
  ASSERT_TRUE(recvMsg(oversized[0].get(), &buf, &got).isOk());
  std::vector<uint8_t> big(32 * 1024, 0x11);
  EXPECT_TRUE(transport::sendFrame(oversized[0].get(), wire::kTagHeader, big.data(), big.size(),
                             kWaitMs, "reducer")
                  .isOk());

  std::vector<Fd> bad_slice = connectStreams(r.address(), 1, 0xf3);
  ASSERT_EQ(bad_slice.size(), 1u);
  ASSERT_NO_FATAL_FAILURE(join(bad_slice[0].get(), helloFor(3, 1, kSliceBytes), true));
  wire::SliceHeader h;
  h.count = kSliceBytes / sizeof(float);
  h.total_count = h.count;
  wire::Frame slice = wire::encodeSlice(h);
  slice.size = wire::kPreambleBytes + 4;  // a slice's preamble, then too little
  ASSERT_TRUE(sendMsg(bad_slice[0].get(), slice).isOk());
  ASSERT_TRUE(recvMsg(bad_slice[0].get(), &buf, &got).isOk());
  wire::Reason reason;
  ASSERT_TRUE(wire::decodeError(buf.data(), got, &reason).isOk());
  EXPECT_NE(reason.text.find("12 bytes"), std::string::npos) << reason.text;

  EXPECT_TRUE(r.waitFor(
      [&] {
        return r.errors("accept") == 1 && r.errors("timeout") == 1 &&
               r.errors("protocol") == 3 && r.gauge("tally_reducer_connections") == 0 &&
               r.gauge("tally_reducer_communicators") == 0;
      },
      kJoinTimeoutMs + kWaitMs))
      << r.errors("accept") << " accept, " << r.errors("timeout") << " timeout, "
      << r.errors("protocol") << " protocol, " << r.gauge("tally_reducer_connections")
      << " connections";
  EXPECT_EQ(r.errors("peer_lost"), 0);
  EXPECT_EQ(r.errors("internal"), 0);
  expectIdle(r, "with the junk senders' sockets still open");
  bad_hello.reset();
  no_hello.reset();
  bad_magic.clear();
  oversized.clear();
  bad_slice.clear();
  EXPECT_EQ(runJob(r, ""), "");
  expectSettled(r);
  EXPECT_EQ(r.errors("protocol"), 3);
  EXPECT_EQ(r.errors("peer_lost"), 0);
  expectIdle(r, "after the job");
}

}  // namespace
}  // namespace tally::reliability
