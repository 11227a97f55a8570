// SPDX-License-Identifier: Apache-2.0
#include "tools/driver/emulated_cluster.h"

#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>

#include "common/log.h"
#include "common/sizes.h"
#include "common/strings.h"

namespace tally::driver {
namespace {

using Clock = std::chrono::steady_clock;

// `ip netns add` keeps one file per named namespace here (iproute2's NETNS_RUN_DIR).
constexpr char kNetnsDir[] = "/var/run/netns";
// No single ip/tc call should take more than this; a hung one is killed.
constexpr int64_t kCommandTimeoutMs = 10000;
constexpr char kPrefix[] = "tly";

// Looked up in fixed places rather than $PATH: the environment is not read outside the
// parameter registry, and root's tools live here on every distribution we run on.
std::string findProgram(const std::string& name) {
  for (const char* dir :
       {"/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/local/bin"}) {
    std::string path = std::string(dir) + "/" + name;
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

std::string joinArgs(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Reads whatever `fd` has into *into; false at EOF or error.
bool drainInto(int fd, std::string* into) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      into->append(buf, static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && errno == EAGAIN;
  }
}

// Runs args[0] (ip or tc) with the rest as its argv, no shell. Ok when it exits 0; otherwise the
// error names the command and carries its stderr. stdout goes to *out when given.
Status runCommand(const std::vector<std::string>& args, std::string* out = nullptr) {
  std::string path = findProgram(args[0]);
  if (path.empty()) return Status::system("`" + args[0] + "` not found (install iproute2)");
  std::vector<std::string> owned = args;
  std::vector<char*> argv;
  for (auto& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);

  int outp[2], errp[2];
  if (::pipe2(outp, O_CLOEXEC) != 0) return Status::fromErrno("pipe", errno);
  if (::pipe2(errp, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(outp[0]);
    ::close(outp[1]);
    return Status::fromErrno("pipe", err);
  }
  // Only our ends are non-blocking; the child writes as usual.
  for (int fd : {outp[0], errp[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls here: the parent may have other threads.
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::dup2(outp[1], STDOUT_FILENO);
    ::dup2(errp[1], STDERR_FILENO);
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  int fork_errno = errno;
  for (int fd : {outp[1], errp[1], devnull})
    if (fd >= 0) ::close(fd);
  if (pid < 0) {
    ::close(outp[0]);
    ::close(errp[0]);
    return Status::fromErrno("fork " + args[0], fork_errno);
  }

  std::string stdout_text, stderr_text;
  auto deadline = Clock::now() + std::chrono::milliseconds(kCommandTimeoutMs);
  bool open_out = true, open_err = true, timed_out = false;
  while (open_out || open_err) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p[2] = {{open_out ? outp[0] : -1, POLLIN, 0},
                          {open_err ? errp[0] : -1, POLLIN, 0}};
    int r = ::poll(p, 2, static_cast<int>(std::min<int64_t>(left.count(), 100)));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    if (open_out && p[0].revents != 0) open_out = drainInto(outp[0], &stdout_text);
    if (open_err && p[1].revents != 0) open_err = drainInto(errp[0], &stderr_text);
  }
  ::close(outp[0]);
  ::close(errp[0]);

  // Both pipes are closed once it exits; a child that closed them and lingers gets 1 s more.
  int wstatus = 0;
  bool reaped = false;
  auto reap_deadline = Clock::now() + std::chrono::milliseconds(timed_out ? 0 : 1000);
  for (;;) {
    pid_t r = ::waitpid(pid, &wstatus, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) {
      reaped = r == pid;
      break;
    }
    if (Clock::now() >= reap_deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!reaped) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &wstatus, 0);
    return Status::timeout("`" + joinArgs(args) + "` did not finish within " +
                           std::to_string(kCommandTimeoutMs) + " ms");
  }
  trimRight(&stderr_text);
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
    if (out) *out = std::move(stdout_text);
    return Status::ok();
  }
  std::string how = WIFEXITED(wstatus) ? "exit " + std::to_string(WEXITSTATUS(wstatus))
                                       : "signal " + std::to_string(WTERMSIG(wstatus));
  return Status::system("`" + joinArgs(args) + "` failed (" + how + ")" +
                        (stderr_text.empty() ? "" : ": " + stderr_text));
}

// The names of the run of `pid`: its switch namespace, node i's namespace, and the switch end of
// node i's link.
std::string switchNetnsName(pid_t pid) { return kPrefix + std::to_string(pid) + "-sw"; }
std::string nodeNetnsName(pid_t pid, int i) {
  return kPrefix + std::to_string(pid) + "-" + std::to_string(i);
}
std::string vethName(pid_t pid, int i) {
  return "tlv" + std::to_string(pid) + "-" + std::to_string(i);
}

std::string nodeAddress(int i) {
  return "198.18." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1);
}

// Every namespace named tly<pid>-<something>, as (pid, name).
std::vector<std::pair<pid_t, std::string>> runNamespaces() {
  std::vector<std::pair<pid_t, std::string>> found;
  DIR* dir = ::opendir(kNetnsDir);
  if (dir == nullptr) return found;  // no named namespace was ever made
  while (struct dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name.rfind(kPrefix, 0) != 0) continue;
    const size_t start = sizeof(kPrefix) - 1;  // the pid's first digit
    size_t end = name.find_first_not_of("0123456789", start);
    if (end == start || end == std::string::npos || end - start > 9) continue;
    if (name[end] != '-' || end + 1 == name.size()) continue;
    found.emplace_back(static_cast<pid_t>(std::stol(name.substr(start, end - start))), name);
  }
  ::closedir(dir);
  return found;
}

bool pathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// Set once by cleanUpOnSignals() before its handlers are installed, read by the handler.
int g_cleanup_write_fd = -1;
pid_t g_cleanup_owner = 0;

void onCleanupSignal(int sig) {
  int saved = errno;
  if (::getpid() == g_cleanup_owner) {
    unsigned char b = static_cast<unsigned char>(sig);
    ssize_t n = ::write(g_cleanup_write_fd, &b, 1);
    (void)n;
  } else {
    // A forked child that inherited the handler: behave as if there were none.
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(sig, &dfl, nullptr);
    ::raise(sig);
  }
  errno = saved;
}

// Writes `value` to the sysctl file `path` (under /proc/sys/net) of the network namespace named
// by `netns_path`. /proc/sys/net shows the writing thread's namespace, so a thread of its own
// enters the namespace and writes; the rest of the process stays where it was.
Status writeNamespaceSysctl(const std::string& netns_path, const char* path,
                            const std::string& value) {
  int err = 0;
  const char* step = "";
  std::thread writer([&] {
    step = "enter";
    err = EmulatedCluster::enterPath(netns_path.c_str());
    if (err != 0) return;
    step = "open";
    int fd = ::open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      err = errno;
      return;
    }
    step = "write";
    const ssize_t n = ::write(fd, value.data(), value.size());
    err = n == static_cast<ssize_t>(value.size()) ? 0 : n < 0 ? errno : EIO;
    ::close(fd);
  });
  writer.join();
  if (err == 0) return Status::ok();
  return Status::fromErrno(std::string(step) + " " + path + " = " + value + " in " + netns_path,
                           err);
}

// A network namespace other than the host's may pick only the congestion controls in the host's
// tcp_allowed_congestion_control (some kernels allow just "reno bbr" there, though cubic is
// built in). Adds `name` to that list when the kernel has it and the list lacks it; the host's
// own choice, tcp_congestion_control, stays as it was. Best effort: the namespace's own write
// then says what went wrong.
void allowCongestionControl(const std::string& name) {
  auto readLine = [](const char* path) {
    std::string text;
    if (FILE* f = std::fopen(path, "re")) {
      char buf[512];
      if (std::fgets(buf, sizeof(buf), f) != nullptr) text = buf;
      std::fclose(f);
    }
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
  };
  auto has = [](const std::string& list, const std::string& word) {
    for (const std::string& w : splitList(list, ' ')) {
      if (w == word) return true;
    }
    return false;
  };
  const std::string allowed = readLine("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
  if (has(allowed, name) ||
      !has(readLine("/proc/sys/net/ipv4/tcp_available_congestion_control"), name)) {
    return;
  }
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/tcp_allowed_congestion_control", "we")) {
    std::fprintf(f, "%s %s\n", allowed.c_str(), name.c_str());
    std::fclose(f);
  }
}

}  // namespace

Status tcBytes(const std::string& text, uint64_t* out) {
  // tc's byte units are parseBytes' (b, k, kb, m, mb, g, gb, any case, K = 1024), plus counts in
  // bits ("128kbit"); tc takes one word, and refuses more than 32 bits of bytes.
  const Status bad =
      Status::invalidUsage("not a tc byte count: '" + text + "' (e.g. 16kb, 1500b)");
  if (text.find_first_of(" \t") != std::string::npos) return bad;
  std::string_view bytes = text;
  uint64_t bits_per_unit = 1;
  constexpr std::string_view kBit = "bit";
  if (bytes.size() > kBit.size() &&
      strncasecmp(bytes.data() + bytes.size() - kBit.size(), kBit.data(), kBit.size()) == 0) {
    bytes.remove_suffix(kBit.size());
    bits_per_unit = 8;
  }
  uint64_t n = 0;
  if (!parseBytes(bytes, &n).isOk() || n > UINT32_MAX * bits_per_unit) return bad;
  *out = n / bits_per_unit;
  return Status::ok();
}

bool EmulatedCluster::canEmulate(std::string* why) {
  std::string reason;
  if (::geteuid() != 0) {
    reason =
        "--emulate needs root: network namespaces, veth pairs and tc qdiscs need "
        "CAP_NET_ADMIN and CAP_SYS_ADMIN (run it as root, e.g. with sudo)";
  } else if (findProgram("ip").empty() || findProgram("tc").empty()) {
    reason = "--emulate needs the ip and tc programs (apt-get install iproute2)";
  }
  if (why) *why = reason;
  return reason.empty();
}

std::string EmulatedCluster::netnsPath(const std::string& netns) {
  return std::string(kNetnsDir) + "/" + netns;
}

int EmulatedCluster::enterPath(const char* path) noexcept {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int r = ::setns(fd, CLONE_NEWNET);
  int err = r == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

Status EmulatedCluster::enter(const EmulatedNode& node) {
  int err = enterPath(netnsPath(node.netns).c_str());
  if (err != 0) return Status::fromErrno("enter network namespace " + node.netns, err);
  return Status::ok();
}

Status EmulatedCluster::create(const EmulationOptions& options,
                               std::unique_ptr<EmulatedCluster>* out) {
  std::string why;
  if (!canEmulate(&why)) return Status::invalidUsage(why);
  if (options.nodes < 1 || options.nodes > kMaxNodes)
    return Status::invalidUsage("an emulated cluster needs 1 to " + std::to_string(kMaxNodes) +
                                " nodes, not " + std::to_string(options.nodes));
  pid_t pid = ::getpid();
  for (const auto& [owner, name] : runNamespaces())
    if (owner == pid)
      return Status::invalidUsage("this process already has an emulated cluster (namespace " +
                                  name + "); destroy it first");
  Status stale = removeStale();
  if (!stale.isOk())
    TALLY_WARN("emulation: leftovers of an earlier run remain: %s", stale.toString().c_str());

  std::unique_ptr<EmulatedCluster> cluster(new EmulatedCluster(options));
  cluster->owner_pid_ = pid;
  cluster->switch_netns_ = switchNetnsName(pid);
  cluster->bridge_ = "tlybr" + std::to_string(pid);
  Status s = cluster->build();
  if (!s.isOk()) {
    Status cleanup = cluster->destroy();
    if (!cleanup.isOk())
      TALLY_WARN("emulation: cleanup after a failed create: %s", cleanup.toString().c_str());
    return s;
  }
  TALLY_INFO(log::kNet, "emulation: %d nodes at %s in namespaces %s-*", options.nodes,
             options.rate.c_str(), (kPrefix + std::to_string(pid)).c_str());
  *out = std::move(cluster);
  return Status::ok();
}

std::vector<std::vector<std::string>> EmulatedCluster::capCommands(
    const std::string& verb, pid_t owner, int node, const std::string& rate,
    const EmulationOptions& options) {
  const std::vector<std::string> tbf = {"root",  "tbf",         "rate",    rate,
                                        "burst", options.burst, "latency", options.latency};
  std::vector<std::vector<std::string>> commands = {
      {"tc", "-n", switchNetnsName(owner), "qdisc", verb, "dev", vethName(owner, node)},
      {"tc", "-n", nodeNetnsName(owner, node), "qdisc", verb, "dev", "eth0"}};
  for (auto& c : commands) c.insert(c.end(), tbf.begin(), tbf.end());
  return commands;
}

Status EmulatedCluster::setRate(int node, const std::string& rate) {
  if (node < 0 || node >= static_cast<int>(nodes_.size()))
    return Status::invalidUsage("emulated cluster: no node " + std::to_string(node) + " (it has " +
                                std::to_string(nodes_.size()) + ")");
  for (const auto& command : capCommands("change", owner_pid_, node, rate, options_))
    TALLY_RETURN_IF_ERROR(runCommand(command));
  TALLY_INFO(log::kNet, "emulation: node %d now at %s", node, rate.c_str());
  return Status::ok();
}

Status EmulatedCluster::build() {
  const std::string& sw = switch_netns_;
  uint64_t burst = 0;
  TALLY_RETURN_IF_ERROR(tcBytes(options_.burst, &burst));
  // A packet larger than the bucket is cut into frames by tbf; below 64 KiB (TCP's largest
  // segment on a veth) the nodes send none that large. tbf counts each frame's headers too
  // (about 66 bytes a frame): an eighth off leaves room for them. At least one frame.
  constexpr uint64_t kLargestSegment = 65536;
  constexpr uint64_t kFrame = 1514;
  if (burst < kLargestSegment) gso_max_ = std::max(burst - burst / 8, kFrame);
  if (!options_.tcp_congestion.empty()) allowCongestionControl(options_.tcp_congestion);
  TALLY_RETURN_IF_ERROR(runCommand({"ip", "netns", "add", sw}));
  TALLY_RETURN_IF_ERROR(runCommand({"ip", "-n", sw, "link", "add", bridge_, "type", "bridge"}));
  TALLY_RETURN_IF_ERROR(runCommand({"ip", "-n", sw, "link", "set", bridge_, "up"}));
  for (int i = 0; i < options_.nodes; ++i) {
    EmulatedNode node{nodeNetnsName(owner_pid_, i), nodeAddress(i)};
    const std::string veth = vethName(owner_pid_, i);
    const auto caps = capCommands("add", owner_pid_, i, options_.rate, options_);
    if (veth.size() >= IFNAMSIZ || bridge_.size() >= IFNAMSIZ)
      return Status::internal("interface name " + veth + " is longer than IFNAMSIZ allows");
    const std::string& ns = node.netns;
    TALLY_RETURN_IF_ERROR(runCommand({"ip", "netns", "add", ns}));
    // Both ends are made in their namespaces directly, so "eth0" never meets the host's eth0.
    TALLY_RETURN_IF_ERROR(runCommand({"ip", "-n", sw, "link", "add", veth, "type", "veth", "peer",
                                      "name", "eth0", "netns", ns}));
    TALLY_RETURN_IF_ERROR(
        runCommand({"ip", "-n", sw, "link", "set", veth, "master", bridge_, "up"}));
    TALLY_RETURN_IF_ERROR(runCommand(caps[0]));  // traffic to the node
    TALLY_RETURN_IF_ERROR(
        runCommand({"ip", "-n", ns, "addr", "add", node.address + "/15", "dev", "eth0"}));
    TALLY_RETURN_IF_ERROR(runCommand({"ip", "-n", ns, "link", "set", "eth0", "up"}));
    TALLY_RETURN_IF_ERROR(runCommand({"ip", "-n", ns, "link", "set", "lo", "up"}));
    TALLY_RETURN_IF_ERROR(runCommand(caps[1]));  // traffic from the node
    if (gso_max_ > 0) {
      const std::string size = std::to_string(gso_max_);
      TALLY_RETURN_IF_ERROR(
          runCommand({"ip", "-n", ns, "link", "set", "eth0", "gso_max_size", size}));
      TALLY_RETURN_IF_ERROR(
          runCommand({"ip", "-n", sw, "link", "set", veth, "gso_max_size", size}));
    }
    if (!options_.tcp_congestion.empty()) {
      Status cc = writeNamespaceSysctl(netnsPath(ns), "/proc/sys/net/ipv4/tcp_congestion_control",
                                       options_.tcp_congestion);
      if (!cc.isOk())
        return Status::system("TCP congestion control " + options_.tcp_congestion +
                              " (the kernel must have it; see tcp_available_congestion_control): " +
                              cc.message());
    }
    nodes_.push_back(std::move(node));
  }
  return Status::ok();
}

Status EmulatedCluster::destroy() {
  std::lock_guard<std::mutex> lock(destroy_mu_);
  if (destroyed_ || ::getpid() != owner_pid_) return Status::ok();
  destroyed_ = true;
  return removeRun(owner_pid_);
}

EmulatedCluster::~EmulatedCluster() {
  Status s = destroy();
  if (!s.isOk()) TALLY_WARN("emulation: cleanup failed: %s", s.toString().c_str());
}

Status EmulatedCluster::removeRun(pid_t pid) {
  std::vector<std::string> names;
  for (auto& [owner, name] : runNamespaces())
    if (owner == pid) names.push_back(std::move(name));
  // The switch first: with it go the bridge and every veth, so nodes whose namespaces outlive
  // their names (a process still inside) are cut off at once.
  std::stable_partition(names.begin(), names.end(), [](const std::string& n) {
    return n.size() > 3 && n.compare(n.size() - 3, 3, "-sw") == 0;
  });
  Status first;
  for (const auto& name : names) {
    Status s = runCommand({"ip", "netns", "del", name});
    // Someone else (a concurrent destroy, the signal watcher) may have removed it first.
    if (!s.isOk() && pathExists(netnsPath(name)) && first.isOk()) first = s;
  }
  return first;
}

Status EmulatedCluster::removeStale() {
  std::set<pid_t> dead;
  for (const auto& [owner, name] : runNamespaces())
    if (owner > 0 && ::kill(owner, 0) != 0 && errno == ESRCH) dead.insert(owner);
  Status first;
  for (pid_t pid : dead) {
    Status s = removeRun(pid);
    if (s.isOk()) {
      TALLY_INFO(log::kNet, "emulation: removed leftovers of dead run %d", static_cast<int>(pid));
    } else if (first.isOk()) {
      first = s;
    }
  }
  return first;
}

Status EmulatedCluster::cleanUpOnSignals() {
  static std::mutex mu;
  static bool installed = false;
  std::lock_guard<std::mutex> lock(mu);
  if (installed) return Status::ok();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::fromErrno("pipe for signal cleanup", errno);
  // The handler must never block on a full pipe.
  ::fcntl(fds[1], F_SETFL, ::fcntl(fds[1], F_GETFL) | O_NONBLOCK);
  g_cleanup_write_fd = fds[1];
  g_cleanup_owner = ::getpid();
  std::thread([read_fd = fds[0], owner = g_cleanup_owner] {
    for (;;) {
      unsigned char sig = 0;
      ssize_t n = ::read(read_fd, &sig, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      Status s = removeRun(owner);
      if (!s.isOk()) TALLY_WARN("emulation: cleanup on signal %d: %s", sig, s.toString().c_str());
      struct sigaction dfl = {};
      dfl.sa_handler = SIG_DFL;
      ::sigaction(sig, &dfl, nullptr);
      ::kill(::getpid(), sig);  // ends the process as the signal's default action would
    }
  }).detach();
  struct sigaction sa = {};
  sa.sa_handler = onCleanupSignal;
  sa.sa_flags = SA_RESTART;
  ::sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    if (::sigaction(sig, &sa, nullptr) != 0) return Status::fromErrno("sigaction", errno);
  installed = true;
  return Status::ok();
}

}  // namespace tally::driver
