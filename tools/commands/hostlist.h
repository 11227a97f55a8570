// SPDX-License-Identifier: Apache-2.0
// Slurm hostlist expressions, expanded in process (no `scontrol show hostnames`).
//
//   "gpu01"                  -> gpu01
//   "node[01-03,07]"         -> node01 node02 node03 node07
//   "a[1-2],b5"              -> a1 a2 b5
//   "rack[1-2]-n[8-10]"      -> rack1-n8 rack1-n9 rack1-n10 rack2-n8 rack2-n9 rack2-n10
//
// A range keeps the width of its first bound: [08-10] gives 08 09 10, [8-10] gives 8 9 10.
// Commas inside brackets separate ranges, outside them host names. Names keep their order and
// duplicates are kept (Slurm's lists never repeat a node).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace tally::commands {

// Most names one expression may expand to; more is an error rather than a huge allocation.
inline constexpr size_t kMaxHostlistNames = 65536;

// Expands `text` into *out. kInvalidUsage, with *out untouched, for an empty expression or item,
// an unbalanced or nested bracket, a range that is not DIGITS or DIGITS-DIGITS, a range whose end
// is below its start, or more than kMaxHostlistNames names; the message quotes the expression.
Status expandHostlist(const std::string& text, std::vector<std::string>* out);

}  // namespace tally::commands
