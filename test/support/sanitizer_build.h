// SPDX-License-Identifier: Apache-2.0
// Whether this test program was built with ThreadSanitizer, for the run lengths and time bounds
// that allow for its instrumented processes, which run several times slower than the normal
// build's (GCC defines __SANITIZE_THREAD__, clang answers __has_feature).
#pragma once

namespace tally::test {

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#else
inline constexpr bool kThreadSanitizer = false;
#endif

}  // namespace tally::test
