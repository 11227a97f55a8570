// SPDX-License-Identifier: Apache-2.0
// Reduction kernels: pure functions over host memory, type-erased at the call and dispatched
// once per call to a typed, vectorized loop.
//
// Semantics (documented in docs/reduction.md and checked against a scalar reference):
//   - Inputs are combined left to right: ((s0 op s1) op s2) ... in the order given, which the
//     reducer makes rank order, so results do not depend on arrival order.
//   - Integers wrap on overflow for sum and prod (two's complement), like NCCL on the GPU.
//   - float16, bfloat16 and both float8 formats are widened to float32, combined in float32 and
//     rounded once to the type (round to nearest even). float8 e4m3 has no infinity: results
//     beyond its range saturate to +-448, NaN stays NaN; e5m2 keeps infinities and saturates
//     finite overflow to +-57344.
//   - max and min propagate NaN: if any input is NaN the result is NaN.
//   - dst may equal srcs[0]; otherwise buffers must not overlap. No alignment is required.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/types.h"

namespace tally {

// dst[i] = srcs[0][i] op ... op srcs[nsrcs-1][i] for i < count. nsrcs >= 1.
// max(a, b) is b only when a < b or b is NaN, and min(a, b) is b only when b < a or b is NaN:
// NaN wins, and on a tie the earlier input is kept, so max(-0, +0) = -0 and max(+0, -0) = +0
// (likewise for min). Integer max and min compare as the signed or unsigned type.
// count == 0 does nothing. A contract violation (nsrcs < 1, a type or op out of range) is logged
// and leaves dst untouched. Thread-safe: no state beyond the ISA chosen at first use.
void reduce(DataType type, ReduceOp op, void* dst, const void* const* srcs, int nsrcs,
            size_t count);

// Name of the instruction set the kernels dispatch to on this CPU ("avx512", "avx2", "generic").
const char* reduceKernelIsa();

// The compiled variants of the loops, for tests and benchmarks that compare them. All give
// bit-identical results (NaN payloads included); they differ only in speed.
enum class KernelIsa : uint8_t { kGeneric = 0, kAvx2 = 1, kAvx512 = 2 };
inline constexpr int kNumKernelIsas = 3;

const char* kernelIsaName(KernelIsa isa);
// True when `isa` was compiled in and this CPU (and OS) can run it. kGeneric is always true.
bool kernelIsaSupported(KernelIsa isa);
// reduce() on a given variant. An unsupported variant is logged and leaves dst untouched.
void reduceWithIsa(KernelIsa isa, DataType type, ReduceOp op, void* dst, const void* const* srcs,
                   int nsrcs, size_t count);

}  // namespace tally
