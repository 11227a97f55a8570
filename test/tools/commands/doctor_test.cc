// SPDX-License-Identifier: Apache-2.0
// tally doctor: the NCCL-variable checks and the bandwidth comparison table by table, the host
// checks against the built plugin, and the built `tally doctor` against a live tally-reducer and
// a dead address.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tools/commands/doctor_checks.h"
#include "tools/commands/doctor_host.h"
#include "tools/commands/doctor_probe.h"
#include "tools/driver/process.h"
#include "transport/network.h"
#include "transport/route.h"

namespace tally::commands::doctor {
namespace {

using Clock = std::chrono::steady_clock;
constexpr Severity P = Severity::kPass, W = Severity::kWarn, F = Severity::kFail;

// ---- NCCL variables ----------------------------------------------------------------------------

struct NcclCase {
  std::map<std::string, std::string> changes;  // applied over the good environment; "-" unsets
  Severity expected;                           // of the line for the changed variable
};

// Every case starts from an environment that passes and changes one variable. The job's NCCL
// is `nccl_version` (0: unknown); libnccl-net.so is Tally only when both flags say so.
std::vector<CheckResult> runNccl(const std::map<std::string, std::string>& changes,
                                 int coll_ranks = 2, bool libraries_are_tally = true,
                                 int nccl_version = 0, bool default_name_is_tally = true) {
  std::map<std::string, std::string> env = {{"NCCL_COLLNET_ENABLE", "1"},
                                            {"NCCL_NET_PLUGIN", "tally"}};
  for (const auto& [k, v] : changes) {
    if (v == "-") {
      env.erase(k);
    } else {
      env[k] = v;
    }
  }
  NcclCheckContext ctx;
  ctx.coll_ranks = coll_ranks;
  ctx.nccl_version = nccl_version;
  ctx.loads_tally = [=](const std::string& library) {
    return libraries_are_tally && (library != "libnccl-net.so" || default_name_is_tally);
  };
  return checkNcclVariables(MapParamSource(env), ctx);
}

void expectOne(const std::vector<CheckResult>& got, const std::string& check, Severity s,
               const std::string& why) {
  ASSERT_EQ(got.size(), 1u) << why;
  EXPECT_EQ(got[0].check, s == P ? "nccl" : check) << why << ": " << formatResult(got[0]);
  EXPECT_EQ(got[0].severity, s) << why << ": " << formatResult(got[0]);
}

void runTable(const std::string& variable, const std::vector<std::pair<std::string, Severity>>& t) {
  for (const auto& [value, expected] : t) {
    expectOne(runNccl({{variable, value}}), variable, expected, variable + "=" + value);
  }
}

TEST(DoctorNccl, GoodEnvironmentPasses) {
  const auto got = runNccl({});
  expectOne(got, "nccl", P, "good environment");
  EXPECT_EQ(formatResult(got[0]).rfind("PASS  nccl: ", 0), 0u);
}

// NCCL 2.27 to 2.29 forget the plugin after the last communicator: the reference count must be
// at least 1 there, unless NCCL finds Tally again by the default name. Other versions, or an
// unknown one, say nothing.
TEST(DoctorNccl, PluginRefCountUnderNcclThatForgetsThePlugin) {
  auto run = [](const std::map<std::string, std::string>& changes, int version,
                bool default_is_tally) {
    return runNccl(changes, 2, true, version, default_is_tally);
  };
  const std::string v = "NCCL_NET_PLUGIN_REF_COUNT";
  expectOne(run({}, 22809, false), v, W, "2.28.9, unset");
  expectOne(run({{v, "0"}}, 22809, false), v, W, "2.28.9, 0");
  expectOne(run({{v, "x"}}, 22709, false), v, W, "2.27.9, not a number");
  expectOne(run({{v, "1"}}, 22809, false), v, P, "2.28.9, 1");
  expectOne(run({{v, "2"}}, 22907, false), v, P, "2.29.7, 2");
  expectOne(run({}, 23007, false), v, P, "2.30.7");
  expectOne(run({}, 22105, false), v, P, "2.21.5");
  expectOne(run({}, 0, false), v, P, "unknown version");
  // NCCL_NET_PLUGIN unset and libnccl-net.so is Tally: NCCL reopens it by that name.
  expectOne(run({{"NCCL_NET_PLUGIN", "-"}}, 22809, true), v, P, "default name is Tally");
  const auto got = run({}, 22809, false);
  EXPECT_NE(got[0].detail.find("NCCL 2.28.9 unloads the plugin"), std::string::npos)
      << got[0].detail;
  EXPECT_NE(got[0].detail.find("NCCL_NET_PLUGIN_REF_COUNT=1"), std::string::npos) << got[0].detail;
}

TEST(DoctorNccl, NcclVersions) {
  EXPECT_EQ(parseNcclVersion("2.28.9"), 22809);
  EXPECT_EQ(parseNcclVersion(" 2.30.7 "), 23007);
  EXPECT_EQ(parseNcclVersion("2.8.4"), 2804);
  EXPECT_EQ(parseNcclVersion("22809"), 22809);
  EXPECT_EQ(parseNcclVersion("2.28"), 0);
  EXPECT_EQ(parseNcclVersion("two"), 0);
  EXPECT_EQ(parseNcclVersion(""), 0);
  EXPECT_EQ(formatNcclVersion(22809), "2.28.9");
  EXPECT_EQ(formatNcclVersion(2804), "2.8.4");
  EXPECT_EQ(formatNcclVersion(0), "(unknown)");
}

// CollNet's device shares the topology node of net device 0, where NCCL then never uses
// GPUDirect RDMA.
TEST(DoctorGpuDirect, CollNetCostsGpuDirectOnDeviceZero) {
  EXPECT_FALSE(checkGpuDirect(true, {{"eth0", false}}).has_value()) << "TCP: nothing to lose";
  EXPECT_FALSE(checkGpuDirect(true, {}).has_value());
  auto r = checkGpuDirect(true, {{"mlx5_0", true}, {"mlx5_1", true}});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->severity, W);
  EXPECT_NE(r->detail.find("net device 0 (mlx5_0)"), std::string::npos) << r->detail;
  EXPECT_NE(r->detail.find("the other 1 keep it"), std::string::npos) << r->detail;
  EXPECT_NE(r->detail.find("TALLY_COLLNET=0"), std::string::npos) << r->detail;
  r = checkGpuDirect(false, {{"mlx5_0", true}, {"mlx5_1", true}});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->severity, P);
  EXPECT_NE(r->detail.find("on 2 of Tally's net device(s)"), std::string::npos) << r->detail;
  r = checkGpuDirect(true, {{"eth0", false}, {"mlx5_0", true}});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->severity, P);
}

