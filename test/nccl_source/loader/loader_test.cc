// SPDX-License-Identifier: Apache-2.0
// NCCL's own plugin loader, adapters and plugin state machine, compiled from one NCCL version's
// source, load the built plugin the four ways NCCL finds a plugin and run communicators through
// it: several at once, all destroyed, one re-created. Each case is a fresh process
// (loader_child.h); this file decides what NCCL's code must have done, per version:
//
//   - the table NCCL uses: v8 on NCCL before the plugin folder (2.21), v11 on 2.28 and 2.29, v12
//     from 2.30, each taken from the library as it is, for net and CollNet alike;
//   - CollNet: one device on every host, whatever the reducer configuration, so NCCL 2.30's
//     comparison of CollNet device counts across ranks always agrees;
//   - every context init makes is finalized once, and none is left open;
//   - re-creating a communicator after the last was destroyed: NCCL 2.27 to 2.29 unload the
//     plugin and forget its name, so the plain setup then fails (NCCL_NET=Tally) or silently
//     runs on NCCL's own Socket net; NCCL_NET_PLUGIN_REF_COUNT=1 (what `tally launch` sets) or
//     the default name libnccl-net.so makes it work.
//
// Run as `<binary> --child SCRIPT PLUGIN` it is one such process instead of the test.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "test/nccl_source/loader/child_run.h"
#include "test/nccl_source/loader/loader_child.h"

