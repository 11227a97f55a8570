// SPDX-License-Identifier: Apache-2.0
// What NCCL's compiled files logged, as the nccl-source tests read it back. NCCL's WARN and INFO
// lines (and a plugin's, through the logger NCCL hands it) go to ncclDebugLog, which the stubs
// implement: every line is kept here, and also printed on stderr when NCCL_DEBUG is set to INFO
// or WARN, as NCCL would.
//
// No NCCL type appears here, so the C++20 test drivers can include it. Thread-safe.
#pragma once

#include <string>
#include <vector>

namespace tally::nccl_source {

// Each line as "<LEVEL> <text>", LEVEL one of WARN, INFO, TRACE, VERSION, ABORT.
std::vector<std::string> capturedLog();
void clearCapturedLog();
// How many captured lines contain `text`.
int countLogLines(const std::string& text);

}  // namespace tally::nccl_source
