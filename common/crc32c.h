// SPDX-License-Identifier: Apache-2.0
// CRC32C (Castagnoli, the iSCSI CRC) of a byte range, for TALLY_CHECKSUM=1.
//
// The computation is ISA-L's crc32_iscsi, which picks the CPU's CRC32 instruction (and carry-less
// multiply) at run time. libisal.so.2 is opened with dlopen the first time a checksum is needed,
// so the plugin and tally-reducer load on hosts without it; only TALLY_CHECKSUM=1 needs it, and
// then a missing library is an error naming the Debian package (libisal2).
//
// The value is the standard CRC-32C: initial value 0xFFFFFFFF, reflected, final XOR 0xFFFFFFFF
// ("123456789" gives 0xE3069283). ISA-L's crc32_iscsi does neither the initial nor the final
// inversion itself; this wrapper does both.
//
// Threads: every function may be called from any thread; loading happens once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace tally::crc32c {

// The library opened by default.
inline constexpr const char* kLibrary = "libisal.so.2";

// A loaded crc32_iscsi. Cheap to copy.
class Crc32c {
 public:
  // Opens `library` and finds crc32_iscsi. On failure *out is untouched and the Status
  // (kInvalidUsage) says what is missing and which package provides it.
  static Status open(const char* library, Crc32c* out);

  // The CRC-32C of bytes [data, data + size). Requires a Crc32c from open().
  uint32_t compute(const void* data, size_t size) const;

 private:
  using Fn = unsigned int (*)(unsigned char*, int, unsigned int);
  Fn fn_ = nullptr;
};

// The process-wide Crc32c over kLibrary, opened on first use (the outcome is remembered).
// Returns null and sets *why when the library cannot be used.
const Crc32c* shared(Status* why);

}  // namespace tally::crc32c