namespace tally::nccl_source {
namespace {

namespace fs = std::filesystem;

constexpr int kNcclSuccess = 0;
constexpr int kNcclInvalidUsage = 5;
constexpr const char* kScript = "init:A,init:B,fin:A,fin:B,init:C,fin:C";

// How the version at hand loads and unloads plugins.
struct Nccl {
  int code = loaderNcclVersionCode();
  bool plugin_folder = TALLY_NCCL_PLUGIN_FOLDER_LOADER != 0;
  // NCCL 2.27 to 2.29 clear the library's record, name included, when they unload it.
  bool forgets_name() const { return plugin_folder && code >= 22700 && code < 23000; }
  // Only the plugin-folder loader unloads the library after the last communicator.
  bool unloads() const { return plugin_folder; }
  // NCCL before the plugin folder has no STATIC_PLUGIN: a preloaded library is not found.
  bool has_static_plugin() const { return plugin_folder; }
  // Table versions carry a context per communicator from v11 (NCCL 2.28) on.
  bool per_comm_init() const { return plugin_folder && code >= 22800; }
  std::string net_table() const {
    if (!plugin_folder) return "ncclNetPlugin_v8";
    if (code >= 23000) return "ncclNetPlugin_v12";
    if (code >= 22800) return "ncclNetPlugin_v11";
    return "";  // not checked
  }
  std::string coll_table() const {
    const std::string net = net_table();
    return net.empty() ? "" : "ncclCollNetPlugin_" + net.substr(net.rfind('_') + 1);
  }
};

enum class Way { kName, kPath, kDefaultName, kPreload };

const char* wayName(Way way) {
  switch (way) {
    case Way::kName:
      return "NCCL_NET_PLUGIN=tally";
    case Way::kPath:
      return "NCCL_NET_PLUGIN=<path>";
    case Way::kDefaultName:
      return "libnccl-net.so, NCCL_NET_PLUGIN unset";
    case Way::kPreload:
      return "LD_PRELOAD, NCCL_NET_PLUGIN=STATIC_PLUGIN";
  }
  return "?";
}

struct LoadSetup {
  Way way = Way::kPath;
  bool net_name = false;   // NCCL_NET=Tally
  bool reducers = false;   // TALLY_REDUCERS set
  bool ref_count = false;  // NCCL_NET_PLUGIN_REF_COUNT=1
  EnvVars extra;
  std::string describe() const {
    std::string s = wayName(way);
    if (net_name) s += ", NCCL_NET=Tally";
    s += reducers ? ", reducers" : ", no reducers";
    if (ref_count) s += ", NCCL_NET_PLUGIN_REF_COUNT=1";
    for (const auto& [k, v] : extra) s += ", " + k + "=" + v;
    return s;
  }
};

struct InitLine {
  int rc = -1;
  std::string net, table, coll, colltable;
  int colldevs = -1;
};

struct FinLine {
  int rc = -1;
  int loaded = -1;
};

struct Outcome {
  std::map<std::string, InitLine> inits;
  std::map<std::string, FinLine> fins;
  std::vector<std::string> log;
  std::string raw;
  int count(const std::string& text) const { return countContaining(log, text); }
};

Outcome parse(const std::string& out) {
  Outcome o;
  o.raw = out;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string verb, name;
    words >> verb >> name;
    if (verb == "init") {
      InitLine& l = o.inits[name];
      l.rc = std::atoi(reportField(line, "rc").c_str());
      l.net = reportField(line, "net");
      l.table = reportField(line, "table");
      l.coll = reportField(line, "coll");
      l.colltable = reportField(line, "colltable");
      l.colldevs = std::atoi(reportField(line, "colldevs").c_str());
    } else if (verb == "fin") {
      FinLine& l = o.fins[name];
      l.rc = std::atoi(reportField(line, "rc").c_str());
      l.loaded = std::atoi(reportField(line, "loaded").c_str());
    } else if (verb == "log") {
      o.log.push_back(line.substr(4));
    }
  }
  return o;
}

class LoaderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("tally-nccl-loader-" + std::to_string(::getpid())));
    // The name NCCL opens for NCCL_NET_PLUGIN=tally, alone in its folder (the build folder also
    // holds libnccl-net.so), and the name it opens when NCCL_NET_PLUGIN is unset.
    fs::create_directories(*dir_ / "named");
    fs::create_symlink(TALLY_TEST_PLUGIN, *dir_ / "named" / "libnccl-net-tally.so");
    fs::create_directories(*dir_ / "default");
    fs::create_symlink(TALLY_TEST_PLUGIN, *dir_ / "default" / "libnccl-net.so");
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }

  static Outcome run(const LoadSetup& setup, const std::string& script = kScript) {
    EnvVars env = {{"TALLY_SOCKET_IFNAME", "lo"}};
    switch (setup.way) {
      case Way::kName:
        env.emplace_back("NCCL_NET_PLUGIN", "tally");
        env.emplace_back("LD_LIBRARY_PATH", (*dir_ / "named").string());
        break;
      case Way::kPath:
        env.emplace_back("NCCL_NET_PLUGIN", TALLY_TEST_PLUGIN);
        break;
      case Way::kDefaultName:
        env.emplace_back("LD_LIBRARY_PATH", (*dir_ / "default").string());
        break;
      case Way::kPreload:
        env.emplace_back("LD_PRELOAD", TALLY_TEST_PLUGIN);
        env.emplace_back("NCCL_NET_PLUGIN", "STATIC_PLUGIN");
        break;
    }
    if (setup.net_name) env.emplace_back("NCCL_NET", "Tally");
    if (setup.reducers) env.emplace_back("TALLY_REDUCERS", "127.0.0.1:9,127.0.0.1:10");
    if (setup.ref_count) env.emplace_back("NCCL_NET_PLUGIN_REF_COUNT", "1");
    env.insert(env.end(), setup.extra.begin(), setup.extra.end());
    const ChildRun child = runSelf({"--child", script, TALLY_TEST_PLUGIN}, env, 60000);
    EXPECT_FALSE(child.timed_out) << setup.describe();
    EXPECT_EQ(child.status, 0) << setup.describe() << "\n" << child.err;
    return parse(child.out);
  }

  // The communicator's first init of this process: on Tally, with the expected tables.
  static void expectOnTally(const Nccl& nccl, const InitLine& line, const Outcome& o) {
    EXPECT_EQ(line.rc, kNcclSuccess) << o.raw;
    EXPECT_EQ(line.net, "Tally") << o.raw;
    EXPECT_EQ(line.coll, "Tally") << o.raw;
    EXPECT_EQ(line.colldevs, 1) << o.raw;
    if (!nccl.net_table().empty()) {
      EXPECT_EQ(line.table, nccl.net_table()) << o.raw;
      EXPECT_EQ(line.colltable, nccl.coll_table()) << o.raw;
    }
  }

  // NCCL did not find Tally: with NCCL_NET=Tally init fails, else NCCL runs on its Socket net.
  static void expectNotOnTally(const LoadSetup& setup, const InitLine& line, const Outcome& o) {
    if (setup.net_name) {
      EXPECT_EQ(line.rc, kNcclInvalidUsage) << o.raw;
    } else {
      EXPECT_EQ(line.rc, kNcclSuccess) << o.raw;
      EXPECT_EQ(line.net, "Socket") << o.raw;
      EXPECT_EQ(line.coll, "-") << o.raw;
    }
  }

  static fs::path* dir_;
};

