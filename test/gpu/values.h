// SPDX-License-Identifier: Apache-2.0
// Inputs and host reference for the GPU all-reduce checks (nccl_check.cc), free of CUDA and NCCL
// so values_test.cc can prove their exactness on any machine.
//
// Every input is an integer (for avg a result is one too), small enough that each type holds it
// exactly, and so are all partial sums and products in any order: the reference is exact for
// float16, bfloat16 and both float8 formats as much as for int64, whatever order NCCL, the GPU or
// a reducer adds in. The one exception is avg on floating types when the rank count is not a power
// of two (NCCL multiplies each input by a rounded 1/n); avgTolerance() says how far it may be off.
//
// Element types and ops use NCCL's ncclDataType_t and ncclRedOp_t numbering (int8 = 0 ...
// float8e5m2 = 11; sum = 0, prod = 1, max = 2, min = 3, avg = 4).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace tally::gpucheck {

enum class Kind { kSigned, kUnsigned, kFloat };

struct TypeInfo {
  const char* name;
  int bytes;
  Kind kind;
  int exp_bits;     // floats only
  int man_bits;     // stored mantissa bits
  bool finite_nan;  // float8 e4m3 ("fn"): no infinity, only mantissa 111 at the top exponent is NaN
  int64_t exact;    // every integer in [-exact, exact] (or [0, exact]) is held exactly
  int max_twos;     // the largest k such that 2^k (and -2^k when signed) is held exactly
};

constexpr int kNumTypes = 12;
constexpr int kNumOps = 5;
enum Op { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };
inline const char* opName(int op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg"};
  return kNames[op];
}

inline const TypeInfo& typeInfo(int type) {
  static const TypeInfo kTypes[kNumTypes] = {
      {"int8", 1, Kind::kSigned, 0, 0, false, 127, 6},
      {"uint8", 1, Kind::kUnsigned, 0, 0, false, 255, 7},
      {"int32", 4, Kind::kSigned, 0, 0, false, INT32_MAX, 30},
      {"uint32", 4, Kind::kUnsigned, 0, 0, false, UINT32_MAX, 31},
      {"int64", 8, Kind::kSigned, 0, 0, false, INT64_C(1) << 62, 62},
      {"uint64", 8, Kind::kUnsigned, 0, 0, false, INT64_C(1) << 62, 62},
      {"float16", 2, Kind::kFloat, 5, 10, false, 2048, 15},
      {"float32", 4, Kind::kFloat, 8, 23, false, INT64_C(1) << 24, 62},
      {"float64", 8, Kind::kFloat, 11, 52, false, INT64_C(1) << 53, 62},
      {"bfloat16", 2, Kind::kFloat, 8, 7, false, 256, 62},
      {"float8e4m3", 1, Kind::kFloat, 4, 3, true, 16, 8},
      {"float8e5m2", 1, Kind::kFloat, 5, 2, false, 8, 15},
  };
  return kTypes[type];
}

// A float format with E exponent and M mantissa bits, written as bits; false when x is not held
// exactly (or is out of range).
inline bool encodeSmallFloat(double x, int e_bits, int m_bits, bool finite_nan, uint64_t* bits) {
  const int bias = (1 << (e_bits - 1)) - 1;
  const uint64_t sign = std::signbit(x) ? 1 : 0;
  const double a = std::fabs(x);
  uint64_t exp_field = 0;
  double mant = 0;
  if (a != 0) {
    int e = 0;
    std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
    const int unbiased = e - 1;
    if (unbiased + bias >= 1) {
      exp_field = static_cast<uint64_t>(unbiased + bias);
      mant = std::ldexp(a, -unbiased) - 1.0;
    } else {
      mant = std::ldexp(a, bias - 1);  // subnormal: a / 2^(1 - bias)
    }
  }
  const double scaled = std::ldexp(mant, m_bits);
  if (scaled != std::floor(scaled)) return false;
  const uint64_t mant_field = static_cast<uint64_t>(scaled);
  const uint64_t top = (uint64_t{1} << e_bits) - 1;
  const uint64_t mant_all = (uint64_t{1} << m_bits) - 1;
  if (exp_field > top || (!finite_nan && exp_field == top) ||
      (finite_nan && exp_field == top && mant_field == mant_all)) {
    return false;
  }
  *bits = (sign << (e_bits + m_bits)) | (exp_field << m_bits) | mant_field;
  return true;
}

inline double decodeSmallFloat(uint64_t bits, int e_bits, int m_bits, bool finite_nan) {
  const int bias = (1 << (e_bits - 1)) - 1;
  const uint64_t mant_all = (uint64_t{1} << m_bits) - 1;
  const uint64_t top = (uint64_t{1} << e_bits) - 1;
  const bool negative = (bits >> (e_bits + m_bits)) & 1;
  const uint64_t exp_field = (bits >> m_bits) & top;
  const uint64_t mant_field = bits & mant_all;
  double value;
  if (exp_field == top && (!finite_nan || mant_field == mant_all)) {
    value = (!finite_nan && mant_field == 0) ? INFINITY : NAN;
  } else if (exp_field == 0) {
    value = std::ldexp(static_cast<double>(mant_field), 1 - bias - m_bits);
  } else {
    value = std::ldexp(1.0 + std::ldexp(static_cast<double>(mant_field), -m_bits),
                       static_cast<int>(exp_field) - bias);
  }
  return negative ? -value : value;
}

