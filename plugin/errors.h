// The edge between Tally's Status and NCCL's ncclResult_t, and the exception barrier every entry
// point runs its body behind.
//
//   kRemote, kTimeout -> ncclRemoteError   (a lost or silent peer)
//   kSystem           -> ncclSystemError   (a failed system call)
//   kInternal         -> ncclInternalError (misuse by the core: bad arguments, too many requests)
//   kInvalidUsage     -> ncclInvalidUsage  (bad configuration)
#pragma once

#include <exception>
#include <new>

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

}  // namespace tally::plugin
