// SPDX-License-Identifier: Apache-2.0
// Logging. In plugin mode every line goes through the logger NCCL hands to init(), prefixed
// "NET/Tally"; elsewhere (tally-reducer, tools, tests) through a sink that writes to stderr in
// the same format. The level is checked before anything is formatted.
#pragma once

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <mutex>
#include <string>

namespace tally::log {

enum class Level { kNone = 0, kWarn = 2, kInfo = 3, kTrace = 5 };

// Subsystem flags, numerically equal to NCCL's so they pass through unchanged.
enum Subsys : unsigned long {
  kInit = 0x1,
  kNet = 0x10,
  kColl = 0x2,
  kTuning = 0x40,
  kEnv = 0x80,
  kAll = ~0ul,
};

// Receives a fully formatted message (no trailing newline).
using Sink = void (*)(Level level, unsigned long subsys, const char* file, int line,
                      const char* message);

// Installs `sink` and the highest level it wants. Thread-safe; takes effect for later lines.
void setSink(Sink sink, Level max_level);
// The stderr sink used outside plugin mode: "tally WARN file:line message".
void stderrSink(Level level, unsigned long subsys, const char* file, int line,
                const char* message);
// The same line after a UTC timestamp to the millisecond, for long-running processes whose
// output no one else stamps (the reducer): "2026-12-06T22:10:05.123Z tally WARN file:line ...".
void timestampedStderrSink(Level level, unsigned long subsys, const char* file, int line,
                           const char* message);
// A line as the stderr sinks write it, without its newline; `unix_ms` < 0: no timestamp.
std::string formatLine(Level level, const char* file, int line, const char* message,
                       int64_t unix_ms);
bool enabled(Level level);
void write(Level level, unsigned long subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

// One kind of WARN line that a peer can cause as often as it likes (a refused or dropped
// connection): at most one line per interval is written; the lines withheld meanwhile are
// counted, and the next line written says how many ("(and 41 more like it since the last such
// line)").
// Keep one per kind of event (per server or listener, so tests that start their own see their
// first line). Thread-safe.
class RateLimitedLog {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RateLimitedLog(std::chrono::milliseconds interval = std::chrono::seconds(1))
      : interval_(interval) {}

  // Whether a line at `now` may be written. True: *suppressed is the number withheld since the
  // last one written (and the count restarts). False: this one is counted as withheld.
  bool admit(Clock::time_point now, uint64_t* suppressed);
  // admit(Clock::now()) for a caller that writes its own line: true with *count the events this
  // line stands for (itself and those withheld since the last one).
  bool note(uint64_t* count) {
    uint64_t suppressed = 0;
    if (!admit(Clock::now(), &suppressed)) return false;
    *count = suppressed + 1;
    return true;
  }
  // A WARN line through admit(Clock::now()), with the withheld count appended when non-zero.
  void warn(const char* file, int line, const char* fmt, ...) __attribute__((format(printf, 4, 5)));

 private:
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  bool written_ = false;  // a line was written once (the first one always is)
  Clock::time_point last_{};
  uint64_t suppressed_ = 0;
};

}  // namespace tally::log

#define TALLY_LOG_AT(lvl, subsys, ...)                                      \
  do {                                                                      \
    if (::tally::log::enabled(lvl))                                         \
      ::tally::log::write(lvl, subsys, __FILE__, __LINE__, __VA_ARGS__);    \
  } while (0)
#define TALLY_WARN(...) TALLY_LOG_AT(::tally::log::Level::kWarn, ::tally::log::kAll, __VA_ARGS__)
#define TALLY_INFO(subsys, ...) TALLY_LOG_AT(::tally::log::Level::kInfo, subsys, __VA_ARGS__)
// A WARN line through a RateLimitedLog `limiter`.
#define TALLY_WARN_LIMITED(limiter, ...)                                   \
  do {                                                                      \
    if (::tally::log::enabled(::tally::log::Level::kWarn))                  \
      (limiter).warn(__FILE__, __LINE__, __VA_ARGS__);                      \
  } while (0)
#define TALLY_TRACE(subsys, ...) TALLY_LOG_AT(::tally::log::Level::kTrace, subsys, __VA_ARGS__)
