// SPDX-License-Identifier: Apache-2.0
// Shared by the fuzz targets: a property check that aborts (so libFuzzer saves the input and the
// replay test fails), and a reader that cuts typed fields from the fuzzer's bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

// Checks a property of the code under test. A violation prints what broke and aborts.
#define TALLY_FUZZ_CHECK(cond, ...)                                                           \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "fuzz property failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                      \
      std::fprintf(stderr, "\n");                                                             \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

namespace tally::fuzz {

// Reads little-endian integers and byte runs from the front of the input. Past the end it yields
// zeros and empty runs, so a short input is still a valid (if boring) one.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  template <typename T>
  T take() {
    static_assert(std::is_integral_v<T>);
    std::make_unsigned_t<T> v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      uint8_t b = pos_ < size_ ? data_[pos_++] : 0;
      v |= static_cast<std::make_unsigned_t<T>>(b) << (8 * i);
    }
    return static_cast<T>(v);
  }
  // Up to n bytes (fewer at the end); *got says how many.
  const uint8_t* takeBytes(size_t n, size_t* got) {
    const uint8_t* p = data_ + pos_;
    *got = n < remaining() ? n : remaining();
    pos_ += *got;
    return p;
  }
  std::string takeString(size_t max) {
    size_t n = take<uint8_t>();
    if (n > max) n = max;
    size_t got = 0;
    const uint8_t* p = takeBytes(n, &got);
    return std::string(reinterpret_cast<const char*>(p), got);
  }
  size_t remaining() const { return size_ - pos_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace tally::fuzz

// The entry point every target defines (libFuzzer's name), called by libFuzzer or by the replay
// driver (replay_main.cc).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
