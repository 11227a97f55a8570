// SPDX-License-Identifier: Apache-2.0
#include "tools/driver/reference.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace tally::driver {
namespace {

uint64_t randomBits(uint64_t seed, int rank, size_t index) {
  return splitmix64(seed * 0x100000001b3ull ^ splitmix64(static_cast<uint64_t>(rank) + 1) ^
                    (static_cast<uint64_t>(index) << 1));
}

bool isFloat(DataType t) {
  switch (t) {
    case DataType::kFloat16:
    case DataType::kFloat32:
    case DataType::kFloat64:
    case DataType::kBfloat16:
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2:
      return true;
    default:
      return false;
  }
}

bool isSigned(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64;
}

// Largest integer N such that every integer in [-N, N] is exact in the type.
double largestExactInteger(DataType t) {
  switch (t) {
    case DataType::kFloat8e5m2:
      return 8;  // 2 mantissa bits
    case DataType::kFloat8e4m3:
      return 16;  // 3 mantissa bits
    case DataType::kBfloat16:
      return 256;  // 7 mantissa bits
    case DataType::kFloat16:
      return 2048;  // 10 mantissa bits
    case DataType::kFloat32:
      return 16777216;
    default:
      return 1e9;  // float64: keep values modest anyway
  }
}

// Values exact in every floating type, for min and max.
constexpr double kMinMaxValues[] = {-8,   -7,  -6, -5,  -4, -3, -2, -1.5, -1, -0.5, -0.25, 0,
                                    0.25, 0.5, 1,  1.5, 2,  3,  4,  5,    6,  7,    8};
constexpr double kProdValues[] = {1, 2, -1, 0.5};

double floatInput(DataType type, ReduceOp op, int rank, int nranks, uint64_t seed, size_t i) {
  uint64_t r = randomBits(seed, rank, i);
  switch (op) {
    case ReduceOp::kSum: {
      int64_t bound = static_cast<int64_t>(largestExactInteger(type)) / (nranks < 1 ? 1 : nranks);
      if (bound < 1) bound = 1;
      if (bound > 1000000) bound = 1000000;
      return static_cast<double>(static_cast<int64_t>(r % static_cast<uint64_t>(2 * bound + 1)) -
                                 bound);
    }
    case ReduceOp::kProd:
      return kProdValues[r % 4];
    case ReduceOp::kMax:
    case ReduceOp::kMin:
      return kMinMaxValues[r % (sizeof(kMinMaxValues) / sizeof(kMinMaxValues[0]))];
  }
  return 0;
}

// Packs an exactly representable value into a binary floating format with `exp_bits` and
// `man_bits` (IEEE layout, subnormals included). Values are never out of range here.
uint64_t packFloat(double v, int exp_bits, int man_bits) {
  uint64_t sign = std::signbit(v) ? 1 : 0;
  double a = std::fabs(v);
  uint64_t bits = sign << (exp_bits + man_bits);
  if (a == 0) return bits;
  int bias = (1 << (exp_bits - 1)) - 1;
  int e2;
  double f = std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1)
  int exponent = e2 - 1;          // a = (2f) * 2^exponent, 2f in [1, 2)
  if (exponent >= 1 - bias) {
    uint64_t mant = static_cast<uint64_t>(std::ldexp(2 * f - 1, man_bits));
    return bits | (static_cast<uint64_t>(exponent + bias) << man_bits) | mant;
  }
  uint64_t mant = static_cast<uint64_t>(std::ldexp(a, man_bits - (1 - bias)));
  return bits | mant;
}

void storeInt(DataType type, uint64_t v, void* out, size_t i) {
  switch (dataTypeSize(type)) {
    case 1:
      static_cast<uint8_t*>(out)[i] = static_cast<uint8_t>(v);
      break;
    case 4:
      static_cast<uint32_t*>(out)[i] = static_cast<uint32_t>(v);
      break;
    default:
      static_cast<uint64_t*>(out)[i] = v;
      break;
  }
}

// Combines two integers of the type with wrap-around, as the type would.
uint64_t combineInt(DataType type, ReduceOp op, uint64_t a, uint64_t b) {
  size_t bytes = dataTypeSize(type);
  uint64_t mask = bytes == 8 ? ~0ull : ((1ull << (8 * bytes)) - 1);
  a &= mask;
  b &= mask;
  auto signedValue = [&](uint64_t x) -> int64_t {
    if (bytes == 8) return static_cast<int64_t>(x);
    uint64_t sign_bit = 1ull << (8 * bytes - 1);
    return static_cast<int64_t>((x ^ sign_bit)) - static_cast<int64_t>(sign_bit);
  };
  switch (op) {
    case ReduceOp::kSum:
      return (a + b) & mask;
    case ReduceOp::kProd:
      return (a * b) & mask;
    case ReduceOp::kMax:
      if (isSigned(type)) return signedValue(a) >= signedValue(b) ? a : b;
      return a >= b ? a : b;
    case ReduceOp::kMin:
      if (isSigned(type)) return signedValue(a) <= signedValue(b) ? a : b;
      return a <= b ? a : b;
  }
  return 0;
}

