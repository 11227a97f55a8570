// SPDX-License-Identifier: Apache-2.0
// The reduction loops compiled for the avx512 instruction set (flags in kernels/CMakeLists.txt).
#include "kernels/kernels_loops.h"

namespace tally::kernels_detail {

void reduceAvx512(DataType type, ReduceOp op, void* dst, const void* const* srcs, int nsrcs,
                  size_t count) {
  reduceAny(type, op, dst, srcs, nsrcs, count);
}

}  // namespace tally::kernels_detail
