// SPDX-License-Identifier: Apache-2.0
// reduceMany(): fused multi-input loops for the narrow float types (contract in kernels_many.h).
//
// Both vector variants live in this one file: every function that touches a vector type or an
// intrinsic carries a target attribute for its instruction set instead of the file getting -m
// flags, so no instruction the CPU may lack is used outside a variant picked at run time (the
// same guarantee kernels/CMakeLists.txt gets from per-file flags). Each variant mirrors, lane by
// lane, the scalar conversions of kernels/kernels_loops.h, which is why the results are the
// same bits; the scalar tails call those conversions through kernels/float_formats.h.
#include "kernels/kernels_many.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/float_formats.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TALLY_MANY_X86 1
// GCC 12 reports its own AVX-512 intrinsics' deliberately undefined pass-through operands
// (_mm512_undefined_*) as maybe-uninitialized once they are inlined at -O3 (GCC bug 105593);
// the warning is about the header, not this code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define TALLY_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TALLY_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#else
#define TALLY_MANY_X86 0
#endif

namespace tally {
namespace {

using ManyFn = void (*)(void*, const void* const*, int, size_t);

inline const unsigned char* bytesOf(const void* p) { return static_cast<const unsigned char*>(p); }

// The formats, as tags for overloads, with their scalar conversions for the tails.
template <class Code, float (*kToFloat)(Code), Code (*kFromFloat)(float)>
struct Format {
  static constexpr size_t kBytes = sizeof(Code);
  static float load(const unsigned char* p) {
    Code c;
    std::memcpy(&c, p, sizeof(c));
    return kToFloat(c);
  }
  static void store(float f, unsigned char* p) {
    const Code c = kFromFloat(f);
    std::memcpy(p, &c, sizeof(c));
  }
};
struct Bf16 : Format<uint16_t, bfloat16ToFloat, floatToBfloat16> {};
struct Half : Format<uint16_t, halfToFloat, floatToHalf> {};
struct E4m3 : Format<uint8_t, fp8e4m3ToFloat, floatToFp8e4m3> {};
struct E5m2 : Format<uint8_t, fp8e5m2ToFloat, floatToFp8e5m2> {};

// reduce()'s operations on float32: NaN wins max and min, a tie keeps the earlier input.
template <ReduceOp kOp>
float applyScalar(float a, float b) {
  if constexpr (kOp == ReduceOp::kSum) {
    return a + b;
  } else if constexpr (kOp == ReduceOp::kProd) {
    return a * b;
  } else if constexpr (kOp == ReduceOp::kMax) {
    return ((a < b) | (b != b)) ? b : a;  // | not ||: no branch
  } else {
    return ((b < a) | (b != b)) ? b : a;
  }
}

// Elements [from, count) one at a time: what is left after the last whole vector step.
template <class F, ReduceOp kOp>
void scalarTail(unsigned char* d, const void* const* srcs, int nsrcs, size_t from, size_t count) {
  for (size_t i = from; i < count; ++i) {
    const size_t off = i * F::kBytes;
    float acc = F::load(bytesOf(srcs[0]) + off);
    for (int k = 1; k < nsrcs; ++k) acc = applyScalar<kOp>(acc, F::load(bytesOf(srcs[k]) + off));
    F::store(acc, d + off);
  }
}

// Vectors of float32 accumulated per source per step: more work in flight, and 64-256
// contiguous bytes from each input stream before moving to the next.
constexpr size_t kUnroll = 4;
// Float vectors one load of codes widens to: two for bfloat16 (see widen(Bf16, ...)).
template <class F>
constexpr size_t kPerLoad = std::is_same_v<F, Bf16> ? 2 : 1;
constexpr int32_t kTopHalf = static_cast<int32_t>(0xffff0000u);

// Round-to-nearest-even magic for a format's subnormals, as in kernels_loops.h: adding it makes
// the float32 ulp equal the format's subnormal step, 2^(24 - bias - mant).
template <int kMant, int kBias>
constexpr float kSubnormalMagic = static_cast<float>(1ull << (24 - kBias - kMant + 40)) * 0x1p-40f;
template <int kBias>
constexpr int32_t kMinNormalBits = (127 + 1 - kBias) << 23;

#if TALLY_MANY_X86

namespace avx2 {

constexpr size_t kLanes = 8;

TALLY_TARGET_AVX2 inline __m256i splat(int32_t v) { return _mm256_set1_epi32(v); }
TALLY_TARGET_AVX2 inline __m128i load64(const unsigned char* p) {
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
}
TALLY_TARGET_AVX2 inline __m128i load128(const unsigned char* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// bfloat16 is the top half of a float32, so one load of codes makes two float vectors, the
// even elements shifted up and the odd ones masked: no widening instruction. narrow() puts the
// two rounded top halves back together: no packing.
TALLY_TARGET_AVX2 inline void widen(Bf16, const unsigned char* p, __m256* out) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  out[0] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  out[1] = _mm256_castsi256_ps(_mm256_and_si256(v, splat(kTopHalf)));
}
TALLY_TARGET_AVX2 inline void widen(Half, const unsigned char* p, __m256* out) {
  *out = _mm256_cvtph_ps(load128(p));
}
// E5M2 is the top byte of a binary16; vcvtph2ps is exact, subnormals included.
TALLY_TARGET_AVX2 inline void widen(E5m2, const unsigned char* p, __m256* out) {
  *out = _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(load64(p)), 8));
}
TALLY_TARGET_AVX2 inline void widen(E4m3, const unsigned char* p, __m256* out) {
  const __m256i v = _mm256_cvtepu8_epi32(load64(p));
  const __m256i mag = _mm256_and_si256(v, splat(0x7f));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(v, splat(0x80)), 24);
  const __m256 scaled =
      _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(mag, 20)), _mm256_set1_ps(0x1p120f));
  const __m256i bits = _mm256_blendv_epi8(_mm256_castps_si256(scaled), splat(0x7fc00000),
                                          _mm256_cmpeq_epi32(mag, splat(0x7f)));
  *out = _mm256_castsi256_ps(_mm256_or_si256(bits, sign));
}

