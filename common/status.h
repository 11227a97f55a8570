// SPDX-License-Identifier: Apache-2.0
// Status: the result of every fallible call inside Tally.
//
// Expected failures (a lost peer, a timeout, bad configuration) are Status values, never
// exceptions. The plugin maps them to ncclResult_t at its edge (plugin/edge.h):
//   kRemote -> ncclRemoteError, kSystem -> ncclSystemError, kInternal -> ncclInternalError,
//   kInvalidUsage -> ncclInvalidUsage, kTimeout -> ncclRemoteError.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace tally {

enum class StatusCode {
  kOk = 0,
  kRemote,        // the peer closed, reset or sent something we cannot accept
  kSystem,        // a system call failed
  kInternal,      // misuse by the caller or a broken invariant
  kInvalidUsage,  // bad configuration or arguments from the user
  kTimeout,       // a bounded wait ran out
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  static Status remote(std::string m) { return {StatusCode::kRemote, std::move(m)}; }
  static Status system(std::string m) { return {StatusCode::kSystem, std::move(m)}; }
  // A failed system call: appends strerror(err) to the message.
  static Status fromErrno(std::string_view what, int err);
  static Status internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status invalidUsage(std::string m) { return {StatusCode::kInvalidUsage, std::move(m)}; }
  static Status timeout(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }

  bool isOk() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return isOk(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "remote error: peer 10.0.0.2:4000 closed the connection"
  std::string toString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

const char* statusCodeName(StatusCode code);

}  // namespace tally

// The only control-flow macro: return the Status of `expr` when it is not ok.
#define TALLY_RETURN_IF_ERROR(expr)            \
  do {                                         \
    ::tally::Status tally_status_ = (expr);    \
    if (!tally_status_.isOk()) return tally_status_; \
  } while (0)
