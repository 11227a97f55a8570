// SPDX-License-Identifier: Apache-2.0
// Replays fuzz inputs without libFuzzer: runs LLVMFuzzerTestOneInput on every file named on the
// command line or found in a directory named there (sorted, not recursive). This is how the seed
// corpus and every saved crash (test/system/fuzz/regressions/<target>/) run in the normal g++ build and
// `make test`. A missing directory is skipped with a note; no input at all is a failure, so the
// test cannot pass by finding nothing.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"

// The session target checks the server after every input when this is defined.
extern "C" const int tally_fuzz_replaying = 1;

namespace {

bool replayFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
  // A copy of exactly the input's size, so ASan sees any read past its end.
  std::unique_ptr<uint8_t[]> exact(new uint8_t[bytes.size()]);
  std::copy(bytes.begin(), bytes.end(), exact.get());
  LLVMFuzzerTestOneInput(exact.get(), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path arg(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(arg, ec)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        if (!replayFile(f)) return 1;
        ++count;
      }
    } else if (std::filesystem::exists(arg, ec)) {
      if (!replayFile(arg)) return 1;
      ++count;
    } else {
      std::fprintf(stderr, "replay: %s does not exist, skipped\n", argv[i]);
    }
  }
  std::printf("replay: %zu inputs ran without a failure\n", count);
  return count > 0 ? 0 : 1;
}
