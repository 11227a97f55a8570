// Plugin-mode logging (STYLE 9): Tally's log lines go to the ncclDebugLogger_t NCCL passes to
// init, prefixed "NET/Tally : ". WARN lines use NCCL_LOG_WARN with NCCL_ALL, INFO lines
// NCCL_LOG_INFO with Tally's subsystem flags (numerically NCCL's). NCCL filters by NCCL_DEBUG, so
// Tally forwards everything up to INFO.
#pragma once

#include "plugin/abi/nccl_types.h"

namespace tally::plugin {

// Installs `logger` as the sink. A NULL logger keeps whatever sink is installed (stderr by
// default). Thread-safe; every init calls it, and NCCL passes the same function each time.
void installNcclLogger(ncclDebugLogger_t logger);

}  // namespace tally::plugin
