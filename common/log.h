// Logging. In plugin mode every line goes through the logger NCCL hands to init(), prefixed
// "NET/Tally"; elsewhere (tally-reducer, tools, tests) through a sink that writes to stderr in
// the same format. The level is checked before anything is formatted.
#pragma once

#include <cstdarg>

namespace tally::log {

enum class Level { kNone = 0, kWarn = 2, kInfo = 3, kTrace = 5 };

// Subsystem flags, numerically equal to NCCL's so they pass through unchanged.
enum Subsys : unsigned long {
  kInit = 0x1,
  kNet = 0x10,
  kColl = 0x2,
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
bool enabled(Level level);
void write(Level level, unsigned long subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace tally::log

#define TALLY_LOG_AT(lvl, subsys, ...)                                      \
  do {                                                                      \
    if (::tally::log::enabled(lvl))                                         \
      ::tally::log::write(lvl, subsys, __FILE__, __LINE__, __VA_ARGS__);    \
  } while (0)
#define TALLY_WARN(...) TALLY_LOG_AT(::tally::log::Level::kWarn, ::tally::log::kAll, __VA_ARGS__)
#define TALLY_INFO(subsys, ...) TALLY_LOG_AT(::tally::log::Level::kInfo, subsys, __VA_ARGS__)
#define TALLY_TRACE(subsys, ...) TALLY_LOG_AT(::tally::log::Level::kTrace, subsys, __VA_ARGS__)
