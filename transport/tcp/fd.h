// SPDX-License-Identifier: Apache-2.0
// The TCP backend names the descriptor owner (common/fd.h) as its own.
#pragma once

#include "common/fd.h"

namespace tally::transport::tcp {

using ::tally::Fd;

}  // namespace tally::transport::tcp
