// SPDX-License-Identifier: Apache-2.0
// Inputs whose all-reduce has one exact answer, and that answer computed without Tally's kernels.
//
// Each rank's input is a pure function of (type, op, rank, nranks, seed, index), so every process
// can build any rank's input and the expected result by itself. Values are chosen so that every
// partial result, in any order, is exactly representable in the type:
//   - integers: arbitrary bits; sum and prod wrap (two's complement), min/max compare by sign;
//   - floating sum: integers in [-B, B], with B = (largest exact integer of the type) / nranks,
//     so every partial sum is an exact integer (float8 e5m2 at 8 ranks: {-1, 0, 1});
//   - floating prod: values in {1, 2, -1, 0.5}; with at most 8 ranks every partial product is a
//     power of two in [2^-8, 2^8], exact in every type including float8 subnormals;
//   - floating min/max: values from a small table of numbers exact in every type.
// Zero is always +0, so results compare bitwise. The expected result is computed in double or
// wrapping integer arithmetic and encoded by this file's own bit packing, independent of
// kernels/float_formats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/types.h"

namespace tally::driver {

// Largest number of ranks for which floating inputs stay exact.
inline constexpr int kMaxExactRanks = 8;

void fillInput(DataType type, ReduceOp op, int rank, int nranks, uint64_t seed, size_t count,
               void* out);
void fillExpected(DataType type, ReduceOp op, int nranks, uint64_t seed, size_t count, void* out);

// Elements whose bytes differ. When first_bad is non-null it receives the first such index.
size_t countMismatches(DataType type, const void* got, const void* expected, size_t count,
                       size_t* first_bad = nullptr);

// The splitmix64 finalizer: a cheap, well-spread hash of a 64-bit value (seeds, indices).
uint64_t splitmix64(uint64_t x);

// FNV-1a, for comparing outputs across processes through the Store.
uint64_t hashBytes(const void* data, size_t bytes);

// "elem 12: got 0x3c00 expected 0x4000" for a failure message.
std::string describeElement(DataType type, const void* got, const void* expected, size_t index);

// Exact encoding of a value representable in the type (used by the reference and by tests).
void encodeExact(DataType type, double value, void* out);

}  // namespace tally::driver
