// SPDX-License-Identifier: Apache-2.0
// A fake sysfs tree for tests of code that reads /sys (verbs ports, auto's device check).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace tally::transport::test {

// A sysfs tree of its own under /tmp, holding `path` (a file, or a folder when it ends in '/').
class FakeSysfs {
 public:
  explicit FakeSysfs(const std::string& path) {
    char name[] = "/tmp/tally-sysfs-XXXXXX";
    if (mkdtemp(name) == nullptr) return;
    root_ = name;
    if (path.empty()) return;
    const std::filesystem::path full = root_ + path;
    std::filesystem::create_directories(path.back() == '/' ? full : full.parent_path());
    if (path.back() != '/') std::ofstream(full) << "2.0\n";
  }
  // Moving swaps the trees, so the one left behind is removed with the moved-from object.
  FakeSysfs(FakeSysfs&& other) noexcept { root_.swap(other.root_); }
  FakeSysfs& operator=(FakeSysfs&& other) noexcept {
    root_.swap(other.root_);
    return *this;
  }
  ~FakeSysfs() {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

}  // namespace tally::transport::test
