// SPDX-License-Identifier: Apache-2.0
// An emulated cluster on one machine: every node (worker or reducer) in its own network
// namespace, linked to one bridge by a veth pair whose two ends are each capped at `rate` with a
// token-bucket filter, so every node has a full-duplex link of that rate, as hosts on a switch.
//
// Layout (names carry the creating pid, so two runs never collide):
//   switch  netns tly<pid>-sw holding the bridge tlybr<pid> (up, no address) and the root-side
//           veth ends. The bridge sits in a namespace of its own, not in the host's, so host
//           firewall rules seen through bridge netfilter (bridge-nf-call-iptables) never apply.
//   node i  netns tly<pid>-<i>, address 198.18.<i / 250>.<i % 250 + 1>/15 on its "eth0", lo up;
//           veth tlv<pid>-<i> (in the switch namespace, on the bridge) <-> eth0 (inside)
//   caps    tc tbf on tlv<pid>-<i> (traffic to the node) and on eth0 (traffic from it)
// Addresses come from the benchmarking range 198.18.0.0/15 (RFC 2544) only. Nothing is added to
// the host's own namespace: deleting the run's namespaces removes every link and qdisc with them.
// docs/emulation.md describes it and how to clean up by hand.
//
// Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and the `ip` and `tc` programs (iproute2), looked
// up in /usr/sbin, /sbin, /usr/bin, /bin, /usr/local/sbin and /usr/local/bin. Every command runs
// with fork/exec (no shell) and a bounded wait. One cluster per process at a time.
//
// Threads: create(), enter() and the accessors are for one thread; destroy() may be called from
// any thread, also concurrently with itself (e.g. from a thread that waits for SIGINT/SIGTERM
// while the main thread is inside the destructor); setRate() from any thread while the cluster
// exists. None of it is async-signal-safe except
// enterPath(); cleanUpOnSignals() wires destroy-on-signal up for callers that want it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tally::driver {

struct EmulationOptions {
  int nodes = 0;                 // 1 to kMaxNodes
  std::string rate = "1gbit";    // tc rate syntax: 100mbit, 1gbit, 500kbit ... (checked by tc)
  // tbf burst. One below 64 KiB also caps the nodes' packets (gso_max_size) to it, since tbf
  // would otherwise cut every larger TCP segment into frames, at a CPU cost the host pays for
  // all nodes (tcBytes).
  std::string burst = "256kb";
  std::string latency = "50ms";  // tbf latency (queue bound)
  // Each node's default TCP congestion control (net.ipv4.tcp_congestion_control, a setting of
  // every network namespace), so runs do not depend on what the host chose; Linux's own default
  // unless asked otherwise. Empty: whatever new namespaces inherit from the host.
  std::string tcp_congestion = "cubic";
};

struct EmulatedNode {
  std::string netns;    // "tly1234-0"
  std::string address;  // "198.18.0.1"
};

// tc's byte counts ("16kb", "256k", "1mb", "1500b", "1500", and bits: "128kbit"): bytes in
// *out, kInvalidUsage for anything else. Used only to size packets to the burst; tc checks the
// text itself.
Status tcBytes(const std::string& text, uint64_t* out);

class EmulatedCluster {
 public:
  static constexpr int kMaxNodes = 1000;  // keeps tlv<pid>-<i> within IFNAMSIZ

  // Checks privileges first: without them fails with kInvalidUsage and a message saying that
  // --emulate needs root, before creating anything; a node count out of range is kInvalidUsage
  // too. Then removes leftovers of dead runs (removeStale; its failures are only logged) and
  // builds the cluster. Other failures are kSystem (kTimeout when a command hangs), name the
  // command that failed and carry its stderr, and leave nothing of this run behind. *out is set
  // only on success. Fails with kInvalidUsage when this process already has a cluster.
  static Status create(const EmulationOptions& options, std::unique_ptr<EmulatedCluster>* out);
  // Calls destroy() and logs its failure, if any.
  ~EmulatedCluster();
  EmulatedCluster(const EmulatedCluster&) = delete;
  EmulatedCluster& operator=(const EmulatedCluster&) = delete;