template <int kMant, int kBias>
TALLY_TARGET_AVX2 inline __m256i roundMagnitude(__m256i mag) {
  constexpr int kShift = 23 - kMant;
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(mag, kShift), splat(1));
  __m256i normal = _mm256_add_epi32(_mm256_add_epi32(mag, splat((1 << (kShift - 1)) - 1)), odd);
  normal = _mm256_sub_epi32(_mm256_srli_epi32(normal, kShift), splat((127 - kBias) << kMant));
  const __m256 magic = _mm256_set1_ps(kSubnormalMagic<kMant, kBias>);
  const __m256i subnormal =
      _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(mag), magic)),
                       _mm256_castps_si256(magic));
  return _mm256_blendv_epi8(normal, subnormal,
                            _mm256_cmpgt_epi32(splat(kMinNormalBits<kBias>), mag));
}

// The bfloat16 rounding of each lane in its top half (the bottom half is left over).
TALLY_TARGET_AVX2 inline __m256i roundedTop(__m256 f) {
  const __m256i u = _mm256_castps_si256(f);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), splat(1));
  const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(u, splat(0x7fff)), odd);
  const __m256i nan = _mm256_or_si256(u, splat(0x00400000));
  const __m256i is_nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(u, splat(0x7fffffff)), splat(0x7f800000));
  return _mm256_blendv_epi8(rounded, nan, is_nan);
}

// Format codes in the low bits of each 32-bit lane.
TALLY_TARGET_AVX2 inline __m256i codes(E4m3, __m256 f) {
  const __m256i u = _mm256_castps_si256(f);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(u, 24), splat(0x80));
  const __m256i mag = _mm256_and_si256(u, splat(0x7fffffff));
  const __m256i finite = _mm256_min_epu32(roundMagnitude<3, 7>(mag), splat(0x7e));
  const __m256i is_nan = _mm256_cmpgt_epi32(mag, splat(0x7f800000));
  return _mm256_or_si256(_mm256_blendv_epi8(finite, splat(0x7f), is_nan), sign);
}
TALLY_TARGET_AVX2 inline __m256i codes(E5m2, __m256 f) {
  const __m256i u = _mm256_castps_si256(f);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(u, 24), splat(0x80));
  const __m256i mag = _mm256_and_si256(u, splat(0x7fffffff));
  __m256i code = _mm256_min_epu32(roundMagnitude<2, 15>(mag), splat(0x7b));
  code = _mm256_blendv_epi8(code, splat(0x7c), _mm256_cmpeq_epi32(mag, splat(0x7f800000)));
  code = _mm256_blendv_epi8(code, splat(0x7e), _mm256_cmpgt_epi32(mag, splat(0x7f800000)));
  return _mm256_or_si256(code, sign);
}

