// A tc rate ("200mbit", "1gbit", "100mbps") as the Mb/s a NIC of that rate would report, for
// TALLY_LINK_MBPS in an emulated cluster. Header-only, so its test needs no benchmark.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace tally::bench {

// A rate validRate() accepts, in Mb/s as tc reads it (k, m, g, t are powers of 1000; the "bps"
// units are bytes a second), rounded to the nearest and at least 1: "1gbit" is 1000, "100mbps"
// 800.
inline int64_t rateMbps(const std::string& rate) {
  size_t end = 0;
  while (end < rate.size() &&
         (std::isdigit(static_cast<unsigned char>(rate[end])) || rate[end] == '.'))
    ++end;
  std::string unit = rate.substr(end);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 1;  // to bits a second
  if (unit.size() >= 3 && unit.compare(unit.size() - 3, 3, "bps") == 0) scale = 8;
  switch (unit.empty() ? 'b' : unit[0]) {
    case 'k': scale *= 1e3; break;
    case 'm': scale *= 1e6; break;
    case 'g': scale *= 1e9; break;
    case 't': scale *= 1e12; break;
    default: break;
  }
  const double mbps = std::strtod(rate.substr(0, end).c_str(), nullptr) * scale / 1e6;
  return std::max<int64_t>(1, static_cast<int64_t>(mbps + 0.5));
}

}  // namespace tally::bench