  const std::vector<EmulatedNode>& nodes() const { return nodes_; }
  const EmulationOptions& options() const { return options_; }
  const std::string& switchNetns() const { return switch_netns_; }

  // Changes node `node`'s caps in both directions to `rate` (tc syntax), keeping the burst and
  // latency they were created with: `tc qdisc change` on both ends of its link (capCommands).
  // Processes inside keep their connections; what is queued drains at the new rate. kInvalidUsage
  // for a node out of range; otherwise failures are kSystem (kTimeout when tc hangs), name the
  // command and carry tc's stderr (a rate tc refuses fails the first command and changes
  // nothing). Calls for one node must not overlap; after destroy() they fail.
  Status setRate(int node, const std::string& rate);

  // The tc commands that cap node `node` of the cluster process `owner` made, as argv lists:
  // traffic to the node first (its link's switch end tlv<owner>-<node>), then traffic from it
  // (eth0 inside the node), each `tc -n NETNS qdisc VERB dev DEV root tbf rate RATE burst BURST
  // latency LATENCY` with `options`' burst and latency. VERB is "add" in create() and "change"
  // in setRate(). Runs nothing.
  static std::vector<std::vector<std::string>> capCommands(const std::string& verb, pid_t owner,
                                                           int node, const std::string& rate,
                                                           const EmulationOptions& options);

  // Removes every namespace (and so every veth, qdisc and the bridge) this object created.
  // Idempotent and thread-safe; a no-op in a forked child (only the creating process removes).
  // Processes still inside a node keep running but lose their link. Returns the first failure
  // but always tries everything.
  Status destroy();

  // Moves the calling process into the node's network namespace with setns(). Call it in a
  // freshly forked child before it starts threads (setns moves only the calling thread, and
  // threads started later inherit it). Sockets made afterwards live in the node.
  static Status enter(const EmulatedNode& node);
  // The file that names a node's namespace ("/var/run/netns/tly1234-0"), for enterPath().
  static std::string netnsPath(const std::string& netns);
  // enter() without allocating, for a child forked from a multi-threaded parent: opens `path`
  // and setns()es into it. Returns 0 or an errno value. Async-signal-safe.
  static int enterPath(const char* path) noexcept;

  // True when this process may create namespaces (effective uid 0 and `ip`/`tc` found), with the
  // reason otherwise.
  static bool canEmulate(std::string* why);

  // Removes leftovers (namespaces named tly<pid>-*, with their links) of runs whose pid is gone.
  static Status removeStale();
  // Removes every namespace named for `pid` whether or not it is alive. Thread-safe.
  static Status removeRun(pid_t pid);

  // Optional cleanup on SIGINT, SIGTERM and SIGHUP for the calling process: installs handlers
  // and a watcher thread that, when one arrives, removes everything named for this pid (every
  // cluster of the process, also one still being created), then ends the process with that
  // signal as its default action would. Forked children that receive one of these signals die
  // by it as before (the handler only acts in the process that installed it); exec resets it.
  // Call once from the main thread before create(); later calls are no-ops. Callers that handle
  // signals themselves can instead call destroy() from their signal-waiting thread.
  static Status cleanUpOnSignals();

 private:
  explicit EmulatedCluster(EmulationOptions options) : options_(std::move(options)) {}
  Status build();

  EmulationOptions options_;
  pid_t owner_pid_ = 0;
  uint64_t gso_max_ = 0;  // the nodes' gso_max_size (0: left alone), from the burst
  std::string switch_netns_;
  std::string bridge_;
  std::vector<EmulatedNode> nodes_;
  std::mutex destroy_mu_;
  bool destroyed_ = false;  // guarded by destroy_mu_
};

}  // namespace tally::driver
