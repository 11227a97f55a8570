// The one visibility marker: the library is built with -fvisibility=hidden and a version script,
// and only the versioned tables carry TALLY_EXPORT.
#pragma once

#define TALLY_EXPORT __attribute__((visibility("default")))
