// SPDX-License-Identifier: Apache-2.0
// reduceMany(): reduce() with the narrow floating-point types done in one fused pass.
//
// reduce() (kernels/kernels.h) widens float16, bfloat16 and the float8 formats one input at a
// time into a float32 block in L1 and folds that block into an accumulator, input after input.
// That costs two extra L1 round trips per input element, and on buffers out of cache it reads
// the inputs one after another in 2-4 KiB runs instead of as parallel streams, which the
// hardware prefetchers follow poorly; tally-kernels-bench shows the 16-bit sum of 8 inputs
// below half of memcpy bandwidth. reduceMany() instead loads a few vectors from every input in
// turn, widens them in registers, combines and narrows once: each input is one sequential
// stream and nothing but the output is stored.
//
// Contract: exactly reduce()'s (argument rules, dst == srcs[0] allowed, left-to-right order,
// rounding once to the type, NaN and overflow rules), and the same results bit for bit, NaN
// payloads included (test/kernels/kernels_many_test.cc holds it to that). The fused path covers
// float16, bfloat16, float8 e4m3 and e5m2 with every op on CPUs with AVX2 (+FMA, F16C) or AVX-512
// (F, BW, VL, DQ); every other type, and every other CPU, is passed to reduce() unchanged.
// Thread-safe; no state beyond the instruction set chosen at first use.
#pragma once

#include <cstddef>

#include "common/types.h"
#include "kernels/kernels.h"

namespace tally {

void reduceMany(DataType type, ReduceOp op, void* dst, const void* const* srcs, int nsrcs,
                size_t count);

// reduceMany() on a given variant, for tests and benchmarks. kGeneric is reduceWithIsa(kGeneric)
// (there is no fused generic loop); an unsupported variant is logged and leaves dst untouched.
void reduceManyWithIsa(KernelIsa isa, DataType type, ReduceOp op, void* dst,
                       const void* const* srcs, int nsrcs, size_t count);

// True when reduceMany() has a fused loop for (isa, type, op), i.e. does not just call reduce().
bool reduceManyIsFused(KernelIsa isa, DataType type, ReduceOp op);

}  // namespace tally