fs::path* LoaderTest::dir_ = nullptr;

// Every way of loading, with and without NCCL_NET=Tally and the reducers.
TEST_F(LoaderTest, WaysOfLoadingCommunicatorsAndRecreate) {
  const Nccl nccl;
  for (Way way : {Way::kName, Way::kPath, Way::kDefaultName, Way::kPreload}) {
    for (bool net_name : {false, true}) {
      for (bool reducers : {false, true}) {
        LoadSetup setup;
        setup.way = way;
        setup.net_name = net_name;
        setup.reducers = reducers;
        SCOPED_TRACE(setup.describe());
        const Outcome o = run(setup);
        ASSERT_EQ(o.inits.size(), 3u) << o.raw;
        ASSERT_EQ(o.fins.size(), 3u) << o.raw;
        if (way == Way::kPreload && !nccl.has_static_plugin()) {
          expectNotOnTally(setup, o.inits.at("A"), o);
          continue;
        }
        expectOnTally(nccl, o.inits.at("A"), o);
        expectOnTally(nccl, o.inits.at("B"), o);
        EXPECT_EQ(o.fins.at("A").rc, kNcclSuccess);
        EXPECT_EQ(o.fins.at("A").loaded, 1) << "B still uses the plugin";
        EXPECT_EQ(o.fins.at("B").rc, kNcclSuccess);
        // A preloaded library stays mapped whatever NCCL does with its handle.
        const bool unloaded = nccl.unloads() && way != Way::kPreload;
        EXPECT_EQ(o.fins.at("B").loaded, unloaded ? 0 : 1) << o.raw;
        // The re-created communicator.
        const bool recreated_on_tally = !nccl.forgets_name() || way == Way::kDefaultName;
        if (recreated_on_tally) {
          expectOnTally(nccl, o.inits.at("C"), o);
        } else {
          expectNotOnTally(setup, o.inits.at("C"), o);
        }
        if (nccl.per_comm_init()) {
          // Every context the plugin handed out was finalized, and none is left.
          EXPECT_EQ(o.count("NET/Tally : init comm "), o.count("NET/Tally : finalize comm "))
              << o.raw;
          EXPECT_EQ(o.count("NET/Tally : CollNet init comm "),
                    o.count("NET/Tally : CollNet finalize comm "))
              << o.raw;
          EXPECT_GE(o.count("NET/Tally : CollNet init comm "), 2) << o.raw;
          // All closed after B, and again after C when C was on Tally.
          EXPECT_EQ(o.count("still open: 0 net, 0 CollNet"), recreated_on_tally ? 2 : 1) << o.raw;
        }
      }
    }
  }
}

