// SPDX-License-Identifier: Apache-2.0
// A slow, obviously-correct scalar model of the narrow float formats and of reduce(), written
// independently of reducer/: formats are decoded from their bit fields with ldexp, and encoded by
// searching the ordered list of finite codes for the nearest one. Tests compare the fast
// kernels against it bit for bit.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/types.h"

namespace tally::ref {

enum class Overflow {
  kInfinity,        // IEEE: past the largest finite value (by half an ulp or more) -> infinity
  kSaturateFinite,  // finite values saturate to the largest finite value; infinity stays
  kSaturateAll,     // no infinity in the format: everything saturates
};

struct Format {
  int exp_bits;
  int mant_bits;
  int bias;
  bool has_inf;           // exponent all ones means inf (mantissa 0) or NaN, IEEE style
  uint32_t max_finite;    // code of the largest finite positive value
  Overflow overflow;
};

inline constexpr Format kHalf{5, 10, 15, true, 0x7bff, Overflow::kInfinity};
inline constexpr Format kBf16{8, 7, 127, true, 0x7f7f, Overflow::kInfinity};
inline constexpr Format kE4m3{4, 3, 7, false, 0x7e, Overflow::kSaturateAll};
inline constexpr Format kE5m2{5, 2, 15, true, 0x7b, Overflow::kSaturateFinite};

inline int totalBits(const Format& f) { return 1 + f.exp_bits + f.mant_bits; }

inline double decode(const Format& f, uint32_t code) {
  const uint32_t sign = (code >> (f.exp_bits + f.mant_bits)) & 1u;
  const uint32_t exp = (code >> f.mant_bits) & ((1u << f.exp_bits) - 1u);
  const uint32_t mant = code & ((1u << f.mant_bits) - 1u);
  const uint32_t exp_max = (1u << f.exp_bits) - 1u;
  double value;
  if (f.has_inf && exp == exp_max) {
    value = mant == 0 ? std::numeric_limits<double>::infinity()
                      : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.has_inf && exp == exp_max && mant == (1u << f.mant_bits) - 1u) {
    value = std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    value = std::ldexp(static_cast<double>(mant), 1 - f.bias - f.mant_bits);
  } else {
    value = std::ldexp(static_cast<double>(mant + (1u << f.mant_bits)),
                       static_cast<int>(exp) - f.bias - f.mant_bits);
  }
  return sign ? -value : value;
}

// Some NaN code of the format (tests compare NaNs by class, not payload).
inline uint32_t nanCode(const Format& f) {
  return f.has_inf ? (((1u << f.exp_bits) - 1u) << f.mant_bits) | (1u << (f.mant_bits - 1))
                   : (1u << (f.exp_bits + f.mant_bits)) - 1u;
}

inline uint32_t encode(const Format& f, double x) {
  if (std::isnan(x)) return nanCode(f);
  const uint32_t sign = std::signbit(x) ? 1u << (f.exp_bits + f.mant_bits) : 0u;
  const double a = std::fabs(x);
  const uint32_t inf_code = ((1u << f.exp_bits) - 1u) << f.mant_bits;
  if (std::isinf(a)) {
    return sign | (f.overflow == Overflow::kSaturateAll ? f.max_finite : inf_code);
  }
  // Largest finite code whose value is <= a (values grow with the code).
  uint32_t lo = 0, hi = f.max_finite;
  if (decode(f, hi) <= a) {
    lo = hi;
  } else {
    while (hi - lo > 1) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (decode(f, mid) <= a) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
  }
  if (lo == f.max_finite) {
    // Beyond the top: IEEE formats round as if the exponent went on (the next value up would be
    // max + ulp, which has an even mantissa, so the midpoint goes up too) and overflow.
    const double ulp = decode(f, f.max_finite) - decode(f, f.max_finite - 1);
    if (f.overflow == Overflow::kInfinity && a >= decode(f, f.max_finite) + ulp / 2) {
      return sign | inf_code;
    }
    return sign | f.max_finite;
  }
  const double below = a - decode(f, lo);
  const double above = decode(f, lo + 1) - a;
  uint32_t code;
  if (below < above) {
    code = lo;
  } else if (above < below) {
    code = lo + 1;
  } else {
    code = (lo % 2 == 0) ? lo : lo + 1;
  }
  return sign | code;
}

inline bool isNanCode(const Format& f, uint32_t code) { return std::isnan(decode(f, code)); }

inline const Format* formatOf(DataType t) {
  switch (t) {
    case DataType::kFloat16: return &kHalf;
    case DataType::kBfloat16: return &kBf16;
    case DataType::kFloat8e4m3: return &kE4m3;
    case DataType::kFloat8e5m2: return &kE5m2;
    default: return nullptr;
  }
}

// ---------------------------------------------------------------------------------------------
// reduce() for one element. Each input is `size` bytes at in[k]; the result goes to out.

template <class T>
T loadT(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// max/min as documented in kernels/kernels.h: NaN wins; on a tie the earlier input is kept.
template <class T>
T combineFloat(ReduceOp op, T r, T x) {
  if (std::isnan(r)) return r;
  if (std::isnan(x)) return x;
  switch (op) {
    case ReduceOp::kSum: return r + x;
    case ReduceOp::kProd: return r * x;
    case ReduceOp::kMax: return r < x ? x : r;
    case ReduceOp::kMin: return x < r ? x : r;
  }
  return r;
}

// Integers of up to 32 bits: exact arithmetic in 64 bits, wrapped at the end of every step by
// reducing modulo 2^bits (which is what two's complement wrap means).
template <class T>
T combineInt(ReduceOp op, T r, T x) {
  constexpr int kBits = 8 * sizeof(T);
  if constexpr (kBits < 64) {
    int64_t wide;
    switch (op) {
      case ReduceOp::kSum: wide = int64_t{r} + int64_t{x}; break;
      // Two 32-bit unsigned factors can pass INT64_MAX: multiply modulo 2^64 (the low bits,
      // all that is kept, are the same).
      case ReduceOp::kProd:
        wide = static_cast<int64_t>(static_cast<uint64_t>(int64_t{r}) *
                                    static_cast<uint64_t>(int64_t{x}));
        break;
      case ReduceOp::kMax: return r < x ? x : r;
      case ReduceOp::kMin: return x < r ? x : r;
      default: return r;
    }
    const uint64_t mod = uint64_t{1} << kBits;
    uint64_t low = static_cast<uint64_t>(wide) % mod;
    if (std::numeric_limits<T>::is_signed && low >= mod / 2) {
      return static_cast<T>(static_cast<int64_t>(low) - static_cast<int64_t>(mod));
    }
    return static_cast<T>(low);
  } else {
    // 64-bit: exact in 128 bits, then keep the low 64.
    __int128 wide;
    switch (op) {
      case ReduceOp::kSum: wide = static_cast<__int128>(r) + static_cast<__int128>(x); break;
      case ReduceOp::kProd:
        wide = static_cast<__int128>(static_cast<unsigned __int128>(static_cast<__int128>(r)) *
                                     static_cast<unsigned __int128>(static_cast<__int128>(x)));
        break;
      case ReduceOp::kMax: return r < x ? x : r;
      case ReduceOp::kMin: return x < r ? x : r;
      default: return r;
    }
    const uint64_t low = static_cast<uint64_t>(static_cast<unsigned __int128>(wide));
    T out;
    std::memcpy(&out, &low, sizeof(out));
    return out;
  }
}

template <class T>
void reduceIntElement(ReduceOp op, const unsigned char* const* in, int n, unsigned char* out) {
  T r = loadT<T>(in[0]);
  for (int k = 1; k < n; ++k) r = combineInt<T>(op, r, loadT<T>(in[k]));
  std::memcpy(out, &r, sizeof(T));
}

template <class T>
void reduceFloatElement(ReduceOp op, const unsigned char* const* in, int n, unsigned char* out) {
  T r = loadT<T>(in[0]);
  for (int k = 1; k < n; ++k) r = combineFloat<T>(op, r, loadT<T>(in[k]));
  std::memcpy(out, &r, sizeof(T));
}

inline void reduceNarrowElement(const Format& f, ReduceOp op, const unsigned char* const* in,
                                int n, unsigned char* out) {
  const size_t size = static_cast<size_t>(totalBits(f) / 8);
  auto code_at = [&](const unsigned char* p) {
    uint32_t c = 0;
    std::memcpy(&c, p, size);  // little-endian host
    return c;
  };
  // Widening is exact, so the double value cast to float is the float32 the spec combines.
  float r = static_cast<float>(decode(f, code_at(in[0])));
  for (int k = 1; k < n; ++k) {
    r = combineFloat<float>(op, r, static_cast<float>(decode(f, code_at(in[k]))));
  }
  const uint32_t code = encode(f, static_cast<double>(r));
  std::memcpy(out, &code, size);
}

inline void reduceElement(DataType t, ReduceOp op, const unsigned char* const* in, int n,
                          unsigned char* out) {
  switch (t) {
    case DataType::kInt8: return reduceIntElement<int8_t>(op, in, n, out);
    case DataType::kUint8: return reduceIntElement<uint8_t>(op, in, n, out);
    case DataType::kInt32: return reduceIntElement<int32_t>(op, in, n, out);
    case DataType::kUint32: return reduceIntElement<uint32_t>(op, in, n, out);
    case DataType::kInt64: return reduceIntElement<int64_t>(op, in, n, out);
    case DataType::kUint64: return reduceIntElement<uint64_t>(op, in, n, out);
    case DataType::kFloat32: return reduceFloatElement<float>(op, in, n, out);
    case DataType::kFloat64: return reduceFloatElement<double>(op, in, n, out);
    default: return reduceNarrowElement(*formatOf(t), op, in, n, out);
  }
}

}  // namespace tally::ref
