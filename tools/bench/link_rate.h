// SPDX-License-Identifier: Apache-2.0
// A tc rate ("200mbit", "1gbit", "100mbps"): the one grammar --emulate accepts, the Mb/s a NIC
// of that rate would report, for TALLY_LINK_MBPS in an emulated cluster, and the rate a
// slow-reducer fault sets (a fraction of it). Header-only, so its
// test needs no benchmark.
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace tally::bench {

// A number (digits, at most one dot) and one of tc's units, case-insensitive: bit, kbit, mbit,
// gbit, tbit (k, m, g, t are powers of 1000) or bps, kbps, mbps, gbps, tbps (bytes a second).
// False, leaving *bits_per_second alone, for anything else or a rate of 0.
inline bool parseTcRate(const std::string& rate, double* bits_per_second) {
  size_t end = 0;
  bool digits = false, dot = false;
  for (; end < rate.size(); ++end) {
    const unsigned char c = static_cast<unsigned char>(rate[end]);
    if (std::isdigit(c)) {
      digits = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!digits) return false;
  std::string unit = rate.substr(end);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const struct {
    const char* name;
    double bits;
  } kUnits[] = {{"bit", 1},    {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12},
                {"bps", 8},    {"kbps", 8e3}, {"mbps", 8e6}, {"gbps", 8e9}, {"tbps", 8e12}};
  for (const auto& u : kUnits) {
    if (unit != u.name) continue;
    const double value = std::strtod(rate.substr(0, end).c_str(), nullptr) * u.bits;
    if (!(value > 0)) return false;
    *bits_per_second = value;
    return true;
  }
  return false;
}

// A rate parseTcRate() accepts, in Mb/s rounded to the nearest and at least 1: "1gbit" is 1000,
// "100mbps" 800. 0 for a rate it does not accept.
inline int64_t rateMbps(const std::string& rate) {
  double bits = 0;
  if (!parseTcRate(rate, &bits)) return 0;
  return std::max<int64_t>(1, static_cast<int64_t>(bits / 1e6 + 0.5));
}

// `rate` divided by `factor`, in tc's syntax: whole bits a second (rounded, at least 1), in the
// largest of gbit, mbit, kbit and bit that keeps them whole: "400mbit" / 10 is "40mbit", / 3
// "133333333bit", "1gbit" / 2.5 "400mbit". Empty when parseTcRate() refuses `rate` or `factor`
// is not above 0.
inline std::string dividedRate(const std::string& rate, double factor) {
  double bits = 0;
  if (!parseTcRate(rate, &bits) || !(factor > 0)) return "";
  const int64_t whole = std::max<int64_t>(1, std::llround(bits / factor));
  static const struct {
    const char* name;
    int64_t bits;
  } kUnits[] = {{"gbit", 1000000000}, {"mbit", 1000000}, {"kbit", 1000}};
  for (const auto& u : kUnits) {
    if (whole % u.bits == 0) return std::to_string(whole / u.bits) + u.name;
  }
  return std::to_string(whole) + "bit";
}

}  // namespace tally::bench
