// SPDX-License-Identifier: Apache-2.0
// Private to tally_kernels: the element conversions and the block loops behind reduce().
//
// This header is compiled once per instruction set: kernels_generic.cc, kernels_avx2.cc and
// kernels_avx512.cc include it with different -m flags, and float_formats.cc includes it for the
// scalar conversions. Everything below the entry-point declarations sits in an anonymous
// namespace on purpose: each including file gets its own private copy, so the linker can never
// merge an AVX-512 copy of an inline function into the generic path (an ODR trap that would
// crash older CPUs). For the same reason the loops call nothing from the standard library that
// could be emitted out of line; only memcpy, which the compiler treats as a builtin.
//
// Everything here is written so that -O3 vectorizes it: branch-free conversions (selects, not
// ifs), memcpy loads and stores (no alignment assumed, no aliasing UB), and fixed-trip inner
// loops over the sources.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "common/types.h"

namespace tally::kernels_detail {

// One entry per compiled instruction set; same contract as tally::reduce().
void reduceGeneric(DataType type, ReduceOp op, void* dst, const void* const* srcs, int nsrcs,
                   size_t count);
void reduceAvx2(DataType type, ReduceOp op, void* dst, const void* const* srcs, int nsrcs,
                size_t count);
void reduceAvx512(DataType type, ReduceOp op, void* dst, const void* const* srcs, int nsrcs,
                  size_t count);

namespace {

inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// ---------------------------------------------------------------------------------------------
// Widening. Each format's exponent and mantissa are moved into the top of a float32's fields
// and the result is scaled by 2^(127 - bias). The multiply is exact, and it also turns the
// format's subnormals (a float32 subnormal after the shift) into the right normal float32.
// Exponent-all-ones codes are patched afterwards. This relies on the default floating-point
// environment (no flush-to-zero / denormals-are-zero), as does all of reduce().

inline float decodeHalf(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t mag = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const uint32_t scaled = bitsOf(floatOf(mag) * 0x1p112f);
  // Infinity and NaN: exponent all ones, mantissa (NaN payload) kept as is.
  const uint32_t special = mag | 0x7f800000u;
  return floatOf(((h & 0x7c00u) == 0x7c00u ? special : scaled) | sign);
}

inline float decodeBfloat16(uint16_t b) { return floatOf(static_cast<uint32_t>(b) << 16); }

inline float decodeE4m3(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t mag = static_cast<uint32_t>(v & 0x7fu) << 20;
  const uint32_t scaled = bitsOf(floatOf(mag) * 0x1p120f);
  // S.1111.111 is the only NaN; there is no infinity.
  return floatOf(((v & 0x7fu) == 0x7fu ? 0x7fc00000u : scaled) | sign);
}

// E5M2 is the top byte of a binary16 with the same meaning, so widening goes through it.
inline float decodeE5m2(uint8_t v) { return decodeHalf(static_cast<uint16_t>(v << 8)); }

// ---------------------------------------------------------------------------------------------
// Narrowing, round to nearest even, for a format with kMant mantissa bits and exponent bias
// kBias. `mag` is the float32 bit pattern of a non-NaN magnitude (sign cleared). Returns the
// format's magnitude code with no overflow handling: results past the largest finite value come
// out as larger codes (or garbage for huge inputs) and each caller clamps them.
template <int kMant, int kBias>
inline uint32_t roundMagnitude(uint32_t mag) {
  constexpr int kShift = 23 - kMant;
  // Normal results: add just under half an ulp, plus one more when the kept lsb is odd, then
  // truncate; a carry out of the mantissa correctly bumps the exponent.
  uint32_t normal = (mag + ((1u << (kShift - 1)) - 1u) + ((mag >> kShift) & 1u)) >> kShift;
  normal -= static_cast<uint32_t>(127 - kBias) << kMant;
  // Subnormal results: adding 2^(24 - bias - mant) makes the float32 unit in the last place
  // equal the format's subnormal step, so the FPU does the rounding (to nearest even) and the
  // low bits of the sum are the code. A result of 2^kMant is the smallest normal, also right.
  constexpr float kMagic = static_cast<float>(1ull << (24 - kBias - kMant + 40)) * 0x1p-40f;
  const uint32_t subnormal = bitsOf(floatOf(mag) + kMagic) - bitsOf(kMagic);
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(127 + 1 - kBias) << 23;
  return mag < kMinNormal ? subnormal : normal;
}

inline uint32_t minU32(uint32_t a, uint32_t b) { return a < b ? a : b; }

// IEEE binary16: overflow rounds to infinity; NaN stays NaN (quiet bit set, top payload bits
// kept, the same answer F16C's vcvtps2ph gives).
inline uint16_t encodeHalf(float f) {
  const uint32_t u = bitsOf(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t mag = u & 0x7fffffffu;
  const uint32_t finite = minU32(roundMagnitude<10, 15>(mag), 0x7c00u);
  const uint32_t nan = 0x7e00u | ((mag >> 13) & 0x3ffu);
  return static_cast<uint16_t>((mag > 0x7f800000u ? nan : finite) | sign);
}

// bfloat16 is the top half of a float32: rounding is one add. Overflow carries into the
// exponent and lands on infinity, as IEEE wants. NaN keeps its top payload bits, made quiet.
inline uint16_t encodeBfloat16(float f) {
  const uint32_t u = bitsOf(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

// E4M3 (OCP "FN"): no infinity. Anything that rounds past 448 (0x7e), infinities included,
// saturates to +-448; NaN becomes S.1111.111.
inline uint8_t encodeE4m3(float f) {
  const uint32_t u = bitsOf(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t mag = u & 0x7fffffffu;
  const uint32_t finite = minU32(roundMagnitude<3, 7>(mag), 0x7eu);
  return static_cast<uint8_t>((mag > 0x7f800000u ? 0x7fu : finite) | sign);
}

// E5M2: infinities stay infinite, finite values that round past 57344 (0x7b) saturate to it,
// NaN becomes S.11111.10.
inline uint8_t encodeE5m2(float f) {
  const uint32_t u = bitsOf(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t mag = u & 0x7fffffffu;
  const uint32_t finite = minU32(roundMagnitude<2, 15>(mag), 0x7bu);
  const uint32_t code = mag > 0x7f800000u ? 0x7eu : (mag == 0x7f800000u ? 0x7cu : finite);
  return static_cast<uint8_t>(code | sign);
}

// ---------------------------------------------------------------------------------------------
// Element traits: Mem is what lives in the buffers, Acc what the arithmetic runs in.

template <class T>
struct NativeType {
  using Mem = T;
  using Acc = T;
  static Acc load(Mem m) { return m; }
  static Mem store(Acc a) { return a; }
};

struct HalfType {
  using Mem = uint16_t;
  using Acc = float;
  static Acc load(Mem m) { return decodeHalf(m); }
  static Mem store(Acc a) { return encodeHalf(a); }
};

struct Bfloat16Type {
  using Mem = uint16_t;
  using Acc = float;
  static Acc load(Mem m) { return decodeBfloat16(m); }
  static Mem store(Acc a) { return encodeBfloat16(a); }
};

struct E4m3Type {
  using Mem = uint8_t;
  using Acc = float;
  static Acc load(Mem m) { return decodeE4m3(m); }
  static Mem store(Acc a) { return encodeE4m3(a); }
};

struct E5m2Type {
  using Mem = uint8_t;
  using Acc = float;
  static Acc load(Mem m) { return decodeE5m2(m); }
  static Mem store(Acc a) { return encodeE5m2(a); }
};

// ---------------------------------------------------------------------------------------------
// Operations. Integer sum and prod run in the unsigned type of the same width, so overflow
// wraps without UB (the conversion back to the signed type is modular since C++20). max and
// min pick the second operand only when it is strictly better or NaN, so a NaN anywhere wins
// and on a tie (including -0 vs +0) the earlier operand is kept.

template <class T>
using UnsignedOf = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                               std::type_identity<T>>::type;

struct SumOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<UnsignedOf<T>>(a) + static_cast<UnsignedOf<T>>(b));
    } else {
      return a + b;
    }
  }
};

struct ProdOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      // 8-bit operands promote to int; 255 * 255 still fits, so no signed overflow there.
      return static_cast<T>(static_cast<UnsignedOf<T>>(a) * static_cast<UnsignedOf<T>>(b));
    } else {
      return a * b;
    }
  }
};

