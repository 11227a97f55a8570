// SPDX-License-Identifier: Apache-2.0
// Tally's version, as CMake's project() declares it (PROJECT_VERSION in the top CMakeLists.txt):
// the one place programs and packages take it from.
#pragma once

namespace tally {

// "0.1.0": major.minor.patch. Never null; a static string.
const char* versionString();

}  // namespace tally