// Eight 8-bit codes out of eight 32-bit lanes (values fit, so packing never clamps).
TALLY_TARGET_AVX2 inline void store8(__m256i c, unsigned char* p) {
  const __m256i bytes = _mm256_packus_epi16(_mm256_packus_epi32(c, c), _mm256_packus_epi32(c, c));
  const __m256i joined =
      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(joined));
}

TALLY_TARGET_AVX2 inline void narrow(Bf16, const __m256* in, unsigned char* p) {
  const __m256i even = _mm256_srli_epi32(roundedTop(in[0]), 16);
  const __m256i odd = _mm256_and_si256(roundedTop(in[1]), splat(kTopHalf));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm256_or_si256(even, odd));
}
TALLY_TARGET_AVX2 inline void narrow(E4m3, const __m256* in, unsigned char* p) {
  store8(codes(E4m3{}, *in), p);
}
TALLY_TARGET_AVX2 inline void narrow(E5m2, const __m256* in, unsigned char* p) {
  store8(codes(E5m2{}, *in), p);
}
// vcvtps2ph rounding to nearest even gives the bits encodeHalf does (kernels_loops.h).
TALLY_TARGET_AVX2 inline void narrow(Half, const __m256* in, unsigned char* p) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(*in, _MM_FROUND_TO_NEAREST_INT));
}

template <ReduceOp kOp>
TALLY_TARGET_AVX2 inline __m256 apply(__m256 a, __m256 b) {
  if constexpr (kOp == ReduceOp::kSum) {
    return _mm256_add_ps(a, b);
  } else if constexpr (kOp == ReduceOp::kProd) {
    return _mm256_mul_ps(a, b);
  } else {
    // b where it is better (a < b for max, b < a for min; false when either is NaN) or NaN.
    const __m256 better = kOp == ReduceOp::kMax ? _mm256_cmp_ps(a, b, _CMP_LT_OQ)
                                                : _mm256_cmp_ps(b, a, _CMP_LT_OQ);
    return _mm256_blendv_ps(a, b, _mm256_or_ps(better, _mm256_cmp_ps(b, b, _CMP_UNORD_Q)));
  }
}

template <class F, ReduceOp kOp>
TALLY_TARGET_AVX2 void fused(void* dst, const void* const* srcs, int nsrcs, size_t count) {
  constexpr size_t kPer = kPerLoad<F>, kLoads = kUnroll / kPer;  // loads per source per step
  constexpr size_t kLoad = kPer * kLanes * F::kBytes;            // bytes per load
  unsigned char* d = static_cast<unsigned char*>(dst);
  size_t i = 0;
  for (; i + kUnroll * kLanes <= count; i += kUnroll * kLanes) {
    const size_t off = i * F::kBytes;
    __m256 acc[kUnroll], x[kUnroll];
    const unsigned char* s = bytesOf(srcs[0]) + off;
    for (size_t j = 0; j < kLoads; ++j) widen(F{}, s + j * kLoad, acc + j * kPer);
    for (int k = 1; k < nsrcs; ++k) {
      s = bytesOf(srcs[k]) + off;
      for (size_t j = 0; j < kLoads; ++j) widen(F{}, s + j * kLoad, x + j * kPer);
      for (size_t v = 0; v < kUnroll; ++v) acc[v] = apply<kOp>(acc[v], x[v]);
    }
    for (size_t j = 0; j < kLoads; ++j) narrow(F{}, acc + j * kPer, d + off + j * kLoad);
  }
  scalarTail<F, kOp>(d, srcs, nsrcs, i, count);
}

}  // namespace avx2

namespace avx512 {

constexpr size_t kLanes = 16;

TALLY_TARGET_AVX512 inline __m512i splat(int32_t v) { return _mm512_set1_epi32(v); }
TALLY_TARGET_AVX512 inline __m128i load128(const unsigned char* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
TALLY_TARGET_AVX512 inline __m256i load256(const unsigned char* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

TALLY_TARGET_AVX512 inline void widen(Bf16, const unsigned char* p, __m512* out) {
  const __m512i v = _mm512_loadu_si512(p);
  out[0] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  out[1] = _mm512_castsi512_ps(_mm512_and_si512(v, splat(kTopHalf)));
}
TALLY_TARGET_AVX512 inline void widen(Half, const unsigned char* p, __m512* out) {
  *out = _mm512_cvtph_ps(load256(p));
}
TALLY_TARGET_AVX512 inline void widen(E5m2, const unsigned char* p, __m512* out) {
  *out = _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(load128(p)), 8));
}
TALLY_TARGET_AVX512 inline void widen(E4m3, const unsigned char* p, __m512* out) {
  const __m512i v = _mm512_cvtepu8_epi32(load128(p));
  const __m512i mag = _mm512_and_si512(v, splat(0x7f));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(v, splat(0x80)), 24);
  const __m512 scaled =
      _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(mag, 20)), _mm512_set1_ps(0x1p120f));
  const __m512i bits = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(mag, splat(0x7f)),
                                               _mm512_castps_si512(scaled), splat(0x7fc00000));
  *out = _mm512_castsi512_ps(_mm512_or_si512(bits, sign));
}

