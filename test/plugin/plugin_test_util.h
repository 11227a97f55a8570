// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the plugin tests: parameters from a map (never setenv), and a global plugin
// state on loopback installed before the first init.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/params.h"
#include "plugin/abi/abi.h"
#include "plugin/state.h"

extern "C" const ncclNet_v8_t ncclNetPlugin_v8;
extern "C" const ncclNet_v9_t ncclNetPlugin_v9;
extern "C" const ncclNet_v10_t ncclNetPlugin_v10;
extern "C" const ncclNet_v11_t ncclNetPlugin_v11;
extern "C" const ncclNet_v12_t ncclNetPlugin_v12;
extern "C" const ncclCollNet_v8_t ncclCollNetPlugin_v8;
extern "C" const ncclCollNet_v9_t ncclCollNetPlugin_v9;
extern "C" const ncclCollNet_v10_t ncclCollNetPlugin_v10;
extern "C" const ncclCollNet_v11_t ncclCollNetPlugin_v11;
extern "C" const ncclCollNet_v12_t ncclCollNetPlugin_v12;

namespace tally::plugin::testing {

inline Params paramsFrom(std::map<std::string, std::string> values) {
  Params p;
  Status st = Params::load(MapParamSource(std::move(values)), &p);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return p;
}

// Loopback devices, short timeouts, a (dead) reducer so that CollNet reports devices.
inline std::map<std::string, std::string> loopbackValues() {
  // TCP always: on a host with an RDMA device or a fast libfabric provider, auto would pick that.
  return {{"TALLY_TRANSPORT", "tcp"},
          {"TALLY_SOCKET_IFNAME", "lo"},
          {"TALLY_REDUCERS", "127.0.0.1:1"},
          {"TALLY_CONNECT_TIMEOUT_MS", "1s"},
          {"TALLY_TIMEOUT_MS", "10s"}};
}

// Installs the loopback state as the process-wide one (once per test process; gtest runs each
// test in its own process under ctest, and in one process when run by hand).
inline void installLoopbackState() {
  if (PluginState::globalIfLoaded() != nullptr) return;
  std::unique_ptr<PluginState> state;
  Status st = PluginState::create(paramsFrom(loopbackValues()), &state);
  ASSERT_TRUE(st.isOk()) << st.toString();
  PluginState::installGlobal(std::move(state));
}

using Clock = std::chrono::steady_clock;
inline constexpr auto kDeadline = std::chrono::seconds(20);

// Connects a send and a receive comm through table `t` (v11 signatures).
inline void connectPair(const ncclNet_v11_t& t, void* ctx, void** send, void** recv) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  std::memset(handle, 0xab, sizeof(handle));
  void* listen_comm = nullptr;
  ASSERT_EQ(t.listen(ctx, 0, handle, &listen_comm), ncclSuccess);
  ASSERT_NE(listen_comm, nullptr);
  *send = nullptr;
  *recv = nullptr;
  auto start = Clock::now();
  int calls = 0;
  while ((*send == nullptr || *recv == nullptr) && Clock::now() - start < kDeadline) {
    if (*send == nullptr) {
      ASSERT_EQ(t.connect(ctx, 0, handle, send, nullptr), ncclSuccess);
    }
    if (*recv == nullptr) {
      ASSERT_EQ(t.accept(listen_comm, recv, nullptr), ncclSuccess);
    }
    ++calls;
    if (*send == nullptr || *recv == nullptr)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_NE(*send, nullptr) << "connect did not finish after " << calls << " calls";
  ASSERT_NE(*recv, nullptr) << "accept did not finish after " << calls << " calls";
  EXPECT_EQ(t.closeListen(listen_comm), ncclSuccess);
}

// Polls every request until done; returns false at the deadline.
inline bool testAll(const std::vector<void*>& requests, std::vector<std::vector<int>>* sizes,
             int (*test)(void*, int*, int*)) {
  std::vector<bool> done(requests.size(), false);
  size_t remaining = requests.size();
  auto start = Clock::now();
  while (remaining > 0 && Clock::now() - start < kDeadline) {
    for (size_t i = 0; i < requests.size(); ++i) {
      if (done[i]) continue;
      int d = 0;
      if (test(requests[i], &d, (*sizes)[i].data()) != 0) return false;
      if (d) {
        done[i] = true;
        --remaining;
      }
    }
  }
  return remaining == 0;
}

// NCCL's logger for the tests: keeps every line the plugin logs, with its level and subsystems.
struct CapturedLine {
  ncclDebugLogLevel level;
  unsigned long flags;
  std::string text;
};
inline std::mutex& capturedMu() {
  static std::mutex mu;
  return mu;
}
// Guarded by capturedMu().
inline std::vector<CapturedLine>& capturedLines() {
  static std::vector<CapturedLine> lines;
  return lines;
}
inline void captureLogger(ncclDebugLogLevel level, unsigned long flags, const char*, int,
                          const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(capturedMu());
  capturedLines().push_back({level, flags, buf});
}

}  // namespace tally::plugin::testing