TEST(DoctorNccl, CollnetEnable) {
  runTable("NCCL_COLLNET_ENABLE", {{"-", F}, {"", F}, {"0", F}, {"true", F}, {"2", F}, {"1", P}});
  EXPECT_NE(runNccl({{"NCCL_COLLNET_ENABLE", "0"}})[0].detail.find("tally launch"),
            std::string::npos);
}

TEST(DoctorNccl, Net) {
  runTable("NCCL_NET", {{"IB", F},
                        {"Socket", F},
                        {"AWS Libfabric", F},
                        {"Tally", P},
                        {"tally", P},
                        {"TALLY", P},
                        {"-", P}});
}

TEST(DoctorNccl, NetPluginForms) {
  runTable("NCCL_NET_PLUGIN", {{"none", F},
                               {"NONE", F},
                               {"aws-ofi", F},
                               {"Tally", F},  // NCCL would look for libnccl-net-Tally.so
                               {"/opt/ofi/lib/libnccl-net-ofi.so", F},
                               {"tally", P},
                               {"libnccl-net-tally.so", P},
                               {"/opt/tally/lib/libnccl-net-tally.so", P},
                               {"/usr/local/lib/libnccl-net.so", P}});
}

TEST(DoctorNccl, NetPluginResolution) {
  // Unset: NCCL opens libnccl-net.so; WARN unless that is Tally here.
  expectOne(runNccl({{"NCCL_NET_PLUGIN", "-"}}, 2, true), "NCCL_NET_PLUGIN", P, "unset, Tally");
  expectOne(runNccl({{"NCCL_NET_PLUGIN", "-"}}, 2, false), "NCCL_NET_PLUGIN", W, "unset, other");
  expectOne(runNccl({{"NCCL_NET_PLUGIN", "tally"}}, 2, false), "NCCL_NET_PLUGIN", W,
            "tally not on the library path");
  // The library asked about is the one NCCL would open.
  for (const auto& [value, library] : std::vector<std::pair<std::string, std::string>>{
           {"-", "libnccl-net.so"},
           {"tally", "libnccl-net-tally.so"},
           {"libnccl-net-tally.so", "libnccl-net-tally.so"},
           {"/x/libnccl-net-tally.so", "/x/libnccl-net-tally.so"}}) {
    std::vector<std::string> asked;
    NcclCheckContext ctx;
    ctx.loads_tally = [&asked](const std::string& l) {
      asked.push_back(l);
      return true;
    };
    MapParamSource env;
    env.set("NCCL_COLLNET_ENABLE", "1");
    if (value != "-") env.set("NCCL_NET_PLUGIN", value);
    (void)checkNcclVariables(env, ctx);
    EXPECT_EQ(asked, std::vector<std::string>{library}) << value;
  }
}