template <int kMant, int kBias>
TALLY_TARGET_AVX512 inline __m512i roundMagnitude(__m512i mag) {
  constexpr int kShift = 23 - kMant;
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(mag, kShift), splat(1));
  __m512i normal = _mm512_add_epi32(_mm512_add_epi32(mag, splat((1 << (kShift - 1)) - 1)), odd);
  normal = _mm512_sub_epi32(_mm512_srli_epi32(normal, kShift), splat((127 - kBias) << kMant));
  const __m512 magic = _mm512_set1_ps(kSubnormalMagic<kMant, kBias>);
  const __m512i subnormal =
      _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(mag), magic)),
                       _mm512_castps_si512(magic));
  return _mm512_mask_blend_epi32(_mm512_cmplt_epi32_mask(mag, splat(kMinNormalBits<kBias>)),
                                 normal, subnormal);
}

TALLY_TARGET_AVX512 inline __m512i roundedTop(__m512 f) {
  const __m512i u = _mm512_castps_si512(f);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), splat(1));
  const __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(u, splat(0x7fff)), odd);
  const __m512i nan = _mm512_or_si512(u, splat(0x00400000));
  const __mmask16 is_nan =
      _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, splat(0x7fffffff)), splat(0x7f800000));
  return _mm512_mask_blend_epi32(is_nan, rounded, nan);
}
TALLY_TARGET_AVX512 inline __m512i codes(E4m3, __m512 f) {
  const __m512i u = _mm512_castps_si512(f);
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 24), splat(0x80));
  const __m512i mag = _mm512_and_si512(u, splat(0x7fffffff));
  const __m512i finite = _mm512_min_epu32(roundMagnitude<3, 7>(mag), splat(0x7e));
  const __mmask16 is_nan = _mm512_cmpgt_epi32_mask(mag, splat(0x7f800000));
  return _mm512_or_si512(_mm512_mask_blend_epi32(is_nan, finite, splat(0x7f)), sign);
}
TALLY_TARGET_AVX512 inline __m512i codes(E5m2, __m512 f) {
  const __m512i u = _mm512_castps_si512(f);
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 24), splat(0x80));
  const __m512i mag = _mm512_and_si512(u, splat(0x7fffffff));
  __m512i code = _mm512_min_epu32(roundMagnitude<2, 15>(mag), splat(0x7b));
  code = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(mag, splat(0x7f800000)), code,
                                 splat(0x7c));
  code = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(mag, splat(0x7f800000)), code,
                                 splat(0x7e));
  return _mm512_or_si512(code, sign);
}

TALLY_TARGET_AVX512 inline void narrow(Bf16, const __m512* in, unsigned char* p) {
  const __m512i even = _mm512_srli_epi32(roundedTop(in[0]), 16);
  const __m512i odd = _mm512_and_si512(roundedTop(in[1]), splat(kTopHalf));
  _mm512_storeu_si512(p, _mm512_or_si512(even, odd));
}
TALLY_TARGET_AVX512 inline void narrow(E4m3, const __m512* in, unsigned char* p) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(codes(E4m3{}, *in)));
}
TALLY_TARGET_AVX512 inline void narrow(E5m2, const __m512* in, unsigned char* p) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(codes(E5m2{}, *in)));
}
TALLY_TARGET_AVX512 inline void narrow(Half, const __m512* in, unsigned char* p) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                      _mm512_cvtps_ph(*in, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

template <ReduceOp kOp>
TALLY_TARGET_AVX512 inline __m512 apply(__m512 a, __m512 b) {
  if constexpr (kOp == ReduceOp::kSum) {
    return _mm512_add_ps(a, b);
  } else if constexpr (kOp == ReduceOp::kProd) {
    return _mm512_mul_ps(a, b);
  } else {
    const __mmask16 better = kOp == ReduceOp::kMax ? _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
                                                   : _mm512_cmp_ps_mask(b, a, _CMP_LT_OQ);
    return _mm512_mask_blend_ps(better | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), a, b);
  }
}

