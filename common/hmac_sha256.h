// SPDX-License-Identifier: Apache-2.0
// HMAC-SHA256 from OpenSSL's libcrypto, loaded at run time.
//
// Tally links no libcrypto: the plugin must load in any process with nothing but glibc, and only
// a job token (common/auth.h) needs a MAC. libcrypto.so.3 is opened with dlopen the first time
// a token is loaded or used, so hosts and containers without OpenSSL run Tally without
// authentication; with a token and no library, loading the token fails naming the library and
// the Debian package that provides it (libssl3).
//
// Only two exported functions are used: HMAC (the one-shot form, not deprecated in OpenSSL 3)
// and EVP_sha256. They are declared here by their C signatures over an opaque EVP_MD, so the
// build needs no OpenSSL headers either.
//
// Threads: every function may be called from any thread; loading happens once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace tally::hmac {

// The library opened by default.
inline constexpr const char* kLibrary = "libcrypto.so.3";
inline constexpr size_t kDigestBytes = 32;
using Digest = std::array<uint8_t, kDigestBytes>;

// A loaded HMAC-SHA256. Cheap to copy.
class HmacSha256 {
 public:
  // Opens `library` and finds HMAC and EVP_sha256. On failure *out is untouched and the Status
  // (kInvalidUsage) names the library, what is missing and which package provides it.
  static Status open(const char* library, HmacSha256* out);

  // HMAC-SHA256 of [msg, msg + msg_size) under [key, key + key_size) into *out. kInternal when
  // libcrypto refuses (a key over INT_MAX bytes, or a broken library); *out is then unspecified.
  // Requires an HmacSha256 from open().
  Status compute(const void* key, size_t key_size, const void* msg, size_t msg_size,
                 Digest* out) const;

 private:
  struct Md;  // OpenSSL's EVP_MD, never looked into
  using HmacFn = unsigned char* (*)(const Md* md, const void* key, int key_len,
                                    const unsigned char* data, size_t data_len, unsigned char* out,
                                    unsigned int* out_len);
  using Sha256Fn = const Md* (*)();
  HmacFn hmac_ = nullptr;
  Sha256Fn sha256_ = nullptr;
};

// The process-wide HmacSha256 over kLibrary, opened on first use (the outcome is remembered).
// Returns null and sets *why (when non-null) when the library cannot be used.
const HmacSha256* shared(Status* why);

}  // namespace tally::hmac