struct MaxOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return ((a < b) | (b != b)) ? b : a;  // | not ||: no branch, so it vectorizes
    } else {
      return a < b ? b : a;
    }
  }
};

struct MinOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return ((b < a) | (b != b)) ? b : a;
    } else {
      return b < a ? b : a;
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Block loops. reduce() works through the buffers in blocks whose accumulator (kBlockBytes)
// stays in L1: the first pass combines up to four sources into it, middle passes fold in four
// more at a time, and the last pass folds the remaining zero to four sources and stores to dst.
// Since dst is written only in the last pass, after src0's block was read, dst may equal src0.

constexpr size_t kBlockBytes = 8192;
constexpr int kMaxPerPass = 4;

template <class Mem>
inline Mem loadAt(const unsigned char* p, size_t i) {
  Mem m;
  std::memcpy(&m, p + i * sizeof(Mem), sizeof(Mem));
  return m;
}

template <class Mem>
inline void storeAt(unsigned char* p, size_t i, Mem m) {
  std::memcpy(p + i * sizeof(Mem), &m, sizeof(Mem));
}

inline const unsigned char* bytePtr(const void* p, size_t byte_offset) {
  return static_cast<const unsigned char*>(p) + byte_offset;
}

// a op s[kFirst][i] op ... op s[kLast][i], written as a fold over constant indices rather than
// an inner loop: GCC reliably vectorizes straight-line bodies, not nested loops with selects.
template <class Tr, class Op, size_t... kIdx>
inline typename Tr::Acc foldIn(typename Tr::Acc a, [[maybe_unused]] const unsigned char* const* p,
                               [[maybe_unused]] size_t i,
                               std::index_sequence<kIdx...>) {
  ((a = Op::apply(a, Tr::load(loadAt<typename Tr::Mem>(p[kIdx], i)))), ...);
  return a;
}

// acc[i] = s[0][i] op ... op s[K-1][i]
template <class Tr, class Op, int K>
void firstPass(typename Tr::Acc* __restrict acc, const void* const* srcs, size_t off, size_t n) {
  using Mem = typename Tr::Mem;
  const unsigned char* p[K];
  for (int k = 0; k < K; ++k) p[k] = bytePtr(srcs[k], off * sizeof(Mem));
  for (size_t i = 0; i < n; ++i) {
    const typename Tr::Acc a0 = Tr::load(loadAt<Mem>(p[0], i));
    acc[i] = foldIn<Tr, Op>(a0, p + 1, i, std::make_index_sequence<K - 1>());
  }
}

// acc[i] = acc[i] op s[0][i] op ... op s[K-1][i]
template <class Tr, class Op, int K>
void foldPass(typename Tr::Acc* __restrict acc, const void* const* srcs, size_t off, size_t n) {
  using Mem = typename Tr::Mem;
  const unsigned char* p[K];
  for (int k = 0; k < K; ++k) p[k] = bytePtr(srcs[k], off * sizeof(Mem));
  for (size_t i = 0; i < n; ++i) {
    acc[i] = foldIn<Tr, Op>(acc[i], p, i, std::make_index_sequence<K>());
  }
}

// dst[i] = store(acc[i] op s[0][i] op ... op s[K-1][i]). The caller guarantees dst overlaps
// none of s[0..K-1] (only src0 may alias dst, and src0 is never a last-pass source).
template <class Tr, class Op, int K>
void lastPass(void* dst, const typename Tr::Acc* __restrict acc, const void* const* srcs,
              size_t off, size_t n) {
  using Mem = typename Tr::Mem;
  unsigned char* __restrict d = static_cast<unsigned char*>(dst) + off * sizeof(Mem);
  const unsigned char* p[K > 0 ? K : 1];
  for (int k = 0; k < K; ++k) p[k] = bytePtr(srcs[k], off * sizeof(Mem));
  for (size_t i = 0; i < n; ++i) {
    storeAt<Mem>(d, i, Tr::store(foldIn<Tr, Op>(acc[i], p, i, std::make_index_sequence<K>())));
  }
}

// Narrow floats: converting is the expensive part, so widening and narrowing get loops of their
// own (replaced by F16C instructions for float16 where the build has them) and the arithmetic
// runs on float32 blocks.
template <class Tr>
void widenBlock(float* __restrict out, const void* src, size_t off, size_t n) {
  using Mem = typename Tr::Mem;
  const unsigned char* p = bytePtr(src, off * sizeof(Mem));
  for (size_t i = 0; i < n; ++i) out[i] = Tr::load(loadAt<Mem>(p, i));
}

template <class Tr>
void narrowBlock(void* dst, const float* __restrict in, size_t off, size_t n) {
  using Mem = typename Tr::Mem;
  unsigned char* __restrict d = static_cast<unsigned char*>(dst) + off * sizeof(Mem);
  for (size_t i = 0; i < n; ++i) storeAt<Mem>(d, i, Tr::store(in[i]));
}

#if defined(__F16C__)
// vcvtph2ps is exact; vcvtps2ph with round-to-nearest-even gives the same bits as encodeHalf
// (overflow to infinity, NaN made quiet with its top payload bits), which the tail uses.
template <>
void widenBlock<HalfType>(float* __restrict out, const void* src, size_t off, size_t n) {
  const unsigned char* p = bytePtr(src, off * sizeof(uint16_t));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = decodeHalf(loadAt<uint16_t>(p, i));
}

template <>
void narrowBlock<HalfType>(void* dst, const float* __restrict in, size_t off, size_t n) {
  unsigned char* d = static_cast<unsigned char*>(dst) + off * sizeof(uint16_t);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 2 * i), h);
  }
  for (; i < n; ++i) storeAt<uint16_t>(d, i, encodeHalf(in[i]));
}
#endif

