// SPDX-License-Identifier: Apache-2.0
#include "common/strings.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <utility>

namespace tally {
namespace {

bool isSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string_view trimView(std::string_view text) {
  size_t begin = 0;
  size_t end = text.size();
  while (begin < end && isSpace(text[begin])) ++begin;
  while (end > begin && isSpace(text[end - 1])) --end;
  return text.substr(begin, end - begin);
}

bool isDigits(std::string_view text) {
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

std::string trim(std::string_view text) { return std::string(trimView(text)); }

void trimRight(std::string* text) {
  size_t end = text->size();
  while (end > 0 && isSpace((*text)[end - 1])) --end;
  text->resize(end);
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> fields;
  size_t begin = 0;
  for (;;) {
    const size_t end = text.find(separator, begin);
    if (end == std::string_view::npos) {
      fields.emplace_back(text.substr(begin));
      return fields;
    }
    fields.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
}

std::vector<std::string> splitList(std::string_view text, char separator) {
  std::vector<std::string> items;
  for (const std::string& field : split(text, separator)) {
    std::string_view item = trimView(field);
    if (!item.empty()) items.emplace_back(item);
  }
  return items;
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += separator;
    text += items[i];
  }
  return text;
}

std::string toLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string toUpper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool endsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

Status splitNumber(std::string_view text, uint64_t* number, std::string* suffix) {
  const std::string t(trimView(text));
  if (t.empty() || !std::isdigit(static_cast<unsigned char>(t[0]))) {
    return Status::invalidUsage("expected a non-negative number, got '" + std::string(text) + "'");
  }
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(t.c_str(), &end, 10);
  if (errno == ERANGE) {
    return Status::invalidUsage("number out of range: '" + std::string(text) + "'");
  }
  *number = v;
  *suffix = trim(end);
  return Status::ok();
}

Status splitHostPort(const std::string& text, std::string* host, uint16_t* port) {
  std::string h;
  std::string p;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Status::invalidUsage("bad address \"" + text + "\": expected [v6]:port");
    }
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos) {
      return Status::invalidUsage("bad address \"" + text + "\": expected host:port");
    }
    h = text.substr(0, colon);
    if (h.find(':') != std::string::npos) {
      return Status::invalidUsage("bad address \"" + text +
                                  "\": write IPv6 addresses as [v6]:port");
    }
    p = text.substr(colon + 1);
  }
  if (p.empty() || p.size() > 5 || !isDigits(p) || std::stoul(p) > 65535) {
    return Status::invalidUsage("bad port in \"" + text + "\": expected 0 to 65535");
  }
  *host = std::move(h);
  *port = static_cast<uint16_t>(std::stoul(p));
  return Status::ok();
}

std::string joinHostPort(const std::string& host, uint16_t port) {
  const bool bracket = host.find(':') != std::string::npos || (!host.empty() && host[0] == '[');
  return (bracket ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace tally
