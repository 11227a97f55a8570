// SPDX-License-Identifier: Apache-2.0
#include "common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

namespace tally::log {
namespace {

std::atomic<Sink> g_sink{&stderrSink};
std::atomic<int> g_level{static_cast<int>(Level::kWarn)};

const char* levelName(Level level) {
  switch (level) {
    case Level::kWarn: return "WARN";
    case Level::kInfo: return "INFO";
    case Level::kTrace: return "TRACE";
    default: return "";
  }
}

}  // namespace

void setSink(Sink sink, Level max_level) {
  g_sink.store(sink ? sink : &stderrSink);
  g_level.store(static_cast<int>(max_level));
}

std::string formatLine(Level level, const char* file, int line, const char* message,
                       int64_t unix_ms) {
  const char* base = std::strrchr(file, '/');
  char stamp[40] = "";
  if (unix_ms >= 0) {
    const time_t secs = static_cast<time_t>(unix_ms / 1000);
    tm utc{};
    gmtime_r(&secs, &utc);
    char date[24];
    std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &utc);
    std::snprintf(stamp, sizeof(stamp), "%s.%03dZ ", date, static_cast<int>(unix_ms % 1000));
  }
  char text[1200];
  std::snprintf(text, sizeof(text), "%stally %s %s:%d %s", stamp, levelName(level),
                base ? base + 1 : file, line, message);
  return text;
}

void stderrSink(Level level, unsigned long, const char* file, int line, const char* message) {
  std::fprintf(stderr, "%s\n", formatLine(level, file, line, message, -1).c_str());
}

void timestampedStderrSink(Level level, unsigned long, const char* file, int line,
                           const char* message) {
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  std::fprintf(stderr, "%s\n", formatLine(level, file, line, message, now_ms).c_str());
}

bool enabled(Level level) { return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed); }

void write(Level level, unsigned long subsys, const char* file, int line, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  g_sink.load()(level, subsys, file, line, buf);
}

bool RateLimitedLog::admit(Clock::time_point now, uint64_t* suppressed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (written_ && now - last_ < interval_) {
    suppressed_++;
    return false;
  }
  written_ = true;
  last_ = now;
  *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

void RateLimitedLog::warn(const char* file, int line, const char* fmt, ...) {
  uint64_t suppressed = 0;
  if (!admit(Clock::now(), &suppressed)) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (suppressed == 0) {
    g_sink.load()(Level::kWarn, kAll, file, line, buf);
    return;
  }
  char out[1100];
  std::snprintf(out, sizeof(out), "%s (and %llu more like it since the last such line)", buf,
                static_cast<unsigned long long>(suppressed));
  g_sink.load()(Level::kWarn, kAll, file, line, out);
}

}  // namespace tally::log