TEST(DoctorNccl, Algo) {
  runTable("NCCL_ALGO", {{"ring", F},
                         {"Ring,Tree", F},
                         {"^CollNetChain,CollNetDirect", F},
                         {"^collnet", F},
                         {"allreduce:ring;broadcast:collnetchain", F},
                         {"collnetchain;allreduce:tree", F},  // allreduce's own section wins
                         {"allreduce:tree;collnetchain", F},  // a bare list never overrides it
                         {"AllReduce,ReduceScatter:ring", F},
                         {"allreduce:collnetchain", P},
                         {"CollNetDirect", P},
                         {"^ring,tree", P},
                         {"^collnetchain", P},  // CollNetDirect remains
                         {"broadcast:ring", P},
                         {"ring;allreduce:collnetchain,ring", P},
                         {"allreduce:ring;allreduce:collnetchain", P},  // the last one wins
                         {" allreduce : collnetchain ; ", P},
                         {"collnet", P},  // older NCCL's single CollNet algorithm
                         {"allreduce:", W},
                         {"bogus:ring", W},
                         {"collnetchain,warp", W}});
}

TEST(DoctorNccl, Proto) {
  runTable("NCCL_PROTO", {{"LL", F},
                          {"LL,LL128", F},
                          {"^simple", F},
                          {"allreduce:ll128", F},
                          {"Simple", P},
                          {"^LL128", P},
                          {"allgather:LL", P},
                          {"allreduce:simple,ll;ll", P},
                          {"simple,fast", W},
                          {"^", W}});
}

TEST(DoctorNccl, NodeThreshold) {
  runTable("NCCL_COLLNET_NODE_THRESHOLD", {{"3", F}, {"2", P}, {"1", P}, {"two", W}});
  expectOne(runNccl({{"NCCL_COLLNET_NODE_THRESHOLD", "2"}}, 1), "NCCL_COLLNET_NODE_THRESHOLD", F,
            "2 with one rank");
}

TEST(DoctorNccl, EveryProblemHasItsLineInOrder) {
  const auto got = runNccl({{"NCCL_COLLNET_ENABLE", "-"},
                            {"NCCL_NET", "IB"},
                            {"NCCL_ALGO", "ring"},
                            {"NCCL_PROTO", "LL"}});
  std::vector<std::string> checks;
  for (const auto& r : got) {
    EXPECT_EQ(r.severity, F) << formatResult(r);
    checks.push_back(r.check);
  }
  EXPECT_EQ(checks, (std::vector<std::string>{"NCCL_COLLNET_ENABLE", "NCCL_NET", "NCCL_ALGO",
                                              "NCCL_PROTO"}));
}

TEST(DoctorNccl, SelectorParse) {
  SelectorResult s = parseNcclSelector("Ring;AllReduce:^LL128,Simple;broadcast:tree");
  EXPECT_TRUE(s.problem.empty()) << s.problem;
  EXPECT_TRUE(s.restricted);
  EXPECT_TRUE(s.exclude);
  EXPECT_EQ(s.names, (std::vector<std::string>{"ll128", "simple"}));
  EXPECT_TRUE(s.allows("ll"));
  EXPECT_FALSE(s.allows("simple"));
  EXPECT_FALSE(parseNcclSelector("").restricted);
  EXPECT_FALSE(parseNcclSelector("reduce:ring").restricted);
}

// ---- results and the bandwidth comparison ------------------------------------------------------

TEST(DoctorReport, FormatAndExitStatus) {
  EXPECT_EQ(formatResult({W, "cluster", "no cluster spec"}), "WARN  cluster: no cluster spec");
  EXPECT_EQ(exitStatus({}), 0);
  EXPECT_EQ(exitStatus({{P, "a", ""}, {P, "b", ""}}), 0);
  EXPECT_EQ(exitStatus({{P, "a", ""}, {W, "b", ""}}), 1);
  EXPECT_EQ(exitStatus({{F, "a", ""}, {W, "b", ""}, {P, "c", ""}}), 2);
}

