// SPDX-License-Identifier: Apache-2.0
#include "plugin/edge.h"

#include <atomic>
#include <cstdlib>

namespace tally::plugin {
namespace {

std::atomic<bool> g_abort_on_error{false};
std::atomic<ncclDebugLogger_t> g_logger{nullptr};

void ncclSink(log::Level level, unsigned long subsys, const char* file, int line,
              const char* message) {
  ncclDebugLogger_t logger = g_logger.load();
  if (logger == nullptr) {
    log::stderrSink(level, subsys, file, line, message);
    return;
  }
  switch (level) {
    case log::Level::kWarn:
      logger(NCCL_LOG_WARN, static_cast<unsigned long>(NCCL_ALL), file, line, "NET/Tally : %s",
             message);
      break;
    case log::Level::kTrace:
      logger(NCCL_LOG_TRACE, subsys, file, line, "NET/Tally : %s", message);
      break;
    default:
      logger(NCCL_LOG_INFO, subsys, file, line, "NET/Tally : %s", message);
      break;
  }
}

}  // namespace

ncclResult_t toNcclResult(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return ncclSuccess;
    case StatusCode::kRemote:
      return ncclRemoteError;
    case StatusCode::kTimeout:
      return ncclRemoteError;
    case StatusCode::kSystem:
      return ncclSystemError;
    case StatusCode::kInternal:
      return ncclInternalError;
    case StatusCode::kInvalidUsage:
      return ncclInvalidUsage;
  }
  return ncclInternalError;
}

void setAbortOnError(bool abort_on_error) { g_abort_on_error.store(abort_on_error); }

ncclResult_t reportError(const char* fn, const Status& status) {
  TALLY_WARN("%s failed: %s", fn, status.toString().c_str());
  if (g_abort_on_error.load()) {
    TALLY_WARN("TALLY_ABORT_ON_ERROR is set: aborting");
    std::abort();
  }
  return toNcclResult(status.code());
}

void installNcclLogger(ncclDebugLogger_t logger) {
  if (logger == nullptr) return;
  g_logger.store(logger);
  log::setSink(&ncclSink, log::Level::kInfo);
}

}  // namespace tally::plugin
