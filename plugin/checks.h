// Argument checks shared by the net and CollNet entry points.
#pragma once

#include <string>

#include "common/status.h"
#include "plugin/state.h"

namespace tally::plugin {

// The plugin state, or kInternal when no init has succeeded yet.
inline Status loadedState(PluginState** out) {
  *out = PluginState::globalIfLoaded();
  if (*out == nullptr) return Status::internal("called before a successful init");
  return Status::ok();
}

inline Status checkPointer(const void* p, const char* what) {
  if (p == nullptr) return Status::internal(std::string(what) + " is NULL");
  return Status::ok();
}

}  // namespace tally::plugin
