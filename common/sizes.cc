// SPDX-License-Identifier: Apache-2.0
#include "common/sizes.h"

#include <cctype>
#include <cstdio>

#include "common/strings.h"

namespace tally {

Status parseBytes(std::string_view text, uint64_t* out) {
  uint64_t number = 0;
  std::string suffix;
  TALLY_RETURN_IF_ERROR(splitNumber(text, &number, &suffix));
  const std::string unit_name = toUpper(suffix);
  uint64_t unit = 0;
  if (unit_name.empty() || unit_name == "B") {
    unit = 1;
  } else if (unit_name == "K" || unit_name == "KB" || unit_name == "KIB") {
    unit = uint64_t{1} << 10;
  } else if (unit_name == "M" || unit_name == "MB" || unit_name == "MIB") {
    unit = uint64_t{1} << 20;
  } else if (unit_name == "G" || unit_name == "GB" || unit_name == "GIB") {
    unit = uint64_t{1} << 30;
  } else if (unit_name == "T" || unit_name == "TB" || unit_name == "TIB") {
    unit = uint64_t{1} << 40;
  } else {
    return Status::invalidUsage("expected a size such as 4096, 64K, 4M or 1G, got '" +
                                std::string(text) + "'");
  }
  if (number > UINT64_MAX / unit) {
    return Status::invalidUsage("value out of range: '" + std::string(text) + "'");
  }
  *out = number * unit;
  return Status::ok();
}

std::string formatBytes(uint64_t bytes, std::string_view separator) {
  constexpr uint64_t kKiB = uint64_t{1} << 10;
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  uint64_t count = bytes;
  const char* unit = "B";
  if (bytes >= kMiB && bytes % kMiB == 0) {
    count = bytes / kMiB;
    unit = "MiB";
  } else if (bytes >= kKiB && bytes % kKiB == 0) {
    count = bytes / kKiB;
    unit = "KiB";
  }
  std::string text = std::to_string(count);
  text += separator;
  return text + unit;
}

std::string formatBytesApprox(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  constexpr size_t kNumUnits = sizeof(kUnits) / sizeof(kUnits[0]);
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < kNumUnits) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f %s", value, kUnits[unit]);
  return text;
}

namespace {

struct DurationUnitName {
  std::string_view name;
  uint64_t ns;
};
constexpr DurationUnitName kDurationUnits[] = {
    {"ns", 1},          {"us", 1000},         {"ms", 1000000},      {"s", 1000000000},
    {"m", 60000000000}, {"min", 60000000000}, {"h", 3600000000000},
};

bool isDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

Status badDuration(std::string_view text) {
  return Status::invalidUsage("expected a duration such as " + std::string(kDurationExamples) +
                              " (units ns, us, ms, s, m, h), got '" + std::string(text) + "'");
}

uint64_t bareUnitNs(DurationUnit unit) {
  switch (unit) {
    case DurationUnit::kMicroseconds:
      return 1000;
    case DurationUnit::kMilliseconds:
      return 1000000;
    case DurationUnit::kSeconds:
      return 1000000000;
    case DurationUnit::kNone:
      break;
  }
  return 0;
}

// parseDuration and parseDurationMs: the duration as a whole count of `resolution` ns (named
// `resolution_name` in messages). Worked out in that resolution, so that a count of milliseconds
// may go past what int64 holds in ns.
Status parseDurationIn(std::string_view text, DurationUnit bare, uint64_t resolution,
                       const char* resolution_name, int64_t* out) {
  const std::string t = trim(text);
  if (!t.empty() && t[0] == '-') {
    return Status::invalidUsage("a duration cannot be negative, got '" + std::string(text) + "'");
  }
  // The number: digits, then optionally a point and more digits. Parsed by hand, so that "1.5s"
  // is exactly 1500000000 ns and no locale or rounding comes in.
  size_t i = 0;
  uint64_t whole = 0;
  bool overflow = false;
  for (; i < t.size() && isDigit(t[i]); ++i) {
    const uint64_t digit = static_cast<uint64_t>(t[i] - '0');
    if (whole > (UINT64_MAX - digit) / 10) overflow = true;
    whole = overflow ? 0 : whole * 10 + digit;
  }
  if (i == 0) return badDuration(text);
  uint64_t fraction = 0;  // the digits after the point, as an integer
  uint64_t scale = 1;     // 10 to the number of them
  if (i < t.size() && t[i] == '.') {
    ++i;
    const size_t first = i;
    for (; i < t.size() && isDigit(t[i]); ++i) {
      if (i - first == 9) {
        return Status::invalidUsage("at most 9 digits after the point in a duration, got '" +
                                    std::string(text) + "'");
      }
      fraction = fraction * 10 + static_cast<uint64_t>(t[i] - '0');
      scale *= 10;
    }
    if (i == first) return badDuration(text);
  }
  const std::string unit_name = trim(std::string_view(t).substr(i));
  uint64_t unit = 0;  // ns
  if (unit_name.empty()) {
    unit = bareUnitNs(bare);
    if (unit == 0) {
      if (!overflow && whole == 0 && fraction == 0) {
        *out = 0;
        return Status::ok();
      }
      return Status::invalidUsage("'" + std::string(text) +
                                  "' has no unit; write a duration with one, such as " +
                                  std::string(kDurationExamples));
    }
  } else {
    for (const DurationUnitName& u : kDurationUnits) {
      if (unit_name == u.name) unit = u.ns;
    }
    if (unit == 0) return badDuration(text);
  }
  const Status out_of_range =
      Status::invalidUsage("duration out of range: '" + std::string(text) + "'");
  if (overflow) return out_of_range;
  // The fraction's share in ns, fraction x unit / scale: fraction < scale <= 10^9, so when scale
  // divides the unit the product is exact and below the unit; otherwise the unit is below a
  // second and fraction x unit stays below 10^9 x 10^6. What lies below a nanosecond is dropped.
  const bool fraction_whole = unit % scale == 0 || fraction * unit % scale == 0;
  const uint64_t fraction_ns =
      unit % scale == 0 ? fraction * (unit / scale) : fraction * unit / scale;
  const uint64_t kMax = static_cast<uint64_t>(INT64_MAX);
  uint64_t count = 0;  // of `resolution`
  uint64_t rest_ns = fraction_ns;
  if (unit % resolution == 0) {
    const uint64_t per = unit / resolution;
    if (whole > kMax / per) return out_of_range;
    count = whole * per;
  } else {  // a unit finer than the resolution (ns or us for ms): in ns first
    if (whole > kMax / unit) return out_of_range;
    count = whole * unit / resolution;
    rest_ns += whole * unit % resolution;
  }
  if (rest_ns / resolution > kMax - count) return out_of_range;
  count += rest_ns / resolution;
  if (resolution > 1 && (rest_ns % resolution != 0 || !fraction_whole)) {
    return Status::invalidUsage(std::string("expected a whole number of ") + resolution_name +
                                ", got '" + std::string(text) + "'");
  }
  *out = static_cast<int64_t>(count);
  return Status::ok();
}

}  // namespace

Status parseDuration(std::string_view text, DurationUnit bare, int64_t* nanoseconds) {
  return parseDurationIn(text, bare, 1, "nanoseconds", nanoseconds);
}

Status parseDurationMs(std::string_view text, DurationUnit bare, int64_t* milliseconds) {
  return parseDurationIn(text, bare, 1000000, "milliseconds", milliseconds);
}

}  // namespace tally
