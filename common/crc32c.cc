// SPDX-License-Identifier: Apache-2.0
#include "common/crc32c.h"

#include <dlfcn.h>

#include <climits>
#include <mutex>
#include <string>

#include "common/log.h"

namespace tally::crc32c {

Status Crc32c::open(const char* library, Crc32c* out) {
  // RTLD_LOCAL: ISA-L's symbols stay out of the global namespace of the process that loaded
  // the plugin. The handle is never closed: the function pointer must stay valid.
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Status::invalidUsage(std::string("TALLY_CHECKSUM=1 needs ISA-L's CRC32C, and ") +
                                library + " cannot be loaded (" + (err ? err : "unknown error") +
                                "): install the libisal2 package");
  }
  void* sym = dlsym(handle, "crc32_iscsi");
  if (sym == nullptr) {
    return Status::invalidUsage(std::string(library) +
                                " has no crc32_iscsi: install the libisal2 package");
  }
  out->fn_ = reinterpret_cast<Fn>(sym);
  return Status::ok();
}

uint32_t Crc32c::compute(const void* data, size_t size) const {
  // crc32_iscsi takes an int length and a non-const pointer (it only reads). Its state is the
  // plain register, so pieces chain by passing one result as the next initial value.
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  constexpr size_t kPiece = size_t{1} << 30;
  unsigned int crc = 0xFFFFFFFFu;
  while (size > 0) {
    const size_t n = size < kPiece ? size : kPiece;
    crc = fn_(p, static_cast<int>(n), crc);
    p += n;
    size -= n;
  }
  return crc ^ 0xFFFFFFFFu;
}

const Crc32c* shared(Status* why) {
  static std::once_flag once;
  static Crc32c crc;
  static Status load_status;
  std::call_once(once, [] {
    load_status = Crc32c::open(kLibrary, &crc);
    if (load_status.isOk()) {
      TALLY_INFO(log::kInit, "CRC32C from %s (crc32_iscsi)", kLibrary);
    }
  });
  if (!load_status.isOk()) {
    if (why != nullptr) *why = load_status;
    return nullptr;
  }
  return &crc;
}

}  // namespace tally::crc32c
