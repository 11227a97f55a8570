// SPDX-License-Identifier: Apache-2.0
#include "tools/commands/paths.h"

#include <unistd.h>

#include <filesystem>

#include "tools/driver/process.h"

namespace tally::commands {

std::string defaultPluginPath() {
  const std::string bin = driver::selfDirectory();
  const std::string installed = bin + "/../" TALLY_INSTALL_LIBDIR "/libnccl-net-tally.so";
  for (const std::string& path :
       {installed, bin + "/../lib/libnccl-net-tally.so", bin + "/../plugin/libnccl-net-tally.so"}) {
    if (::access(path.c_str(), R_OK) == 0) return path;
  }
  return installed;
}

std::string defaultReducerPath() {
  const std::string bin = driver::selfDirectory();
  const std::string installed = bin + "/tally-reducer";
  for (const std::string& path : {installed, bin + "/../reducer/tally-reducer"}) {
    if (::access(path.c_str(), X_OK) == 0) return std::filesystem::path(path).lexically_normal();
  }
  return installed;
}

}  // namespace tally::commands
