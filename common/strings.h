// SPDX-License-Identifier: Apache-2.0
// Text helpers shared by every layer: trimming, splitting, joining, case, "host:port".
//
// Whitespace is what std::isspace says in the C locale: space, \t, \n, \v, \f and \r. Case
// changes touch ASCII letters only. None of these functions throws except on allocation failure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tally {

// " a b \n" -> "a b": leading and trailing whitespace removed.
std::string trim(std::string_view text);

// Drops trailing whitespace in place. It shrinks the string without copying it, so a secret
// held in *text leaves no copy behind to wipe.
void trimRight(std::string* text);

// Every field between separators, as written: "a,,b," -> {"a", "", "b", ""}; "" -> {""}.
std::vector<std::string> split(std::string_view text, char separator);

// A list such as TALLY_REDUCERS: "a:1, b:2,," -> {"a:1", "b:2"}. Fields are trimmed and empty
// ones dropped, so "" and " , " give an empty list.
std::vector<std::string> splitList(std::string_view text, char separator = ',');

// {"a", "b"} joined by ", " -> "a, b"; an empty vector gives "".
std::string join(const std::vector<std::string>& items, std::string_view separator);

std::string toLower(std::string_view text);
std::string toUpper(std::string_view text);

bool startsWith(std::string_view text, std::string_view prefix);
bool endsWith(std::string_view text, std::string_view suffix);

// "64K" -> 64 and "K"; " 10 ms " -> 10 and "ms". The text, trimmed, must start with a decimal
// digit; the suffix is the rest, trimmed. Fails (kInvalidUsage) on a missing number or one above
// UINT64_MAX; on failure *number and *suffix are untouched.
Status splitNumber(std::string_view text, uint64_t* number, std::string* suffix);

// Splits "host:port" or "[v6]:port" (the brackets are dropped from *host, a "%zone" kept).
// The host may be empty (":0"; the TCP transport reads it as any address); an unbracketed host
// must not contain ':'. The port is 1 to 5
// decimal digits, 0 to 65535, with no sign or spaces. On failure (kInvalidUsage, the message
// quotes the text and says what was expected) *host and *port are untouched.
Status splitHostPort(const std::string& text, std::string* host, uint16_t* port);

// The inverse: "10.0.0.1:80", and "[fe80::1%eth0]:80" for a host holding a ':' (IPv6) or
// starting with '['. splitHostPort gives back host and port for whatever it accepted.
std::string joinHostPort(const std::string& host, uint16_t port);

}  // namespace tally
