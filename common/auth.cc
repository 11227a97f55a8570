#include "common/auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace tally::auth {
namespace {

constexpr char kLabel[] = "tally-auth-v3";  // with its terminating 0 byte

// Drops trailing whitespace (a final newline, "\r\n").
void trimRight(std::string* s) {
  while (!s->empty() &&
         (s->back() == '\n' || s->back() == '\r' || s->back() == ' ' || s->back() == '\t')) {
    s->pop_back();
  }
}

Status readTokenFile(const std::string& path, std::string* out) {
  const std::string what = "job token file " + path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::invalidUsage(what + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::invalidUsage(what + " is not a regular file");
  }
  if ((st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
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
      OPENSSL_cleanse(buf, sizeof(buf));
      return Status::invalidUsage(what + ": " + std::strerror(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxTokenFileBytes) break;
  }
  ::close(fd);
  OPENSSL_cleanse(buf, sizeof(buf));
  if (text.size() > kMaxTokenFileBytes) {
    OPENSSL_cleanse(text.data(), text.size());
    return Status::invalidUsage(what + " is larger than " + std::to_string(kMaxTokenFileBytes) +
                                " bytes; it should hold the token alone");
  }
  trimRight(&text);
  if (text.empty()) return Status::invalidUsage(what + " is empty");
  *out = std::move(text);
  return Status::ok();
}

}  // namespace

Status randomBytes(void* out, size_t n) {
  if (n > static_cast<size_t>(INT32_MAX)) return Status::internal("randomBytes: too many bytes");
  if (RAND_bytes(static_cast<unsigned char*>(out), static_cast<int>(n)) != 1) {
    return Status::system("the OpenSSL random generator failed (RAND_bytes)");
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
  if (!secret_.empty()) OPENSSL_cleanse(secret_.data(), secret_.size());
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
  unsigned int len = 0;
  const unsigned char* ok = HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
                                 msg, n, mac.data(), &len);
  if (ok == nullptr || len != kMacBytes) {
    // Cannot happen with SHA-256 and a working libcrypto; a zero MAC then fails every check.
    mac.fill(0);
    TALLY_WARN("HMAC-SHA256 failed in libcrypto");
  }
  return mac;
}

bool JobToken::verify(Role role, const Nonce& reducer_nonce, const Nonce& worker_nonce,
                      const Mac& mac) const {
  if (empty()) return false;
  const Mac want = prove(role, reducer_nonce, worker_nonce);
  return CRYPTO_memcmp(want.data(), mac.data(), kMacBytes) == 0;
}

Status loadJobToken(const std::string& value, const std::string& file, JobToken* out) {
  std::string secret = value;
  trimRight(&secret);
  if (!value.empty() && !file.empty()) {
    OPENSSL_cleanse(secret.data(), secret.size());
    return Status::invalidUsage("both TALLY_JOB_TOKEN and a job token file (" + file +
                                ") are set; set only one");
  }
  if (!value.empty() && secret.empty()) {
    return Status::invalidUsage("TALLY_JOB_TOKEN is set but blank");
  }
  if (!file.empty()) TALLY_RETURN_IF_ERROR(readTokenFile(file, &secret));
  if (!secret.empty() && secret.size() < kRecommendedTokenBytes) {
    TALLY_WARN(
        "the job token is only %zu bytes; use at least %zu random bytes (openssl rand "
        "-hex 32)",
        secret.size(), kRecommendedTokenBytes);
  }
  *out = JobToken(std::move(secret));
  return Status::ok();
}

}  // namespace tally::auth
