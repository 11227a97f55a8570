// SPDX-License-Identifier: Apache-2.0
// The job secret and the challenge-response MACs that prove it (docs/security.md).
//
// Every worker and reducer of a job shares one secret, the job token (TALLY_JOB_TOKEN, or a file
// named by TALLY_JOB_TOKEN_FILE or tally-reducer --token-file). Each side of a connection draws a
// fresh random nonce; each proves it knows the token with
//
//   HMAC-SHA256(key = token, "tally-auth-v3" | 0x00 | role | reducer nonce | worker nonce)
//
// where role is 'W' for the worker's proof and 'R' for the reducer's, so one direction's MAC is
// never a valid answer for the other, and both nonces bind it to this connection. The HMAC is
// OpenSSL's, from libcrypto.so.3 loaded at run time only when a token is set
// (common/hmac_sha256.h); nonces come from the kernel (getrandom), and MACs are compared in
// constant time.
//
// The token is never logged, printed or sent; its holder wipes it when destroyed.
// Threads: JobToken is immutable after construction and may be shared between threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace tally::auth {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

// Tokens shorter than this are accepted with a warning.
inline constexpr size_t kRecommendedTokenBytes = 16;
// A token file larger than this is refused (it is not a token).
inline constexpr size_t kMaxTokenFileBytes = 64 * 1024;

// Who is proving.
enum class Role : uint8_t { kWorker = 'W', kReducer = 'R' };

// Whether [a, a + n) and [b, b + n) are equal, taking the same time wherever they differ (a MAC
// compare must not tell an attacker how many leading bytes were right).
bool constantTimeEqual(const uint8_t* a, const uint8_t* b, size_t n);

// Fills [out, out + n) from the kernel's CSPRNG (getrandom). kSystem when it cannot; out is then
// unspecified.
Status randomBytes(void* out, size_t n);

class JobToken {
 public:
  JobToken() = default;  // no token: this side does not authenticate
  explicit JobToken(std::string secret) : secret_(std::move(secret)) {}
  JobToken(const JobToken&) = default;
  JobToken& operator=(const JobToken& other);
  ~JobToken();

  bool empty() const { return secret_.empty(); }
  size_t size() const { return secret_.size(); }

  // The MAC `role` sends for this pair of nonces. Requires !empty().
  Mac prove(Role role, const Nonce& reducer_nonce, const Nonce& worker_nonce) const;
  // Whether `mac` is what prove(role, ...) gives, compared in constant time. False when empty().
  bool verify(Role role, const Nonce& reducer_nonce, const Nonce& worker_nonce,
              const Mac& mac) const;

 private:
  void wipe();
  std::string secret_;
};

// Resolves the job token from a value (TALLY_JOB_TOKEN) or a file (TALLY_JOB_TOKEN_FILE,
// --token-file). Both empty: *out is the empty token (no authentication). Both set: kInvalidUsage
// (which one is meant is unclear). Trailing whitespace (a final newline) is not part of the token.
// A file that cannot be read, is empty or is over kMaxTokenFileBytes: kInvalidUsage naming the
// path. A file that group or others may read is accepted with a warning (mounted secrets often
// are). A token is set but libcrypto.so.3 cannot be loaded: kInvalidUsage naming the library and
// its package. Nothing is written to *out on failure; no message contains the secret.
Status loadJobToken(const std::string& value, const std::string& file, JobToken* out);

// Whether `path` passes loadJobToken's checks of a token file (it opens, is a regular file, is not
// empty, is not over kMaxTokenFileBytes), for checking settings before they are used
// (Params::problems). What it reads is wiped, not kept; it logs nothing. The same kInvalidUsage
// as loadJobToken, naming the path, when it fails.
Status checkJobTokenFile(const std::string& path);

}  // namespace tally::auth
