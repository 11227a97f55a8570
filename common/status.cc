// SPDX-License-Identifier: Apache-2.0
#include "common/status.h"

#include <cerrno>
#include <cstring>

namespace tally {

Status Status::fromErrno(std::string_view what, int err) {
  std::string m(what);
  m += ": ";
  m += std::strerror(err);
  bool lost_peer = err == ECONNRESET || err == ECONNREFUSED || err == EPIPE ||
                   err == EHOSTUNREACH || err == ENETUNREACH || err == ECONNABORTED ||
                   err == ETIMEDOUT;
  return {lost_peer ? StatusCode::kRemote : StatusCode::kSystem, std::move(m)};
}

const char* statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kRemote: return "remote error";
    case StatusCode::kSystem: return "system error";
    case StatusCode::kInternal: return "internal error";
    case StatusCode::kInvalidUsage: return "invalid usage";
    case StatusCode::kTimeout: return "timeout";
  }
  return "unknown";
}

std::string Status::toString() const {
  if (isOk()) return "ok";
  return std::string(statusCodeName(code_)) + ": " + message_;
}

}  // namespace tally