template <class Op>
void foldFloats(float* __restrict acc, const float* __restrict x, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = Op::apply(acc[i], x[i]);
}

template <class Tr, class Op>
void reduceNarrow(void* dst, const void* const* srcs, int nsrcs, size_t count) {
  constexpr size_t kBlock = kBlockBytes / sizeof(float);
  alignas(64) float acc[kBlock];
  alignas(64) float widened[kBlock];
  for (size_t off = 0; off < count; off += kBlock) {
    const size_t n = count - off < kBlock ? count - off : kBlock;
    widenBlock<Tr>(acc, srcs[0], off, n);
    for (int k = 1; k < nsrcs; ++k) {
      widenBlock<Tr>(widened, srcs[k], off, n);
      foldFloats<Op>(acc, widened, n);
    }
    narrowBlock<Tr>(dst, acc, off, n);
  }
}

template <class Tr, class Op>
void reduceTyped(void* dst, const void* const* srcs, int nsrcs, size_t count) {
  using Acc = typename Tr::Acc;
  if constexpr (!std::is_same_v<typename Tr::Mem, Acc>) {
    reduceNarrow<Tr, Op>(dst, srcs, nsrcs, count);
    return;
  }
  constexpr size_t kBlock = kBlockBytes / sizeof(Acc);
  alignas(64) Acc acc[kBlock];
  const int first = nsrcs < kMaxPerPass ? nsrcs : kMaxPerPass;
  for (size_t off = 0; off < count; off += kBlock) {
    const size_t n = count - off < kBlock ? count - off : kBlock;
    switch (first) {
      case 1: firstPass<Tr, Op, 1>(acc, srcs, off, n); break;
      case 2: firstPass<Tr, Op, 2>(acc, srcs, off, n); break;
      case 3: firstPass<Tr, Op, 3>(acc, srcs, off, n); break;
      default: firstPass<Tr, Op, 4>(acc, srcs, off, n); break;
    }
    int next = first;
    while (nsrcs - next > kMaxPerPass) {
      foldPass<Tr, Op, kMaxPerPass>(acc, srcs + next, off, n);
      next += kMaxPerPass;
    }
    switch (nsrcs - next) {
      case 0: lastPass<Tr, Op, 0>(dst, acc, srcs + next, off, n); break;
      case 1: lastPass<Tr, Op, 1>(dst, acc, srcs + next, off, n); break;
      case 2: lastPass<Tr, Op, 2>(dst, acc, srcs + next, off, n); break;
      case 3: lastPass<Tr, Op, 3>(dst, acc, srcs + next, off, n); break;
      default: lastPass<Tr, Op, 4>(dst, acc, srcs + next, off, n); break;
    }
  }
}