double combineFloat(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
      return a + b;
    case ReduceOp::kProd:
      return a * b;
    case ReduceOp::kMax:
      return a >= b ? a : b;
    case ReduceOp::kMin:
      return a <= b ? a : b;
  }
  return 0;
}

}  // namespace

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void encodeExact(DataType type, double value, void* out) {
  switch (type) {
    case DataType::kFloat32: {
      float f = static_cast<float>(value);
      std::memcpy(out, &f, 4);
      break;
    }
    case DataType::kFloat64:
      std::memcpy(out, &value, 8);
      break;
    case DataType::kFloat16: {
      uint16_t h = static_cast<uint16_t>(packFloat(value, 5, 10));
      std::memcpy(out, &h, 2);
      break;
    }
    case DataType::kBfloat16: {
      uint16_t b = static_cast<uint16_t>(packFloat(value, 8, 7));
      std::memcpy(out, &b, 2);
      break;
    }
    case DataType::kFloat8e4m3:
      *static_cast<uint8_t*>(out) = static_cast<uint8_t>(packFloat(value, 4, 3));
      break;
    case DataType::kFloat8e5m2:
      *static_cast<uint8_t*>(out) = static_cast<uint8_t>(packFloat(value, 5, 2));
      break;
    default:
      storeInt(type, static_cast<uint64_t>(static_cast<int64_t>(value)), out, 0);
      break;
  }
}

void fillInput(DataType type, ReduceOp op, int rank, int nranks, uint64_t seed, size_t count,
               void* out) {
  size_t esize = dataTypeSize(type);
  auto* bytes = static_cast<uint8_t*>(out);
  if (isFloat(type)) {
    for (size_t i = 0; i < count; ++i) {
      encodeExact(type, floatInput(type, op, rank, nranks, seed, i), bytes + i * esize);
    }
  } else {
    for (size_t i = 0; i < count; ++i) storeInt(type, randomBits(seed, rank, i), out, i);
  }
}

void fillExpected(DataType type, ReduceOp op, int nranks, uint64_t seed, size_t count, void* out) {
  size_t esize = dataTypeSize(type);
  auto* bytes = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < count; ++i) {
    if (isFloat(type)) {
      double acc = floatInput(type, op, 0, nranks, seed, i);
      for (int r = 1; r < nranks; ++r)
        acc = combineFloat(op, acc, floatInput(type, op, r, nranks, seed, i));
      if (acc == 0) acc = 0;  // +0: inputs are never -0, and an exact sum of them is +0
      encodeExact(type, acc, bytes + i * esize);
    } else {
      uint64_t acc = randomBits(seed, 0, i);
      for (int r = 1; r < nranks; ++r) acc = combineInt(type, op, acc, randomBits(seed, r, i));
      storeInt(type, acc, out, i);
    }
  }
}

size_t countMismatches(DataType type, const void* got, const void* expected, size_t count,
                       size_t* first_bad) {
  size_t esize = dataTypeSize(type);
  const auto* g = static_cast<const uint8_t*>(got);
  const auto* e = static_cast<const uint8_t*>(expected);
  if (std::memcmp(g, e, count * esize) == 0) return 0;
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(g + i * esize, e + i * esize, esize) != 0) {
      if (bad == 0 && first_bad) *first_bad = i;
      ++bad;
    }
  }
  return bad;
}

uint64_t hashBytes(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string describeElement(DataType type, const void* got, const void* expected, size_t index) {
  size_t esize = dataTypeSize(type);
  auto hex = [&](const void* base) {
    uint64_t v = 0;
    std::memcpy(&v, static_cast<const uint8_t*>(base) + index * esize, esize);
    char buf[32];
    std::snprintf(buf, sizeof(buf), "0x%0*llx", static_cast<int>(2 * esize),
                  static_cast<unsigned long long>(v));
    return std::string(buf);
  };
  return std::string(dataTypeName(type)) + " elem " + std::to_string(index) + ": got " + hex(got) +
         " expected " + hex(expected);
}

}  // namespace tally::driver
