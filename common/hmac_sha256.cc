// SPDX-License-Identifier: Apache-2.0
#include "common/hmac_sha256.h"

#include <dlfcn.h>

#include <climits>
#include <mutex>
#include <string>

#include "common/log.h"

namespace tally::hmac {
namespace {

constexpr const char* kPackage = "install OpenSSL 3's library (the libssl3 package on Debian 12)";

Status lookup(void* handle, const char* library, const char* name, void** out) {
  dlerror();
  void* sym = dlsym(handle, name);
  if (sym == nullptr) {
    const char* err = dlerror();
    return Status::invalidUsage(std::string("the job token's HMAC-SHA256 needs ") + name +
                                " from OpenSSL's libcrypto, and " + library + " has none (" +
                                (err != nullptr ? err : "not found") + "): " + kPackage);
  }
  *out = sym;
  return Status::ok();
}

}  // namespace

Status HmacSha256::open(const char* library, HmacSha256* out) {
  // RTLD_LOCAL: libcrypto's symbols stay out of the global namespace of the process that loaded
  // the plugin (which may hold another OpenSSL). The handle is never closed: the function
  // pointers must stay valid.
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Status::invalidUsage(std::string("a job token is set, and its HMAC-SHA256 needs "
                                            "OpenSSL's libcrypto, but ") +
                                library + " cannot be loaded (" +
                                (err != nullptr ? err : "unknown error") + "): " + kPackage);
  }
  void* hmac = nullptr;
  void* sha256 = nullptr;
  Status st = lookup(handle, library, "HMAC", &hmac);
  if (st.isOk()) st = lookup(handle, library, "EVP_sha256", &sha256);
  if (!st.isOk()) {
    dlclose(handle);
    return st;
  }
  // POSIX guarantees that a dlsym'ed object pointer converts to the function's pointer type.
  out->hmac_ = reinterpret_cast<HmacFn>(hmac);
  out->sha256_ = reinterpret_cast<Sha256Fn>(sha256);
  return Status::ok();
}

Status HmacSha256::compute(const void* key, size_t key_size, const void* msg, size_t msg_size,
                           Digest* out) const {
  if (key_size > static_cast<size_t>(INT_MAX)) {
    return Status::internal("HMAC-SHA256: the key is over INT_MAX bytes");
  }
  const Md* md = sha256_();
  unsigned int len = 0;
  const unsigned char* done =
      md == nullptr ? nullptr
                    : hmac_(md, key, static_cast<int>(key_size),
                            static_cast<const unsigned char*>(msg), msg_size, out->data(), &len);
  if (done == nullptr || len != kDigestBytes) {
    return Status::internal("HMAC-SHA256 failed in libcrypto");
  }
  return Status::ok();
}

const HmacSha256* shared(Status* why) {
  static std::once_flag once;
  static HmacSha256 hmac;
  static Status load_status;
  std::call_once(once, [] {
    load_status = HmacSha256::open(kLibrary, &hmac);
    if (load_status.isOk()) TALLY_INFO(log::kInit, "HMAC-SHA256 from %s", kLibrary);
  });
  if (!load_status.isOk()) {
    if (why != nullptr) *why = load_status;
    return nullptr;
  }
  return &hmac;
}

}  // namespace tally::hmac
