// SPDX-License-Identifier: Apache-2.0
// The two timeouts every connection honours, declared once with their defaults, which come from
// the parameter registry (TALLY_CONNECT_TIMEOUT_MS, TALLY_TIMEOUT_MS in common/params.h). Each
// option struct that needs them embeds a Timeouts, so a value set from the variables travels
// under one name from the plugin or tally-reducer down to the sockets.
#pragma once

#include <cstdint>

#include "common/params.h"

namespace tally {

inline constexpr int64_t kDefaultConnectTimeoutMs = paramDefaultNumber("TALLY_CONNECT_TIMEOUT_MS");
inline constexpr int64_t kDefaultTimeoutMs = paramDefaultNumber("TALLY_TIMEOUT_MS");
static_assert(kDefaultConnectTimeoutMs > 0, "TALLY_CONNECT_TIMEOUT_MS needs a plain default");
static_assert(kDefaultTimeoutMs > 0, "TALLY_TIMEOUT_MS needs a plain default");

struct Timeouts {
  // TALLY_CONNECT_TIMEOUT_MS: how long a connect retries a peer that is not up yet, and how long
  // a connection's setup (hello, side channel) may take.
  int64_t connect_ms = kDefaultConnectTimeoutMs;
  // TALLY_TIMEOUT_MS: a started transfer that makes no progress for this long fails the
  // connection (a dead, stuck or slow-loris peer). Idle time between messages is fine. 0: never.
  int64_t io_ms = kDefaultTimeoutMs;

  // The two variables' values as loaded.
  static Timeouts fromParams(const Params& params) {
    return Timeouts{params.connectTimeout, params.timeout};
  }
};

}  // namespace tally
