#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <cstring>

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

void stderrSink(Level level, unsigned long, const char* file, int line, const char* message) {
  const char* base = std::strrchr(file, '/');
  std::fprintf(stderr, "tally %s %s:%d %s\n", levelName(level), base ? base + 1 : file, line,
               message);
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