template <class F, ReduceOp kOp>
TALLY_TARGET_AVX512 void fused(void* dst, const void* const* srcs, int nsrcs, size_t count) {
  constexpr size_t kPer = kPerLoad<F>, kLoads = kUnroll / kPer;  // loads per source per step
  constexpr size_t kLoad = kPer * kLanes * F::kBytes;            // bytes per load
  unsigned char* d = static_cast<unsigned char*>(dst);
  size_t i = 0;
  for (; i + kUnroll * kLanes <= count; i += kUnroll * kLanes) {
    const size_t off = i * F::kBytes;
    __m512 acc[kUnroll], x[kUnroll];
    const unsigned char* s = bytesOf(srcs[0]) + off;
    for (size_t j = 0; j < kLoads; ++j) widen(F{}, s + j * kLoad, acc + j * kPer);
    for (int k = 1; k < nsrcs; ++k) {
      s = bytesOf(srcs[k]) + off;
      for (size_t j = 0; j < kLoads; ++j) widen(F{}, s + j * kLoad, x + j * kPer);
      for (size_t v = 0; v < kUnroll; ++v) acc[v] = apply<kOp>(acc[v], x[v]);
    }
    for (size_t j = 0; j < kLoads; ++j) narrow(F{}, acc + j * kPer, d + off + j * kLoad);
  }
  scalarTail<F, kOp>(d, srcs, nsrcs, i, count);
}

}  // namespace avx512

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // TALLY_MANY_X86

template <class F, ReduceOp kOp>
ManyFn fusedFor([[maybe_unused]] KernelIsa isa) {
#if TALLY_MANY_X86
  if (isa == KernelIsa::kAvx512) return &avx512::fused<F, kOp>;
  if (isa == KernelIsa::kAvx2) return &avx2::fused<F, kOp>;
#endif
  return nullptr;
}

template <class F>
ManyFn fusedFor(KernelIsa isa, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return fusedFor<F, ReduceOp::kSum>(isa);
    case ReduceOp::kProd: return fusedFor<F, ReduceOp::kProd>(isa);
    case ReduceOp::kMax: return fusedFor<F, ReduceOp::kMax>(isa);
    case ReduceOp::kMin: return fusedFor<F, ReduceOp::kMin>(isa);
  }
  return nullptr;
}

// nullptr: no fused loop, reduce() does the work (or reports the bad argument).
ManyFn fusedFor(KernelIsa isa, DataType type, ReduceOp op) {
  switch (type) {
    case DataType::kBfloat16: return fusedFor<Bf16>(isa, op);
    case DataType::kFloat16: return fusedFor<Half>(isa, op);
    case DataType::kFloat8e4m3: return fusedFor<E4m3>(isa, op);
    case DataType::kFloat8e5m2: return fusedFor<E5m2>(isa, op);
    default: return nullptr;
  }
}

KernelIsa chosenIsa() {
  static const KernelIsa isa = kernelIsaSupported(KernelIsa::kAvx512) ? KernelIsa::kAvx512
                               : kernelIsaSupported(KernelIsa::kAvx2) ? KernelIsa::kAvx2
                                                                      : KernelIsa::kGeneric;
  return isa;
}

}  // namespace

void reduceMany(DataType type, ReduceOp op, void* dst, const void* const* srcs, int nsrcs,
                size_t count) {
  const ManyFn fn = fusedFor(chosenIsa(), type, op);
  if (fn == nullptr || nsrcs < 1 || count == 0) {
    reduce(type, op, dst, srcs, nsrcs, count);
    return;
  }
  fn(dst, srcs, nsrcs, count);
}

void reduceManyWithIsa(KernelIsa isa, DataType type, ReduceOp op, void* dst,
                       const void* const* srcs, int nsrcs, size_t count) {
  const ManyFn fn = kernelIsaSupported(isa) ? fusedFor(isa, type, op) : nullptr;
  if (fn == nullptr || nsrcs < 1 || count == 0) {
    reduceWithIsa(isa, type, op, dst, srcs, nsrcs, count);
    return;
  }
  fn(dst, srcs, nsrcs, count);
}

bool reduceManyIsFused(KernelIsa isa, DataType type, ReduceOp op) {
  return kernelIsaSupported(isa) && fusedFor(isa, type, op) != nullptr;
}

}  // namespace tally
