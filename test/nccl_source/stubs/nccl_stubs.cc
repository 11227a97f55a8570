// SPDX-License-Identifier: Apache-2.0
// Tally's stand-ins for the parts of NCCL that NCCL's plugin loader and CollNet proxy call but
// that the nccl-source tests do not compile: the debug logger, parameters and environment, the
// profiler callback, and the two internal nets NCCL appends after the external plugins.
//
// Compiled once per NCCL version against that version's headers (NCCL_VERSION_CODE picks the
// signatures). The internal nets stand for a host without InfiniBand: "IB" initializes and finds
// no device, "Socket" finds one host-memory device and works for init, properties and finalize,
// which is all the loader tests ask of a net NCCL falls back to.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "debug.h"
#include "nccl.h"
#include "net.h"
#include "param.h"
#if NCCL_VERSION_CODE >= 22600
#include "profiler.h"
#endif

#include "test/nccl_source/stubs/captured_log.h"

// ---- logging ----

int ncclDebugLevel = NCCL_LOG_INFO;
uint64_t ncclDebugMask = ~uint64_t{0};
thread_local int ncclDebugNoWarn = 0;
char ncclLastError[1024] = "";
#if NCCL_VERSION_CODE >= 23000
FILE* ncclDebugFile = stderr;
#endif

namespace {

std::mutex& logMutex() {
  static std::mutex mu;
  return mu;
}

std::vector<std::string>& logLines() {
  static std::vector<std::string> lines;
  return lines;
}

const char* levelName(ncclDebugLogLevel level) {
  switch (level) {
    case NCCL_LOG_VERSION:
      return "VERSION";
    case NCCL_LOG_WARN:
      return "WARN";
    case NCCL_LOG_INFO:
      return "INFO";
    case NCCL_LOG_ABORT:
      return "ABORT";
    case NCCL_LOG_TRACE:
      return "TRACE";
    default:
      return "NONE";
  }
}

// NCCL_DEBUG as NCCL reads it: WARN prints warnings, INFO (or TRACE) everything.
int printLevel() {
  static const int level = [] {
    const char* v = getenv("NCCL_DEBUG");
    if (v == nullptr) return static_cast<int>(NCCL_LOG_NONE);
    if (strcasecmp(v, "WARN") == 0) return static_cast<int>(NCCL_LOG_WARN);
    if (strcasecmp(v, "INFO") == 0 || strcasecmp(v, "TRACE") == 0) {
      return static_cast<int>(NCCL_LOG_INFO);
    }
    return static_cast<int>(NCCL_LOG_NONE);
  }();
  return level;
}

void record(ncclDebugLogLevel level, const char* fmt, va_list ap) {
  // NOWARN(...) turns a warning into an INFO line, as NCCL's logger does.
  if (level == NCCL_LOG_WARN && ncclDebugNoWarn != 0) level = NCCL_LOG_INFO;
  char text[2048];
  vsnprintf(text, sizeof(text), fmt, ap);
  size_t n = strlen(text);
  while (n > 0 && text[n - 1] == '\n') text[--n] = '\0';
  std::string line = std::string(levelName(level)) + " " + text;
  if (level == NCCL_LOG_WARN) {
    const size_t k = n < sizeof(ncclLastError) - 1 ? n : sizeof(ncclLastError) - 1;
    memcpy(ncclLastError, text, k);
    ncclLastError[k] = '\0';
  }
  std::lock_guard<std::mutex> lock(logMutex());
  if (level != NCCL_LOG_NONE && static_cast<int>(level) <= printLevel()) {
    fprintf(stderr, "[nccl %d] NCCL %s\n", static_cast<int>(getpid()), line.c_str());
  }
  logLines().push_back(std::move(line));
}

}  // namespace

void ncclDebugLog(ncclDebugLogLevel level, unsigned long /*flags*/, const char* /*filefunc*/,
                  int /*line*/, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(level, fmt, ap);
  va_end(ap);
}

#if NCCL_VERSION_CODE >= 23000
void ncclDebugLogInternal(ncclDebugLogLevel level, unsigned long /*flags*/, const char* /*file*/,
                          const char* /*func*/, int /*line*/, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(level, fmt, ap);
  va_end(ap);
}
#endif

