// SPDX-License-Identifier: Apache-2.0
// WARN lines logged while a test runs, kept for the test to look at (and passed on to stderr):
// start() in SetUp, stop() in TearDown, with() to find the lines a test expects. start(kInfo)
// keeps the INFO lines too (not passed on).
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "common/log.h"

namespace tally::test {

class WarningLog {
 public:
  // Keeps every line up to `level` (WARN, or INFO too) from now on, forgetting earlier ones.
  static void start(log::Level level = log::Level::kWarn) {
    {
      std::lock_guard<std::mutex> lock(mu());
      lines().clear();
    }
    log::setSink(&keep, level);
  }
  // Back to stderr alone.
  static void stop() { log::setSink(&log::stderrSink, log::Level::kWarn); }
  // The lines kept so far that contain every one of `parts`.
  static std::vector<std::string> with(const std::vector<std::string>& parts) {
    std::lock_guard<std::mutex> lock(mu());
    std::vector<std::string> found;
    for (const std::string& line : lines()) {
      bool all = true;
      for (const std::string& p : parts) all = all && line.find(p) != std::string::npos;
      if (all) found.push_back(line);
    }
    return found;
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::string>& lines() {
    static std::vector<std::string> v;
    return v;
  }
  static void keep(log::Level level, unsigned long subsys, const char* file, int line,
                   const char* message) {
    {
      std::lock_guard<std::mutex> lock(mu());
      lines().emplace_back(message);
    }
    if (level == log::Level::kWarn) log::stderrSink(level, subsys, file, line, message);
  }
};

}  // namespace tally::test
