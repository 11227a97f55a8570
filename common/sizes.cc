#include "common/sizes.h"

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

}  // namespace tally
