#include "plugin/logger.h"

#include <atomic>

#include "common/log.h"

namespace tally::plugin {
namespace {

std::atomic<ncclDebugLogger_t> g_logger{nullptr};

void ncclSink(log::Level level, unsigned long subsys, const char* file, int line,
              const char* message) {
  ncclDebugLogger_t logger = g_logger.load();
  if (logger == nullptr) {
    log::stderrSink(level, subsys, file, line, message);
    return;
  }
  switch (level) {
    case log::Level::kWarn:
      logger(NCCL_LOG_WARN, static_cast<unsigned long>(NCCL_ALL), file, line, "NET/Tally : %s",
             message);
      break;
    case log::Level::kTrace:
      logger(NCCL_LOG_TRACE, subsys, file, line, "NET/Tally : %s", message);
      break;
    default:
      logger(NCCL_LOG_INFO, subsys, file, line, "NET/Tally : %s", message);
      break;
  }
}

}  // namespace

void installNcclLogger(ncclDebugLogger_t logger) {
  if (logger == nullptr) return;
  g_logger.store(logger);
  log::setSink(&ncclSink, log::Level::kInfo);
}

}  // namespace tally::plugin
