// SPDX-License-Identifier: Apache-2.0
// Byte counts and durations as people write them: parsing "64K" and printing "16 MiB" or
// "5.62 GiB"; parsing "500ms", "5s" or "2m". Byte units are binary (K = 1024) everywhere.
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

// ---- durations -------------------------------------------------------------------------------

// The unit a duration written as a bare number ("5") is read in. One rule for every setting: a
// flag or variable whose name carries its unit (TALLY_TIMEOUT_MS) reads a bare number in that
// unit; every other one (--timeout) refuses it, since "5" could as well be 5 ms as 5 s.
enum class DurationUnit { kNone, kMicroseconds, kMilliseconds, kSeconds };

// Examples of the accepted forms, for messages and help texts.
inline constexpr std::string_view kDurationExamples = "500ms, 5s or 2m";

// "500ms", "5s", "2m", "1.5h", "50us", "0.2ms": a decimal number, a fraction allowed (at most 9
// digits after the point), and a unit: ns, us, ms, s, m or min, h. Spaces around either part are
// ignored. A number with no unit is read in `bare`; with DurationUnit::kNone it is refused with
// a message that shows kDurationExamples ("0" alone is accepted, zero in every unit). Fails
// (kInvalidUsage, *nanoseconds untouched) on a missing or negative number, an unknown unit,
// trailing text or a result above INT64_MAX nanoseconds (about 292 years). What lies below a
// nanosecond is dropped.
Status parseDuration(std::string_view text, DurationUnit bare, int64_t* nanoseconds);

// parseDuration in whole milliseconds, up to INT64_MAX of them; also fails when the duration is
// not a whole number of them ("1.5ms", "200us").
Status parseDurationMs(std::string_view text, DurationUnit bare, int64_t* milliseconds);

}  // namespace tally