template <class Tr>
void reduceOp(ReduceOp op, void* dst, const void* const* srcs, int nsrcs, size_t count) {
  switch (op) {
    case ReduceOp::kSum: reduceTyped<Tr, SumOp>(dst, srcs, nsrcs, count); return;
    case ReduceOp::kProd: reduceTyped<Tr, ProdOp>(dst, srcs, nsrcs, count); return;
    case ReduceOp::kMax: reduceTyped<Tr, MaxOp>(dst, srcs, nsrcs, count); return;
    case ReduceOp::kMin: reduceTyped<Tr, MinOp>(dst, srcs, nsrcs, count); return;
  }
}

// The body of every reduce<Isa>() entry point. Arguments were validated by tally::reduce().
inline void reduceAny(DataType type, ReduceOp op, void* dst, const void* const* srcs, int nsrcs,
                      size_t count) {
  switch (type) {
    case DataType::kInt8: reduceOp<NativeType<int8_t>>(op, dst, srcs, nsrcs, count); return;
    case DataType::kUint8: reduceOp<NativeType<uint8_t>>(op, dst, srcs, nsrcs, count); return;
    case DataType::kInt32: reduceOp<NativeType<int32_t>>(op, dst, srcs, nsrcs, count); return;
    case DataType::kUint32: reduceOp<NativeType<uint32_t>>(op, dst, srcs, nsrcs, count); return;
    case DataType::kInt64: reduceOp<NativeType<int64_t>>(op, dst, srcs, nsrcs, count); return;
    case DataType::kUint64: reduceOp<NativeType<uint64_t>>(op, dst, srcs, nsrcs, count); return;
    case DataType::kFloat16: reduceOp<HalfType>(op, dst, srcs, nsrcs, count); return;
    case DataType::kFloat32: reduceOp<NativeType<float>>(op, dst, srcs, nsrcs, count); return;
    case DataType::kFloat64: reduceOp<NativeType<double>>(op, dst, srcs, nsrcs, count); return;
    case DataType::kBfloat16: reduceOp<Bfloat16Type>(op, dst, srcs, nsrcs, count); return;
    case DataType::kFloat8e4m3: reduceOp<E4m3Type>(op, dst, srcs, nsrcs, count); return;
    case DataType::kFloat8e5m2: reduceOp<E5m2Type>(op, dst, srcs, nsrcs, count); return;
  }
}

}  // namespace
}  // namespace tally::kernels_detail
