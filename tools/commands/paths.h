// SPDX-License-Identifier: Apache-2.0
// Where the installed pieces are, found from the running `tally` binary.
//
// The installed layout is <prefix>/bin/tally, <prefix>/bin/tally-reducer and
// <prefix>/<libdir>/libnccl-net-tally.so; the build tree keeps the plugin in plugin/ and the
// reducer in reducer/, next to tools/.
#pragma once

#include <string>

namespace tally::commands {

// The plugin next to this binary: the first of <bin>/../<libdir>, <bin>/../lib and
// <bin>/../plugin that holds libnccl-net-tally.so; the installed path when none does.
std::string defaultPluginPath();
// <bin>/tally-reducer, or the build tree's <bin>/../reducer/tally-reducer; the installed path when
// neither is there.
std::string defaultReducerPath();

}  // namespace tally::commands
