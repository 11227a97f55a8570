// SPDX-License-Identifier: Apache-2.0
#include "common/auth.h"

#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/hmac_sha256.h"
#include "common/log.h"
#include "common/strings.h"

namespace tally::auth {
namespace {

constexpr char kLabel[] = "tally-auth-v3";  // with its terminating 0 byte

// Overwrites secret bytes; explicit_bzero is never optimized away as a dead store.
void wipeBytes(void* p, size_t n) { explicit_bzero(p, n); }

// `warn`: log a warning when group or others may read the file.
Status readTokenFile(const std::string& path, bool warn, std::string* out) {
  const std::string what = "job token file " + path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::invalidUsage(what + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::invalidUsage(what + " is not a regular file");
  }
  if (warn && (st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    TALLY_WARN("job token file %s may be read by group or others (mode %03o): chmod 600 it",
               path.c_str(), static_cast<unsigned>(st.st_mode & 0777));
  }
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      wipeBytes(buf, sizeof(buf));
      return Status::invalidUsage(what + ": " + std::strerror(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxTokenFileBytes) break;
  }
  ::close(fd);
  wipeBytes(buf, sizeof(buf));
  if (text.size() > kMaxTokenFileBytes) {
    wipeBytes(text.data(), text.size());
    return Status::invalidUsage(what + " is larger than " + std::to_string(kMaxTokenFileBytes) +
                                " bytes; it should hold the token alone");
  }
  trimRight(&text);
  if (text.empty()) return Status::invalidUsage(what + " is empty");
  *out = std::move(text);
  return Status::ok();
}

}  // namespace

bool constantTimeEqual(const uint8_t* a, const uint8_t* b, size_t n) {
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff = static_cast<uint8_t>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

Status randomBytes(void* out, size_t n) {
  // getrandom(2) with no flags reads the kernel's CSPRNG and blocks only until it is seeded at
  // boot. One call may return fewer bytes than asked (over 32 MiB, or a signal): loop.
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    const ssize_t got = ::getrandom(p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      return Status::system(std::string("getrandom failed: ") +
                            (got < 0 ? std::strerror(errno) : "no bytes"));
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return Status::ok();
}

JobToken& JobToken::operator=(const JobToken& other) {
  if (this != &other) {
    wipe();
    secret_ = other.secret_;
  }
  return *this;
}

JobToken::~JobToken() { wipe(); }

void JobToken::wipe() {
  if (!secret_.empty()) wipeBytes(secret_.data(), secret_.size());
  secret_.clear();
}

Mac JobToken::prove(Role role, const Nonce& reducer_nonce, const Nonce& worker_nonce) const {
  uint8_t msg[sizeof(kLabel) + 1 + 2 * kNonceBytes];
  size_t n = 0;
  std::memcpy(msg, kLabel, sizeof(kLabel));
  n += sizeof(kLabel);
  msg[n++] = static_cast<uint8_t>(role);
  std::memcpy(msg + n, reducer_nonce.data(), kNonceBytes);
  n += kNonceBytes;
  std::memcpy(msg + n, worker_nonce.data(), kNonceBytes);
  n += kNonceBytes;
  Mac mac{};
  Status why;
  const hmac::HmacSha256* hmac = hmac::shared(&why);
  if (hmac != nullptr) why = hmac->compute(secret_.data(), secret_.size(), msg, n, &mac);
  if (!why.isOk()) {
    // loadJobToken already failed for a missing libcrypto, so only a token made some other way
    // gets here. A zero MAC fails every check: the connection is refused, never let through.
    mac.fill(0);
    TALLY_WARN("cannot compute the job token's MAC: %s", why.message().c_str());
  }
  return mac;
}

bool JobToken::verify(Role role, const Nonce& reducer_nonce, const Nonce& worker_nonce,
                      const Mac& mac) const {
  if (empty()) return false;
  const Mac want = prove(role, reducer_nonce, worker_nonce);
  return constantTimeEqual(want.data(), mac.data(), kMacBytes);
}

Status checkJobTokenFile(const std::string& path) {
  std::string secret;
  TALLY_RETURN_IF_ERROR(readTokenFile(path, /*warn=*/false, &secret));
  wipeBytes(secret.data(), secret.size());
  return Status::ok();
}

Status loadJobToken(const std::string& value, const std::string& file, JobToken* out) {
  std::string secret = value;
  trimRight(&secret);
  if (!value.empty() && !file.empty()) {
    wipeBytes(secret.data(), secret.size());
    return Status::invalidUsage("both TALLY_JOB_TOKEN and a job token file (" + file +
                                ") are set; set only one");
  }
  if (!value.empty() && secret.empty()) {
    return Status::invalidUsage("TALLY_JOB_TOKEN is set but blank");
  }
  if (!file.empty()) TALLY_RETURN_IF_ERROR(readTokenFile(file, /*warn=*/true, &secret));
  if (!secret.empty() && secret.size() < kRecommendedTokenBytes) {
    TALLY_WARN(
        "the job token is only %zu bytes; use at least %zu random bytes (openssl rand "
        "-hex 32)",
        secret.size(), kRecommendedTokenBytes);
  }
  if (!secret.empty()) {
    // The MAC needs libcrypto, loaded only now that a token is set: say so here, at startup,
    // rather than at the first connection.
    Status why;
    if (hmac::shared(&why) == nullptr) {
      wipeBytes(secret.data(), secret.size());
      return why;
    }
  }
  *out = JobToken(std::move(secret));
  return Status::ok();
}

}  // namespace tally::auth
