#include "plugin/errors.h"

#include <atomic>
#include <cstdlib>

namespace tally::plugin {
namespace {
std::atomic<bool> g_abort_on_error{false};
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

}  // namespace tally::plugin