// Writes v as element i of a buffer of `type`; false when the type does not hold v exactly.
inline bool store(int type, int64_t v, void* buffer, size_t i) {
  const TypeInfo& t = typeInfo(type);
  unsigned char* at = static_cast<unsigned char*>(buffer) + i * static_cast<size_t>(t.bytes);
  if (t.kind != Kind::kFloat) {
    const uint64_t raw = static_cast<uint64_t>(v);
    std::memcpy(at, &raw, static_cast<size_t>(t.bytes));  // little-endian: the low bytes
    return true;
  }
  const double x = static_cast<double>(v);
  if (type == 7) {
    const float f = static_cast<float>(x);
    std::memcpy(at, &f, 4);
    return static_cast<double>(f) == x;
  }
  if (type == 8) {
    std::memcpy(at, &x, 8);
    return static_cast<double>(static_cast<int64_t>(x)) == x;
  }
  uint64_t bits = 0;
  if (!encodeSmallFloat(x, t.exp_bits, t.man_bits, t.finite_nan, &bits)) return false;
  std::memcpy(at, &bits, static_cast<size_t>(t.bytes));
  return true;
}

// Element i of a buffer of `type`, as a double (exact for every value these checks produce).
inline double load(int type, const void* buffer, size_t i) {
  const TypeInfo& t = typeInfo(type);
  const unsigned char* at =
      static_cast<const unsigned char*>(buffer) + i * static_cast<size_t>(t.bytes);
  uint64_t raw = 0;
  std::memcpy(&raw, at, static_cast<size_t>(t.bytes));
  switch (type) {
    case 0:
      return static_cast<int8_t>(raw);
    case 1:
      return static_cast<uint8_t>(raw);
    case 2:
      return static_cast<int32_t>(raw);
    case 3:
      return static_cast<uint32_t>(raw);
    case 4:
      return static_cast<double>(static_cast<int64_t>(raw));
    case 5:
      return static_cast<double>(raw);
    case 7: {
      float f;
      std::memcpy(&f, at, 4);
      return f;
    }
    case 8: {
      double d;
      std::memcpy(&d, at, 8);
      return d;
    }
    default:
      return decodeSmallFloat(raw, t.exp_bits, t.man_bits, t.finite_nan);
  }
}

inline uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Inputs for `nranks` ranks: magnitude bound per rank so that n of them add up exactly.
inline int64_t perRankBound(int type, int nranks) {
  return std::min<int64_t>(typeInfo(type).exact / nranks, int64_t{1} << 20);
}

// The value rank `rank` (of nranks) contributes at element i.
inline int64_t inputValue(int type, int op, int rank, int nranks, size_t i, uint64_t seed) {
  const TypeInfo& t = typeInfo(type);
  const bool is_unsigned = t.kind == Kind::kUnsigned;
  const int64_t m = perRankBound(type, nranks);
  const int64_t lo = is_unsigned ? 0 : -m;
  const uint64_t per_element = mix(seed ^ mix(i * 0x2545f4914f6cdd1dull + uint64_t(op)));
  const uint64_t h = mix(per_element ^ (uint64_t(rank) + 1) * 0x9e3779b97f4a7c15ull);
  if (op == kProd) {  // +-1 or +-2, with at most max_twos twos in the whole product
    const int64_t magnitude = (rank < t.max_twos && (h & 1)) ? 2 : 1;
    return (!is_unsigned && (h & 2)) ? -magnitude : magnitude;
  }
  if (op == kAvg) {  // b + t, b - t, ... so that the sum is exactly n * b
    const int64_t b = lo + static_cast<int64_t>(per_element % uint64_t(m - lo + 1));
    const int64_t room = std::min(m - b, b - lo);
    const int64_t tt = static_cast<int64_t>((per_element >> 32) % uint64_t(room + 1));
    if (nranks % 2 == 1 && rank == nranks - 1) return b;
    return rank % 2 == 0 ? b + tt : b - tt;
  }
  return lo + static_cast<int64_t>(h % uint64_t(m - lo + 1));
}

// The exact result at element i over ranks 0..nranks-1.
inline int64_t expectedValue(int type, int op, int nranks, size_t i, uint64_t seed) {
  int64_t acc = inputValue(type, op, 0, nranks, i, seed);
  for (int r = 1; r < nranks; ++r) {
    const int64_t v = inputValue(type, op, r, nranks, i, seed);
    switch (op) {
      case kProd:
        acc *= v;
        break;
      case kMax:
        acc = std::max(acc, v);
        break;
      case kMin:
        acc = std::min(acc, v);
        break;
      default:
        acc += v;
        break;
    }
  }
  return op == kAvg ? acc / nranks : acc;
}

// How far avg may be from the reference: 0 unless a floating type is averaged over a rank count
// that is not a power of two, then 4 units in the last place of the result.
inline double avgTolerance(int type, int op, int nranks, double expected) {
  const TypeInfo& t = typeInfo(type);
  if (op != kAvg || t.kind != Kind::kFloat || (nranks & (nranks - 1)) == 0) return 0;
  int e = 0;
  std::frexp(std::max(std::fabs(expected), 1.0), &e);
  return std::ldexp(4.0, e - 1 - t.man_bits);
}

}  // namespace tally::gpucheck