namespace tally::nccl_source {

std::vector<std::string> capturedLog() {
  std::lock_guard<std::mutex> lock(logMutex());
  return logLines();
}

void clearCapturedLog() {
  std::lock_guard<std::mutex> lock(logMutex());
  logLines().clear();
}

int countLogLines(const std::string& text) {
  std::lock_guard<std::mutex> lock(logMutex());
  int n = 0;
  for (const std::string& line : logLines()) n += line.find(text) != std::string::npos ? 1 : 0;
  return n;
}

}  // namespace tally::nccl_source

// ---- parameters and environment: the process environment, read as NCCL reads it ----

const char* ncclGetEnv(const char* name) { return getenv(name); }

namespace {

int64_t readParam(const char* env, int64_t deflt) {
  const char* str = getenv(env);
  if (str == nullptr || str[0] == '\0') return deflt;
  errno = 0;
  const int64_t value = strtoll(str, nullptr, 0);
  return errno != 0 ? deflt : value;
}

}  // namespace

#if NCCL_VERSION_CODE >= 23000
int64_t ncclLoadParam(char const* env, int64_t deftVal, int64_t uninitialized, int64_t* cache,
                      int8_t* noCache) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (*cache != uninitialized) return *cache;
  *noCache = 0;
  *cache = readParam(env, deftVal);
  return *cache;
}
#else
void ncclLoadParam(char const* env, int64_t deftVal, int64_t uninitialized, int64_t* cache) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (*cache == uninitialized) *cache = readParam(env, deftVal);
}
#endif

#if NCCL_VERSION_CODE >= 22600
ncclResult_t ncclProfilerCallback(void** eHandle, int /*type*/, void* /*pHandle*/,
                                  int64_t /*pluginId*/, void* /*extData*/) {
  if (eHandle != nullptr) *eHandle = nullptr;
  return ncclSuccess;
}
#endif

// ---- the internal nets of a host without InfiniBand ----

namespace {

ncclResult_t noDevices(int* ndev) {
  *ndev = 0;
  return ncclSuccess;
}

ncclResult_t oneDevice(int* ndev) {
  *ndev = 1;
  return ncclSuccess;
}

ncclResult_t hostProperties(int /*dev*/, ncclNetProperties_t* props) {
  memset(props, 0, sizeof(*props));
  props->name = const_cast<char*>("lo");
  props->ptrSupport = NCCL_PTR_HOST;
  props->speed = 10000;
  props->maxComms = 65536;
  props->maxRecvs = 1;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  return ncclSuccess;
}

// One overload per shape of init across the table versions; assigning the overloaded name to the
// version's init slot picks the one that fits.
[[maybe_unused]] ncclResult_t initNet(ncclDebugLogger_t) { return ncclSuccess; }
#if NCCL_VERSION_CODE >= 22600
[[maybe_unused]] ncclResult_t initNet(ncclDebugLogger_t, ncclProfilerCallback_t) {
  return ncclSuccess;
}
[[maybe_unused]] ncclResult_t initNet(void** ctx, uint64_t, ncclNetCommConfig_t*, ncclDebugLogger_t,
                                      ncclProfilerCallback_t) {
  static int token;
  *ctx = &token;
  return ncclSuccess;
}
#endif

// Sets the finalize slot where the table has one (v11 and later).
template <typename Net>
auto setFinalize(Net& net, int) -> decltype(net.finalize = nullptr, void()) {
  net.finalize = [](void*) { return ncclSuccess; };
}
template <typename Net>
void setFinalize(Net&, long) {}

ncclNet_t internalNet(const char* name, ncclResult_t (*devices)(int*)) {
  ncclNet_t net{};
  net.name = name;
  net.init = initNet;
  net.devices = devices;
  net.getProperties = hostProperties;
  setFinalize(net, 0);
  return net;
}

}  // namespace

ncclNet_t ncclNetIb = internalNet("IB", noDevices);
ncclNet_t ncclNetSocket = internalNet("Socket", oneDevice);

// NCCL 2.28 and 2.29 keep GPU-initiated networking in the net loader; the tests never reach it
// (the internal IB net has no device), but the loader names these.
#if NCCL_VERSION_CODE >= 22800 && NCCL_VERSION_CODE < 23000
ncclGin_t ncclGinIbGdaki{};
ncclGin_t ncclGinIbProxy{};
NCCL_PARAM(GinType, "GIN_TYPE", -1);
#endif