// The re-create finding on NCCL 2.27 to 2.29, and the remedy tally launch applies.
TEST_F(LoaderTest, RecreateAfterLastDestroy) {
  const Nccl nccl;
  for (Way way : {Way::kName, Way::kPath, Way::kPreload}) {
    if (way == Way::kPreload && !nccl.has_static_plugin()) continue;
    LoadSetup plain;
    plain.way = way;
    plain.net_name = true;
    plain.reducers = true;
    SCOPED_TRACE(plain.describe());
    const Outcome before = run(plain);
    if (nccl.forgets_name()) {
      // The plain setup fails: the plugin's record was cleared, and the default name does not
      // exist here.
      EXPECT_EQ(before.inits.at("C").rc, kNcclInvalidUsage) << before.raw;
      EXPECT_GE(before.count("Failed to initialize any NET plugin"), 1) << before.raw;
    } else {
      EXPECT_EQ(before.inits.at("C").net, "Tally") << before.raw;
    }
    LoadSetup remedy = plain;
    remedy.ref_count = true;
    const Outcome after = run(remedy);
    expectOnTally(nccl, after.inits.at("C"), after);
    EXPECT_EQ(after.fins.at("C").loaded, 1) << "the library is never unloaded";
    EXPECT_EQ(after.count("Unloading plugin"), 0) << after.raw;
  }
}

// NCCL 2.30 fails every communicator whose ranks report different CollNet device counts. Tally's
// count depends on nothing that differs between the hosts of a job: reducers or none, a
// malformed cluster variable, a reducer or evaluator replica, the interfaces found.
TEST_F(LoaderTest, CollNetDeviceCountIsTheSameOnEveryHost) {
  const std::string pools =
      R"({"workerpool0": ["p:1"], "workerpool1": ["w:1"], "workerpool2": ["r:1"],)"
      R"( "workerpool3": ["e:1"]})";
  const std::vector<EnvVars> hosts = {
      {{"TALLY_REDUCERS", "127.0.0.1:9"}},
      {},
      {{"CLUSTER_SPEC", "{not json"}},
      {{"CLUSTER_SPEC", R"({"cluster": )" + pools +
                            R"(, "task": {"type": "workerpool3",)"
                            R"( "index": 0}})"}},
      {{"TALLY_SOCKET_IFNAME", ""}},
  };
  std::vector<int> counts;
  for (const EnvVars& host : hosts) {
    LoadSetup setup;
    setup.net_name = true;
    setup.extra = host;
    SCOPED_TRACE(setup.describe());
    const Outcome o = run(setup, "init:A,fin:A");
    ASSERT_EQ(o.inits.at("A").rc, kNcclSuccess) << o.raw;
    counts.push_back(o.inits.at("A").colldevs);
  }
  for (size_t i = 0; i < counts.size(); ++i) EXPECT_EQ(counts[i], counts[0]) << "host " << i;
  EXPECT_EQ(counts[0], 1);

  // TALLY_COLLNET=off hides CollNet: the same on every host of a job, or NCCL 2.30 stops.
  LoadSetup off;
  off.net_name = true;
  off.extra = {{"TALLY_COLLNET", "off"}};
  const Outcome o = run(off, "init:A,fin:A");
  EXPECT_EQ(o.inits.at("A").rc, kNcclSuccess) << o.raw;
  EXPECT_EQ(o.inits.at("A").net, "Tally") << o.raw;
  EXPECT_EQ(o.inits.at("A").colldevs, 0) << o.raw;
}

// NCCL_NET names NCCL's own net: Tally's CollNet comes only with Tally's net, so it is not used.
TEST_F(LoaderTest, CollNetOnlyWithTallysNet) {
  LoadSetup setup;
  setup.extra = {{"NCCL_NET", "Socket"}};
  const Outcome o = run(setup, "init:A,fin:A");
  EXPECT_EQ(o.inits.at("A").rc, kNcclSuccess) << o.raw;
  EXPECT_EQ(o.inits.at("A").net, "Socket") << o.raw;
  EXPECT_EQ(o.inits.at("A").coll, "-") << o.raw;
}

}  // namespace
}  // namespace tally::nccl_source

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--child") {
    return tally::nccl_source::runLoaderScript(argv[2], argv[3]);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
