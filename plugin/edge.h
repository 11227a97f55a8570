// SPDX-License-Identifier: Apache-2.0
// What every entry point shares at the C edge: the exception barrier its body runs behind, the
// mapping from Tally's Status to NCCL's ncclResult_t, argument checks, and the NCCL logger.
//
//   kRemote, kTimeout -> ncclRemoteError   (a lost or silent peer)
//   kSystem           -> ncclSystemError   (a failed system call)
//   kInternal         -> ncclInternalError (misuse by the core: bad arguments, too many requests)
//   kInvalidUsage     -> ncclInvalidUsage  (bad configuration)
//
// Logging in plugin mode: Tally's log lines go to the ncclDebugLogger_t NCCL passes to init,
// prefixed "NET/Tally : ". WARN lines use NCCL_LOG_WARN with NCCL_ALL, INFO lines NCCL_LOG_INFO
// with Tally's subsystem flags (numerically NCCL's). NCCL filters by NCCL_DEBUG, so Tally forwards
// everything up to INFO.
//
// The logger and TALLY_ABORT_ON_ERROR are process-wide settings (NCCL passes the same logger to
// every init, and the log sink is the process's), not state of a communicator.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "common/log.h"
#include "common/status.h"
#include "plugin/abi/nccl_types.h"

namespace tally::plugin {

ncclResult_t toNcclResult(StatusCode code);

// TALLY_ABORT_ON_ERROR: set once when the parameters are loaded; read by reportError.
void setAbortOnError(bool abort_on_error);

// Logs a failed entry point as a WARN ("<fn>: <status>"), aborts when TALLY_ABORT_ON_ERROR is set,
// and returns the mapped ncclResult_t. `status` must not be ok.
ncclResult_t reportError(const char* fn, const Status& status);

// Runs `body` (returning Status) and converts the result; no exception escapes. Allocation
// failure becomes ncclSystemError, any other exception a broken invariant (ncclInternalError).
template <typename Body>
ncclResult_t guard(const char* fn, Body&& body) noexcept {
  try {
    Status status = body();
    if (status.isOk()) return ncclSuccess;
    return reportError(fn, status);
  } catch (const std::bad_alloc&) {
    return reportError(fn, Status::system("out of memory"));
  } catch (const std::exception& e) {
    return reportError(fn, Status::internal(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return reportError(fn, Status::internal("unexpected exception"));
  }
}

// kInternal naming `what` when p is NULL: NCCL passed a pointer it must not.
inline Status checkPointer(const void* p, const char* what) {
  if (p == nullptr) return Status::internal(std::string(what) + " is NULL");
  return Status::ok();
}

// Installs `logger` as the sink. A NULL logger keeps whatever sink is installed (stderr by
// default). Thread-safe; every init calls it, and NCCL passes the same function each time.
void installNcclLogger(ncclDebugLogger_t logger);

}  // namespace tally::plugin
