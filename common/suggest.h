// SPDX-License-Identifier: Apache-2.0
// Suggestions for a mistyped name: which of the known names the user most likely meant. Used for
// `tally`'s commands and for TALLY_ names that are no variable (common/param_check.cc).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tally {

// Edits between a and b: insertions, deletions, substitutions and swaps of two neighbouring
// characters, one each ("plna" -> "plan" is 1).
size_t editDistance(const std::string& a, const std::string& b);

// The known name nearest to `typed`, or "" when none is near enough to be a plausible typo (more
// than max(2, length / 3) edits away). Ties go to the first in `known`.
std::string nearestName(const std::string& typed, const std::vector<std::string>& known);

}  // namespace tally
