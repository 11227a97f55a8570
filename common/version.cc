// SPDX-License-Identifier: Apache-2.0
#include "common/version.h"

// TALLY_VERSION is defined for this file alone (common/CMakeLists.txt), so a new version rebuilds
// one object instead of everything that links common.
#ifndef TALLY_VERSION
#error "TALLY_VERSION must be defined by the build (common/CMakeLists.txt)"
#endif

namespace tally {

const char* versionString() { return TALLY_VERSION; }

}  // namespace tally