TEST(DoctorBandwidth, Comparison) {
  BandwidthInput in;
  in.link_source = "eth0";
  in.worker_link_gbps = 10.0;
  in.coll_ranks = 2;
  in.reducer_gbytes_per_s = {1.5, 1.5};  // 24 Gb/s against 2 x 10 Gb/s
  CheckResult r = checkBandwidth(in);
  EXPECT_EQ(r.severity, P) << formatResult(r);
  EXPECT_NE(r.detail.find("24.0 Gb/s"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("20.0 Gb/s"), std::string::npos) << r.detail;

  in.coll_ranks = 3;  // 24 against 30: 6 Gb/s (20%) short
  r = checkBandwidth(in);
  EXPECT_EQ(r.severity, W) << formatResult(r);
  EXPECT_NE(r.detail.find("6.0 Gb/s (20%) short"), std::string::npos) << r.detail;

  in.coll_ranks = 0;  // no spec counts as one rank
  in.worker_link_gbps = 24.0;
  EXPECT_EQ(checkBandwidth(in).severity, P);

  in.worker_link_gbps.reset();
  r = checkBandwidth(in);
  EXPECT_EQ(r.severity, W);
  EXPECT_NE(r.detail.find("unknown link speed"), std::string::npos) << r.detail;

  in.worker_link_gbps = 10.0;
  in.reducer_gbytes_per_s.clear();
  EXPECT_EQ(checkBandwidth(in).severity, W);
  EXPECT_EQ(formatGbps(0.25), "250 Mb/s");
}

// The link `tally doctor` reports is the plugin's: the interface the kernel routes the first
// reducer to, its sysfs speed, TALLY_LINK_MBPS over both.
TEST(DoctorHost, LinkSpeedOfTheReducersRoute) {
  Params params = Params::defaults();
  ReducerList reducers;
  reducers.addresses = {"127.0.0.1:5555", "192.0.2.200:5555"};
  LinkSpeed lo = workerLinkSpeed(params, reducers, nullptr);
  EXPECT_EQ(lo.interface, "lo");
  EXPECT_FALSE(lo.gbps.has_value());
  EXPECT_EQ(lo.reported_mbps, transport::kUnknownLinkMbps);
  EXPECT_NE(lo.reason.find("loopback"), std::string::npos) << lo.reason;
  EXPECT_EQ(checkLink(lo, true).severity, P) << formatResult(checkLink(lo, true));
  // The setting the plugin reports to NCCL wins over the interface.
  params.linkMbps = 2500;
  LinkSpeed set = workerLinkSpeed(params, reducers, nullptr);
  EXPECT_EQ(set.gbps.value_or(0), 2.5);
  EXPECT_EQ(set.reported_mbps, 2500);
  EXPECT_EQ(set.interface, "lo");
  EXPECT_NE(set.reason.find("TALLY_LINK_MBPS"), std::string::npos) << set.reason;
  // Below NCCL's slowest CollNet search step: a WARN while reducers are configured.
  params.linkMbps = 400;
  LinkSpeed slow = workerLinkSpeed(params, reducers, nullptr);
  EXPECT_EQ(checkLink(slow, true).severity, W);
  EXPECT_EQ(checkLink(slow, false).severity, P);
  params.linkMbps = 0;

  // A reducer elsewhere: the interface of the default route, with its sysfs speed.
  transport::Interface routed;
  if (!transport::routeInterface("198.51.100.1", &routed).isOk() || routed.loopback) {
    GTEST_SKIP() << "no route off this host";
  }
  reducers.addresses = {"198.51.100.1:5555"};
  std::unique_ptr<driver::TempDir> dir;
  ASSERT_TRUE(driver::TempDir::create("doctor-sys", &dir).isOk());
  const std::string ifdir = dir->path() + "/" + routed.name;
  ASSERT_EQ(::mkdir(ifdir.c_str(), 0700), 0);
  for (const auto& [text, gbps] : std::vector<std::pair<std::string, double>>{
           {"25000\n", 25.0}, {"-1\n", 0}, {"garbage", 0}}) {
    std::ofstream(ifdir + "/speed") << text;
    LinkSpeed s = workerLinkSpeed(params, reducers, nullptr, dir->path());
    EXPECT_EQ(s.interface, routed.name);
    EXPECT_EQ(s.gbps.value_or(0), gbps) << text;
    EXPECT_EQ(s.reported_mbps, gbps > 0 ? 25000 : transport::kUnknownLinkMbps) << text;
  }
  ::unlink((ifdir + "/speed").c_str());
  ::rmdir(ifdir.c_str());
}

TEST(DoctorHost, Plugin) {
  CheckResult r = checkPlugin(TALLY_PLUGIN_PATH);
  EXPECT_EQ(r.severity, P) << formatResult(r);
  EXPECT_NE(r.detail.find("net v8..v12, CollNet v8..v12"), std::string::npos) << r.detail;
  r = checkPlugin("/nonexistent/libnccl-net-tally.so");
  EXPECT_EQ(r.severity, F);
  EXPECT_NE(r.detail.find("cannot load"), std::string::npos) << r.detail;
  r = checkPlugin("libc.so.6");  // loads, exports nothing
  EXPECT_EQ(r.severity, F) << formatResult(r);
  EXPECT_TRUE(libraryIsTally(TALLY_PLUGIN_PATH));
  EXPECT_FALSE(libraryIsTally("libc.so.6"));
}

TEST(DoctorHost, ClusterAndReducers) {
  ClusterEnv env;
  int ranks = 0;
  EXPECT_EQ(checkCluster(MapParamSource(), &env, &ranks).severity, W);
  EXPECT_EQ(ranks, 1);
  const std::string spec =
      R"({"cluster":{"workerpool0":["w0:2222"],"workerpool1":["w1:2222","w2:2222"],)"
      R"("workerpool2":["r0:5555","r1:5555"]},"environment":"cloud",)"
      R"("task":{"type":"workerpool1","index":1}})";
  CheckResult r = checkCluster(MapParamSource({{"CLUSTER_SPEC", spec}}), &env, &ranks);
  EXPECT_EQ(r.severity, P) << formatResult(r);
  EXPECT_EQ(ranks, 3);
  EXPECT_NE(r.detail.find("CollNet rank 2 of 3"), std::string::npos) << r.detail;
  ReducerList list;
  r = checkReducers(Params::defaults(), env, &list);
  EXPECT_EQ(r.severity, P) << formatResult(r);
  EXPECT_EQ(list.addresses, (std::vector<std::string>{"r0:5555", "r1:5555"}));

  r = checkCluster(MapParamSource({{"CLUSTER_SPEC", std::string("{")}}), &env, &ranks);
  EXPECT_EQ(r.severity, F);
  EXPECT_NE(r.detail.find("CLUSTER_SPEC"), std::string::npos) << r.detail;
  EXPECT_EQ(checkReducers(Params::defaults(), env, &list).severity, F);
}

// Under a Slurm heterogeneous job (as tally launch runs the doctor from the sbatch script of
// tally plan --format slurm) the cluster comes from Slurm's variables, as launch reads them.
TEST(DoctorHost, ClusterFromASlurmHeterogeneousJob) {
  std::map<std::string, std::string> slurm = {{"SLURM_JOB_ID", "4242"},
                                              {"SLURM_HET_SIZE", "2"},
                                              {"SLURM_JOB_NODELIST_HET_GROUP_0", "gpu[08-10]"},
                                              {"SLURM_JOB_NODELIST_HET_GROUP_1", "cpu[1-2]"},
                                              {"SLURM_LOCALID", "0"},
                                              {"SLURMD_NODENAME", "gpu09"}};
  ClusterEnv env;
  int ranks = 0;
  CheckResult r = checkCluster(MapParamSource(slurm), &env, &ranks);
  EXPECT_EQ(r.severity, P) << formatResult(r);
  EXPECT_EQ(ranks, 3);
  EXPECT_EQ(r.detail, "Slurm: het group 0 node gpu09 is the worker, CollNet rank 1 of 3");
  ReducerList list;
  r = checkReducers(Params::defaults(), env, &list);
  EXPECT_EQ(r.severity, P) << formatResult(r);
  EXPECT_EQ(list.addresses, (std::vector<std::string>{"cpu1:2222", "cpu2:2222"}));

  // A reducer node is no CollNet rank.
  slurm["SLURMD_NODENAME"] = "cpu2";
  r = checkCluster(MapParamSource(slurm), &env, &ranks);
  EXPECT_EQ(r.severity, W) << formatResult(r);
  EXPECT_NE(r.detail.find("no CollNet rank"), std::string::npos) << r.detail;

  // Malformed: a FAIL that names the variable, as launch's exit 2 does.
  slurm["SLURM_JOB_NODELIST_HET_GROUP_0"] = "gpu[08-10";
  r = checkCluster(MapParamSource(slurm), &env, &ranks);
  EXPECT_EQ(r.severity, F) << formatResult(r);
  EXPECT_NE(r.detail.find("SLURM_JOB_NODELIST_HET_GROUP_0"), std::string::npos) << r.detail;
  EXPECT_EQ(ranks, 1);
}

// ---- probing a real reducer --------------------------------------------------------------------

// A port on 127.0.0.1 that nothing listens on: bound, noted, closed.
int deadPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// A default ProbeOptions probes as an unset environment would: the registry's defaults.
TEST(DoctorProbe, DefaultsAreTheRegistrys) {
  const Params params = Params::defaults();
  const ProbeOptions o;
  EXPECT_EQ(o.slice_bytes, params.sliceBytes);
  EXPECT_EQ(o.window, params.collWindow);
  EXPECT_EQ(o.checksum, params.checksum);
  const ProbeOptions from = probeOptionsFrom(params);
  EXPECT_EQ(o.slice_bytes, from.slice_bytes);
  EXPECT_EQ(o.window, from.window);
}

TEST(DoctorProbe, LiveReducerEchoes) {
  std::unique_ptr<driver::ReducerProcess> reducer;
  ASSERT_TRUE(driver::ReducerProcess::start(TALLY_REDUCER_BIN, {}, 10000, &reducer).isOk());
  ProbeOptions o;
  o.probe_bytes = 1 << 20;
  o.probe_seconds = 0.2;
  const ProbeResult r = probeReducer(reducer->address(), o);
  EXPECT_TRUE(r.reachable && r.accepted && r.measured) << r.error;
  EXPECT_GT(r.rtt_us, 0);
  EXPECT_GT(r.gbytes_per_s, 0);
  EXPECT_GE(r.calls, 1);
  const CheckResult c = describeProbe(reducer->address(), r, o, "no job token configured");
  EXPECT_EQ(c.severity, P) << formatResult(c);
  EXPECT_TRUE(reducer->stop().isOk());
}

// Against a reducer that requires a job token: the doctor sends the user's token (from the
// TALLY_ variables) and reports a wrong one as a failed handshake, naming the cause.
TEST(DoctorProbe, SendsTheJobTokenAndReportsAWrongOne) {
  const std::string file = (std::filesystem::temp_directory_path() /
                            ("tally-doctor-token-" + std::to_string(::getpid())))
                               .string();
  {
    std::ofstream out(file);
    out << "right-token\n";
  }
  ::chmod(file.c_str(), 0600);
  std::unique_ptr<driver::ReducerProcess> reducer;
  ASSERT_TRUE(
      driver::ReducerProcess::start(TALLY_REDUCER_BIN, {"--token-file", file}, 10000, &reducer)
          .isOk());
  Params params = Params::defaults();
  params.jobToken = "right-token";
  ProbeOptions o = probeOptionsFrom(params);
  o.probe_bytes = 1 << 20;
  o.probe_seconds = 0.2;
  ProbeResult r = probeReducer(reducer->address(), o);
  EXPECT_TRUE(r.reachable && r.accepted && r.measured) << r.error;
  EXPECT_EQ(credentialsNote(params), "job token from TALLY_JOB_TOKEN");

  o.job_token = "wrong-token";
  r = probeReducer(reducer->address(), o);
  EXPECT_TRUE(r.reachable);
  EXPECT_FALSE(r.accepted);
  EXPECT_NE(r.error.find("authentication failed"), std::string::npos) << r.error;
  EXPECT_EQ(describeProbe(reducer->address(), r, o, "").severity, F);
  EXPECT_TRUE(reducer->stop().isOk());
  std::filesystem::remove(file);
}

// All-reduces that time out while their results are still arriving, as `tally doctor --timeout 5`
// (5 ms) gets against two reducers: far less than a 16 MiB all-reduce takes, so each probe gives
// up with results in flight. The client must be closed before the buffers it lands them in are
// freed; several rounds, so that a result landing in freed memory crashes this process (or is
// reported by ASan) rather than slipping by once.
TEST(DoctorProbe, TimeoutWithResultsInFlightWritesNoFreedBuffer) {
  std::vector<std::unique_ptr<driver::ReducerProcess>> reducers;
  ASSERT_TRUE(driver::startReducers(TALLY_REDUCER_BIN, 2, {}, 10000, &reducers).isOk());
  const std::vector<std::string> addresses = {reducers[0]->address(), reducers[1]->address()};
  const ProbeOptions connect;  // the connects get the default 5 s
  ProbeOptions probe = connect;
  probe.timeout_ms = 5;
  int timed_out = 0;
  for (int round = 0; round < 6; ++round) {
    std::vector<ReducerConnection> connections = connectReducers(addresses, connect, {});
    for (ReducerConnection& c : connections) {
      ASSERT_TRUE(c.client) << c.result.error;
      const ProbeResult r = finishProbe(&c, probe);
      EXPECT_FALSE(c.client);
      if (!r.measured) {
        EXPECT_EQ(r.code, StatusCode::kTimeout) << r.error;
        ++timed_out;
      }
    }
  }
  EXPECT_GT(timed_out, 0) << "no probe timed out: the case was not exercised";
  for (auto& reducer : reducers) EXPECT_TRUE(reducer->stop().isOk());
}

TEST(DoctorProbe, DeadAddressIsUnreachable) {
  const int port = deadPort();
  ASSERT_GT(port, 0);
  ProbeOptions o;
  o.timeout_ms = 500;
  const auto start = Clock::now();
  const ProbeResult r = probeReducer("127.0.0.1:" + std::to_string(port), o);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE(r.reachable);
  EXPECT_FALSE(r.error.empty());
  EXPECT_EQ(describeProbe("x", r, o, "").severity, F);
}

TEST(DoctorProbe, BadAddressCannotBeProbed) {
  ProbeOptions o;
  o.timeout_ms = 500;
  const ProbeResult r = probeReducer("127.0.0.1", o);  // no port
  EXPECT_FALSE(r.reachable);
  EXPECT_EQ(r.code, StatusCode::kInvalidUsage) << r.error;
  const CheckResult c = describeProbe("127.0.0.1", r, o, "");
  EXPECT_EQ(c.severity, F);
  EXPECT_NE(c.detail.find("cannot probe it"), std::string::npos) << c.detail;
}

// ---- the built `tally doctor` ------------------------------------------------------------------

struct DoctorRun {
  int status = -1;  // exit status, -1 when it did not exit by itself
  std::string out;  // stdout
  double seconds = 0;
};

// Runs `tally doctor ARGS` with exactly `env` as its environment (nothing of ours leaks in),
// killing it after timeout_ms. With `with_stderr`, stderr goes into `out` too.
DoctorRun runDoctor(const std::vector<std::string>& args, const std::vector<std::string>& env,
                    int64_t timeout_ms = 60000, bool with_stderr = false) {
  DoctorRun run;
  std::vector<std::string> argv_s = {TALLY_BIN, "doctor"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = env;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  int fds[2];
  if (::pipe(fds) != 0) return run;
  const auto start = Clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    if (with_stderr) ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  bool killed = false;
  for (;;) {
    if (!killed && Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      killed = true;
    }
    pollfd p = {fds[0], POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      char buf[4096];
      const ssize_t n = ::read(fds[0], buf, sizeof(buf));
      if (n <= 0) break;
      run.out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!killed && WIFEXITED(status)) run.status = WEXITSTATUS(status);
  return run;
}

std::string lineStarting(const std::string& out, const std::string& prefix) {
  size_t at = out.find(prefix);
  if (at == std::string::npos) return "";
  return out.substr(at, out.find('\n', at) - at);
}

const std::string kSpec =
    R"(CLUSTER_SPEC={"cluster":{"workerpool0":["127.0.0.1:2222"]},"environment":"cloud",)"
    R"("task":{"type":"workerpool0","index":0}})";

TEST(DoctorCommand, LiveReducerPassesEveryCheck) {
  std::unique_ptr<driver::ReducerProcess> reducer;
  ASSERT_TRUE(driver::ReducerProcess::start(TALLY_REDUCER_BIN, {}, 10000, &reducer).isOk());
  const DoctorRun run =
      runDoctor({"--plugin", TALLY_PLUGIN_PATH, "--probe-bytes", "4M", "--probe-seconds", "0.3",
                 "--worker-gbps", "0.001"},
                {"TALLY_REDUCERS=" + reducer->address(), "NCCL_COLLNET_ENABLE=1",
                 std::string("NCCL_NET_PLUGIN=") + TALLY_PLUGIN_PATH, "NCCL_NET_PLUGIN_REF_COUNT=1",
                 "NCCL_ALGO=allreduce:collnetchain", kSpec});
  EXPECT_TRUE(reducer->stop().isOk());
  const std::string line = lineStarting(run.out, "PASS  reducer " + reducer->address() + ": ");
  EXPECT_FALSE(line.empty()) << run.out;
  EXPECT_NE(line.find("rtt "), std::string::npos) << line;
  EXPECT_NE(line.find(" GB/s ("), std::string::npos) << line;
  EXPECT_NE(line.find(") each way"), std::string::npos) << line;
  for (const char* check : {"plugin", "cluster", "reducers", "bandwidth", "nccl"}) {
    EXPECT_FALSE(lineStarting(run.out, std::string("PASS  ") + check + ": ").empty())
        << check << " in:\n"
        << run.out;
  }
  EXPECT_EQ(run.status, 0) << run.out;
}

// --nccl-version names the NCCL the job runs (PyTorch's own), whatever libnccl.so.2 here is.
TEST(DoctorCommand, NcclVersionOption) {
  const std::vector<std::string> env = {"TALLY_REDUCERS=127.0.0.1:1", "NCCL_COLLNET_ENABLE=1",
                                        std::string("NCCL_NET_PLUGIN=") + TALLY_PLUGIN_PATH,
                                        "NCCL_ALGO=allreduce:collnetchain", kSpec};
  DoctorRun run = runDoctor(
      {"--plugin", TALLY_PLUGIN_PATH, "--timeout", "200ms", "--nccl-version", "2.29.7"}, env);
  EXPECT_FALSE(lineStarting(run.out, "WARN  NCCL_NET_PLUGIN_REF_COUNT: unset: NCCL 2.29.7").empty())
      << run.out;
  run = runDoctor({"--plugin", TALLY_PLUGIN_PATH, "--timeout", "200ms", "--nccl-version", "2.30.7"},
                  env);
  EXPECT_TRUE(lineStarting(run.out, "WARN  NCCL_NET_PLUGIN_REF_COUNT").empty()) << run.out;
  run = runDoctor({"--nccl-version", "2.x"}, env);
  EXPECT_EQ(run.status, 3) << run.out;
}

TEST(DoctorCommand, DeadAddressFailsFast) {
  const int port = deadPort();
  ASSERT_GT(port, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  const DoctorRun run = runDoctor({"--plugin", TALLY_PLUGIN_PATH, "--timeout", "1s"},
                                  {"TALLY_REDUCERS=" + address, "NCCL_COLLNET_ENABLE=1"});
  EXPECT_EQ(run.status, 2) << run.out;
  EXPECT_LT(run.seconds, 10.0);
  EXPECT_FALSE(lineStarting(run.out, "FAIL  reducer " + address + ": not reachable").empty())
      << run.out;
  // Without a spec: the cluster line warns and the lines keep their order.
  EXPECT_LT(run.out.find("PASS  plugin"), run.out.find("WARN  cluster: no cluster spec"));
  EXPECT_LT(run.out.find("WARN  cluster"), run.out.find("FAIL  reducer"));
}

// Unreachable reducers are waited for together, not one after another: 20 of them with a 2 s
// timeout take two rounds of 16 (about 4 s, not 40), with a progress line while waiting, and
// each still gets its own line, in the order given.
TEST(DoctorCommand, UnreachableReducersAreWaitedForTogether) {
  const int port = deadPort();
  ASSERT_GT(port, 0);
  std::vector<std::string> addresses;
  std::string list;
  for (int i = 1; i <= 20; ++i) {
    addresses.push_back("127.0.0." + std::to_string(i) + ":" + std::to_string(port));
    list += (list.empty() ? "" : ",") + addresses.back();
  }
  const DoctorRun run = runDoctor({"--plugin", TALLY_PLUGIN_PATH, "--timeout", "2s"},
                                  {"TALLY_REDUCERS=" + list}, 60000, /*with_stderr=*/true);
  EXPECT_EQ(run.status, 2) << run.out;
  EXPECT_LT(run.seconds, 15.0) << run.out;
  size_t last = 0;
  for (const std::string& address : addresses) {
    const size_t at = run.out.find("FAIL  reducer " + address + ": not reachable");
    ASSERT_NE(at, std::string::npos) << address << " in:\n" << run.out;
    EXPECT_GT(at, last) << address << " out of order";
    last = at;
  }
  EXPECT_NE(run.out.find("tally doctor: connecting to 20 reducers: "), std::string::npos)
      << run.out;
}

TEST(DoctorCommand, NoReducersAndHelp) {
  DoctorRun run = runDoctor({"--plugin", TALLY_PLUGIN_PATH}, {});
  EXPECT_EQ(run.status, 2) << run.out;
  EXPECT_FALSE(lineStarting(run.out, "FAIL  reducers: none").empty()) << run.out;
  EXPECT_FALSE(lineStarting(run.out, "FAIL  NCCL_COLLNET_ENABLE").empty()) << run.out;
  run = runDoctor({"--help"}, {});
  EXPECT_EQ(run.status, 0);
  EXPECT_NE(run.out.find("Exit status: 0"), std::string::npos) << run.out;
  EXPECT_EQ(runDoctor({"--timeout", "soon"}, {}).status, 3);
}

// Values `tally env` refuses fail here too, all on one line, with the plugin's own message.
TEST(DoctorCommand, RefusedVariablesFailOnOneLine) {
  const DoctorRun run = runDoctor({"--plugin", TALLY_PLUGIN_PATH, "--timeout", "1s"},
                                  {"TALLY_SOCKET_NSOCKS=99", "TALLY_TRANSPORT=rdma"});
  EXPECT_EQ(run.status, 2) << run.out;
  EXPECT_EQ(lineStarting(run.out, "FAIL  TALLY_ variables: "),
            "FAIL  TALLY_ variables: TALLY_SOCKET_NSOCKS=99 is not valid: expected 1 to 16; "
            "TALLY_TRANSPORT=rdma is not valid: expected one of auto, tcp, ofi, verbs")
      << run.out;
}

// One variable that does not parse, and a TALLY_ name that is no variable, are reported; the
// other variables still count, so the reducers are still listed and probed.
TEST(DoctorCommand, OneBadVariableKeepsTheReducers) {
  const int port = deadPort();
  ASSERT_GT(port, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  const DoctorRun run = runDoctor({"--plugin", TALLY_PLUGIN_PATH, "--timeout", "1s"},
                                  {"TALLY_SLICE_BYTES=lots", "TALLY_REDUCERS=" + address,
                                   "TALLY_REDUCER=r:1", "NCCL_COLLNET_ENABLE=1"});
  EXPECT_EQ(run.status, 2) << run.out;
  EXPECT_FALSE(
      lineStarting(run.out, "FAIL  TALLY_ variables: TALLY_SLICE_BYTES='lots' is not valid: ")
          .empty())
      << run.out;
  EXPECT_EQ(lineStarting(run.out, "WARN  TALLY_ variables: "),
            "WARN  TALLY_ variables: TALLY_REDUCER is not a Tally variable; did you mean "
            "TALLY_REDUCERS?")
      << run.out;
  EXPECT_EQ(lineStarting(run.out, "PASS  reducers: "),
            "PASS  reducers: 1 from TALLY_REDUCERS: " + address)
      << run.out;
  EXPECT_FALSE(lineStarting(run.out, "FAIL  reducer " + address + ": not reachable").empty())
      << run.out;
  EXPECT_EQ(run.out.find("reducers: none"), std::string::npos) << run.out;
}

// Every command line the doctor cannot parse exits 3, never 2 (a failed check): a misspelt
// option, a value its check refuses, a missing value, a stray word.
TEST(DoctorCommand, EveryBadCommandLineExits3) {
  const std::vector<std::vector<std::string>> bad = {
      {"--timout", "5s"}, {"--probe-seconds", "99"}, {"--worker-gbps", "-1"},
      {"--timeout"},      {"--probe-bytes", "3"},    {"extra"},
  };
  for (const auto& args : bad) {
    const DoctorRun run = runDoctor(args, {}, 20000);
    EXPECT_EQ(run.status, 3) << args[0] << ":\n" << run.out;
    EXPECT_EQ(run.out.find("PASS"), std::string::npos) << "checks ran for " << args[0];
  }
}

}  // namespace
}  // namespace tally::commands::doctor
