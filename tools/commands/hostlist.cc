// SPDX-License-Identifier: Apache-2.0
#include "tools/commands/hostlist.h"

#include <cstdint>
#include <utility>

namespace tally::commands {
namespace {

Status bad(const std::string& text, const std::string& why) {
  return Status::invalidUsage("hostlist \"" + text + "\": " + why);
}

bool allDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// `value` in decimal, zero-padded to `width` digits.
std::string padded(uint64_t value, size_t width) {
  std::string digits = std::to_string(value);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

// The names one bracket's contents ("01-03,07") stand for, appended to *out.
Status expandRanges(const std::string& text, const std::string& inner,
                    std::vector<std::string>* out) {
  size_t begin = 0;
  while (begin <= inner.size()) {
    size_t end = inner.find(',', begin);
    if (end == std::string::npos) end = inner.size();
    const std::string range = inner.substr(begin, end - begin);
    const size_t dash = range.find('-');
    const std::string lo = range.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    // 18 digits stay well inside uint64_t.
    if (!allDigits(lo) || !allDigits(hi) || lo.size() > 18 || hi.size() > 18) {
      return bad(text, "\"[" + inner + "]\" holds \"" + range +
                           "\", expected a number or a range like 01-04");
    }
    const uint64_t first = std::stoull(lo);
    const uint64_t last = std::stoull(hi);
    if (last < first) return bad(text, "range \"" + range + "\" ends below its start");
    if (last - first >= kMaxHostlistNames || out->size() + (last - first) >= kMaxHostlistNames) {
      return bad(text, "expands to more than " + std::to_string(kMaxHostlistNames) + " names");
    }
    for (uint64_t n = first; n <= last; ++n) out->push_back(padded(n, lo.size()));
    begin = end + 1;
  }
  return Status::ok();
}

// One host item ("rack[1-2]-n[8-10]"): the cartesian product of its parts, in order.
Status expandItem(const std::string& text, const std::string& item, std::vector<std::string>* out) {
  std::vector<std::string> names = {""};
  size_t i = 0;
  while (i < item.size()) {
    if (item[i] == ']') return bad(text, "a ']' without its '['");
    if (item[i] != '[') {
      const size_t next = item.find_first_of("[]", i);
      const std::string literal = item.substr(i, next == std::string::npos ? next : next - i);
      for (std::string& name : names) name += literal;
      i = next == std::string::npos ? item.size() : next;
      continue;
    }
    const size_t close = item.find(']', i + 1);
    if (close == std::string::npos) return bad(text, "a '[' without its ']'");
    const std::string inner = item.substr(i + 1, close - i - 1);
    if (inner.find('[') != std::string::npos) return bad(text, "brackets do not nest");
    std::vector<std::string> suffixes;
    TALLY_RETURN_IF_ERROR(expandRanges(text, inner, &suffixes));
    if (names.size() * suffixes.size() > kMaxHostlistNames) {
      return bad(text, "expands to more than " + std::to_string(kMaxHostlistNames) + " names");
    }
    std::vector<std::string> product;
    product.reserve(names.size() * suffixes.size());
    for (const std::string& name : names) {
      for (const std::string& suffix : suffixes) product.push_back(name + suffix);
    }
    names = std::move(product);
    i = close + 1;
  }
  out->insert(out->end(), names.begin(), names.end());
  return Status::ok();
}

}  // namespace

Status expandHostlist(const std::string& text, std::vector<std::string>* out) {
  if (text.empty()) return Status::invalidUsage("hostlist is empty");
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return bad(text, "contains a blank");
  }
  std::vector<std::string> names;
  size_t begin = 0;
  int depth = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) return bad(text, "a ']' without its '['");
    if (c != ',' || depth > 0) continue;
    const std::string item = text.substr(begin, i - begin);
    if (item.empty()) return bad(text, "an empty host name between commas");
    TALLY_RETURN_IF_ERROR(expandItem(text, item, &names));
    if (names.size() > kMaxHostlistNames) {
      return bad(text, "expands to more than " + std::to_string(kMaxHostlistNames) + " names");
    }
    begin = i + 1;
  }
  if (depth != 0) return bad(text, "a '[' without its ']'");
  *out = std::move(names);
  return Status::ok();
}

}  // namespace tally::commands
