// Byte counts as people write them: parsing "64K" and printing "16 MiB" or "5.62 GiB".
// Units are binary (K = 1024) everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tally {

// "4096", "64K", "4M", "1G", "2T": a decimal count and an optional unit, any case, written K, KB
// or KiB (likewise M, G, T) or B; spaces around either part are ignored. Fails (kInvalidUsage,
// *out untouched) on a missing number, an unknown unit, trailing text or a result above
// UINT64_MAX.
Status parseBytes(std::string_view text, uint64_t* out);

// Exact: the count in the largest of B, KiB and MiB that divides it, for tables and messages
// where the value must read back the same: "16 MiB", "1025 KiB", "1000 B", "65536 MiB".
// `separator` goes between number and unit ("" gives "16MiB").
std::string formatBytes(uint64_t bytes, std::string_view separator = " ");

// Rounded, for summaries: below 1 KiB the count in bytes ("17 B"), else two decimals in the
// largest unit up to PiB that keeps the number at least 1 ("12.00 KiB", "5.62 GiB").
std::string formatBytesApprox(uint64_t bytes);

}  // namespace tally
