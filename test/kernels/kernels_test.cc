// SPDX-License-Identifier: Apache-2.0
// reduce() on every compiled instruction set against the scalar model in reference.h, bit for
// bit: every type and op, several source counts and lengths, misaligned and aliased buffers,
// and the special values (NaN, infinities, signed zero, overflow, rounding ties).
#include "kernels/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test/kernels/reference.h"

namespace tally {
namespace {

constexpr DataType kAllTypes[] = {
    DataType::kInt8,    DataType::kUint8,   DataType::kInt32,    DataType::kUint32,
    DataType::kInt64,   DataType::kUint64,  DataType::kFloat16,  DataType::kFloat32,
    DataType::kFloat64, DataType::kBfloat16, DataType::kFloat8e4m3, DataType::kFloat8e5m2,
};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin};
constexpr unsigned char kCanary = 0xa5;
constexpr size_t kGuard = 16;

std::vector<KernelIsa> supportedIsas() {
  std::vector<KernelIsa> isas;
  for (int i = 0; i < kNumKernelIsas; ++i) {
    if (kernelIsaSupported(static_cast<KernelIsa>(i))) isas.push_back(static_cast<KernelIsa>(i));
  }
  return isas;
}

bool isFloatType(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64 ||
         t == DataType::kBfloat16 || t == DataType::kFloat8e4m3 || t == DataType::kFloat8e5m2;
}

bool isNanElement(DataType t, const unsigned char* p) {
  switch (t) {
    case DataType::kFloat32: return std::isnan(ref::loadT<float>(p));
    case DataType::kFloat64: return std::isnan(ref::loadT<double>(p));
    default: break;
  }
  const ref::Format* f = ref::formatOf(t);
  if (f == nullptr) return false;
  uint32_t code = 0;
  std::memcpy(&code, p, dataTypeSize(t));
  return ref::isNanCode(*f, code);
}

std::string hexBytes(const unsigned char* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  for (size_t i = n; i-- > 0;) {  // most significant first (little-endian host)
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

// Fills `n` elements of type t at p with values chosen to hit interesting cases: for the
// float types a mix of ordinary values, exact small values (so sums tie often), and specials.
void fillRandom(DataType t, unsigned char* p, size_t n, std::mt19937_64& rng) {
  const size_t size = dataTypeSize(t);
  for (size_t i = 0; i < n; ++i) {
    uint64_t bits = rng();
    const unsigned pick = static_cast<unsigned>(rng() % 16);
    if (t == DataType::kFloat32 || t == DataType::kFloat64) {
      double v;
      if (pick < 8) {
        v = std::ldexp(static_cast<double>(static_cast<int64_t>(bits % 2001) - 1000), -4);
      } else if (pick < 12) {
        v = std::ldexp(static_cast<double>(static_cast<int64_t>(bits >> 11)) /
                           static_cast<double>(uint64_t{1} << 53) - 0.5,
                       static_cast<int>(rng() % 80) - 40);
      } else if (pick == 12) {
        v = std::numeric_limits<double>::quiet_NaN();
      } else if (pick == 13) {
        v = (bits & 1) ? std::numeric_limits<double>::infinity()
                       : -std::numeric_limits<double>::infinity();
      } else if (pick == 14) {
        v = (bits & 1) ? 0.0 : -0.0;
      } else {
        // Raw bit patterns: subnormals, huge values, NaN payloads.
        if (t == DataType::kFloat32) {
          std::memcpy(p + i * size, &bits, size);
          continue;
        }
        std::memcpy(&v, &bits, sizeof(v));
      }
      if (t == DataType::kFloat32) {
        const float f = static_cast<float>(v);
        std::memcpy(p + i * size, &f, size);
      } else {
        std::memcpy(p + i * size, &v, size);
      }
    } else if (const ref::Format* f = ref::formatOf(t); f != nullptr && pick < 10) {
      // Exponent near the bias: values in [0.25, 4), where sums round and tie.
      const uint32_t mant = static_cast<uint32_t>(bits) & ((1u << f->mant_bits) - 1u);
      const uint32_t exp = static_cast<uint32_t>(f->bias - 2 + static_cast<int>((bits >> 20) % 4));
      const uint32_t sign = static_cast<uint32_t>((bits >> 30) & 1u);
      const uint32_t code =
          (sign << (f->exp_bits + f->mant_bits)) | (exp << f->mant_bits) | mant;
      std::memcpy(p + i * size, &code, size);
    } else {
      std::memcpy(p + i * size, &bits, size);
    }
  }
}

// A buffer of `count` elements at a chosen byte offset inside guard bytes.
struct Buffer {
  std::vector<unsigned char> storage;
  size_t offset;
  size_t bytes;
  Buffer(size_t nbytes, size_t misalign) : storage(nbytes + 2 * kGuard + 64, kCanary) {
    // Start on a 64-byte boundary plus `misalign`, so "aligned" really is aligned.
    const auto base = reinterpret_cast<uintptr_t>(storage.data()) + kGuard;
    offset = kGuard + ((64 - base % 64) % 64) + misalign;
    bytes = nbytes;
  }
  unsigned char* data() { return storage.data() + offset; }
  bool guardsIntact() const {
    for (size_t i = 0; i < storage.size(); ++i) {
      if ((i < offset || i >= offset + bytes) && storage[i] != kCanary) return false;
    }
    return true;
  }
};

struct Case {
  DataType type;
  ReduceOp op;
  int nsrcs;
  size_t count;
  size_t misalign;  // byte offset applied to every buffer
  bool in_place;    // dst == srcs[0]
};

std::string describe(KernelIsa isa, const Case& c) {
  return std::string(kernelIsaName(isa)) + " " + dataTypeName(c.type) + " " +
         reduceOpName(c.op) + " nsrcs=" + std::to_string(c.nsrcs) +
         " count=" + std::to_string(c.count) + " misalign=" + std::to_string(c.misalign) +
         (c.in_place ? " in-place" : "");
}

// Runs one case with the given inputs (nsrcs * count elements, source-major) and compares.
::testing::AssertionResult runCase(KernelIsa isa, const Case& c,
                                   const std::vector<unsigned char>& inputs) {
  const size_t size = dataTypeSize(c.type);
  const size_t bytes = c.count * size;
  std::vector<Buffer> srcs;
  for (int k = 0; k < c.nsrcs; ++k) {
    srcs.emplace_back(bytes, c.misalign);
    if (bytes > 0) std::memcpy(srcs.back().data(), inputs.data() + k * bytes, bytes);
  }
  Buffer separate_dst(bytes, c.misalign);
  std::vector<const void*> ptrs;
  for (Buffer& b : srcs) ptrs.push_back(b.data());

  std::vector<unsigned char> want(bytes);
  std::vector<const unsigned char*> elem(c.nsrcs);
  for (size_t i = 0; i < c.count; ++i) {
    for (int k = 0; k < c.nsrcs; ++k) elem[k] = inputs.data() + k * bytes + i * size;
    ref::reduceElement(c.type, c.op, elem.data(), c.nsrcs, want.data() + i * size);
  }

  Buffer& dst_buf = c.in_place ? srcs[0] : separate_dst;
  reduceWithIsa(isa, c.type, c.op, dst_buf.data(), ptrs.data(), c.nsrcs, c.count);

  for (int k = c.in_place ? 1 : 0; k < c.nsrcs; ++k) {
    if (bytes > 0 && std::memcmp(srcs[k].data(), inputs.data() + k * bytes, bytes) != 0) {
      return ::testing::AssertionFailure() << describe(isa, c) << ": source " << k << " changed";
    }
  }
  for (const Buffer& b : srcs) {
    if (!b.guardsIntact()) {
      return ::testing::AssertionFailure() << describe(isa, c) << ": wrote outside a buffer";
    }
  }
  if (!separate_dst.guardsIntact()) {
    return ::testing::AssertionFailure() << describe(isa, c) << ": wrote outside dst";
  }
  const unsigned char* got = dst_buf.data();
  for (size_t i = 0; i < c.count; ++i) {
    const unsigned char* g = got + i * size;
    const unsigned char* w = want.data() + i * size;
    if (std::memcmp(g, w, size) == 0) continue;
    if (isFloatType(c.type) && isNanElement(c.type, g) && isNanElement(c.type, w)) continue;
    std::string in;
    for (int k = 0; k < c.nsrcs; ++k) {
      in += " " + hexBytes(inputs.data() + k * bytes + i * size, size);
    }
    return ::testing::AssertionFailure()
           << describe(isa, c) << ": element " << i << " is 0x" << hexBytes(g, size)
           << ", model says 0x" << hexBytes(w, size) << "; inputs" << in;
  }
  return ::testing::AssertionSuccess();
}

// Element-wise inputs given as codes (integers' values, or the float formats' bit patterns).
template <class T>
std::vector<unsigned char> packed(std::initializer_list<std::initializer_list<T>> per_source) {
  std::vector<unsigned char> out;
  for (const auto& src : per_source) {
    for (T v : src) {
      unsigned char b[sizeof(T)];
      std::memcpy(b, &v, sizeof(T));
      out.insert(out.end(), b, b + sizeof(T));
    }
  }
  return out;
}

TEST(Kernels, ReportsAnIsa) {
  const std::string isa = reduceKernelIsa();
  EXPECT_TRUE(isa == "generic" || isa == "avx2" || isa == "avx512") << isa;
  EXPECT_TRUE(kernelIsaSupported(KernelIsa::kGeneric));
  std::printf("kernels dispatch to %s\n", isa.c_str());
}

// The main sweep: every type, op, source count and length, aligned and misaligned, in place
// and not, on every instruction set this CPU runs.
TEST(Kernels, RandomInputsMatchModel) {
  const size_t lengths[] = {0, 1, 7, 31, 33, 1000, 4097};
  const int source_counts[] = {1, 2, 3, 5, 8, 13};
  std::mt19937_64 rng(42);
  for (KernelIsa isa : supportedIsas()) {
    for (DataType t : kAllTypes) {
      for (ReduceOp op : kAllOps) {
        for (int nsrcs : source_counts) {
          for (size_t count : lengths) {
            std::vector<unsigned char> inputs(nsrcs * count * dataTypeSize(t));
            fillRandom(t, inputs.data(), nsrcs * count, rng);
            const bool big = count > 1000;
            for (size_t misalign : {size_t{0}, size_t{1}}) {
              for (bool in_place : {false, true}) {
                if (big && misalign == 0 && in_place) continue;  // keep the sweep quick
                ASSERT_TRUE(runCase(isa, {t, op, nsrcs, count, misalign, in_place}, inputs));
              }
            }
          }
        }
      }
    }
  }
}

// The public entry point gives the same answers as the variant it reports.
TEST(Kernels, ReduceMatchesReportedIsa) {
  std::mt19937_64 rng(7);
  const size_t count = 5000;
  for (DataType t : kAllTypes) {
    const size_t size = dataTypeSize(t);
    std::vector<unsigned char> a(count * size), b(count * size);
    fillRandom(t, a.data(), count, rng);
    fillRandom(t, b.data(), count, rng);
    const void* srcs[] = {a.data(), b.data()};
    std::vector<unsigned char> out1(count * size), out2(count * size);
    reduce(t, ReduceOp::kSum, out1.data(), srcs, 2, count);
    KernelIsa chosen = KernelIsa::kGeneric;
    for (int i = 0; i < kNumKernelIsas; ++i) {
      if (std::string(kernelIsaName(static_cast<KernelIsa>(i))) == reduceKernelIsa()) {
        chosen = static_cast<KernelIsa>(i);
      }
    }
    reduceWithIsa(chosen, t, ReduceOp::kSum, out2.data(), srcs, 2, count);
    EXPECT_EQ(out1, out2) << dataTypeName(t);
  }
}

// All variants agree to the bit, NaN payloads included (the model only checks NaN-ness).
TEST(Kernels, IsasAgreeBitForBit) {
  std::mt19937_64 rng(99);
  const size_t count = 3001;
  for (DataType t : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      const size_t size = dataTypeSize(t);
      std::vector<unsigned char> in(3 * count * size);
      fillRandom(t, in.data(), 3 * count, rng);
      const void* srcs[] = {in.data(), in.data() + count * size, in.data() + 2 * count * size};
      std::vector<unsigned char> generic(count * size);
      reduceWithIsa(KernelIsa::kGeneric, t, op, generic.data(), srcs, 3, count);
      for (KernelIsa isa : supportedIsas()) {
        std::vector<unsigned char> out(count * size);
        reduceWithIsa(isa, t, op, out.data(), srcs, 3, count);
        EXPECT_EQ(out, generic) << kernelIsaName(isa) << " " << dataTypeName(t) << " "
                                << reduceOpName(op);
      }
    }
  }
}

// Hand-written cases with expected results written out, checked on every variant.
class KernelsFixed : public ::testing::TestWithParam<KernelIsa> {
 protected:
  void SetUp() override {
    if (!kernelIsaSupported(GetParam())) GTEST_SKIP() << "CPU lacks " << kernelIsaName(GetParam());
  }

  // Reduces `inputs` (nsrcs rows of `count` elements of T) and returns the result row.
  template <class T>
  std::vector<T> run(DataType t, ReduceOp op, std::initializer_list<std::initializer_list<T>> in) {
    const std::vector<unsigned char> bytes = packed<T>(in);
    const int nsrcs = static_cast<int>(in.size());
    const size_t count = in.begin()->size();
    std::vector<const void*> srcs;
    for (int k = 0; k < nsrcs; ++k) srcs.push_back(bytes.data() + k * count * sizeof(T));
    std::vector<T> out(count);
    reduceWithIsa(GetParam(), t, op, out.data(), srcs.data(), nsrcs, count);
    // And the same through the model, which must agree (NaNs aside).
    std::vector<unsigned char> inputs = bytes;
    EXPECT_TRUE(runCase(GetParam(), {t, op, nsrcs, count, 1, false}, inputs));
    return out;
  }
};

TEST_P(KernelsFixed, IntegerSumAndProdWrap) {
  using V8 = std::vector<int8_t>;
  EXPECT_EQ(run<int8_t>(DataType::kInt8, ReduceOp::kSum, {{127, -128, 100}, {1, -1, 100}}),
            (V8{-128, 127, -56}));
  EXPECT_EQ(run<int8_t>(DataType::kInt8, ReduceOp::kProd, {{-128, 16, 3}, {-1, 16, -86}}),
            (V8{-128, 0, -2}));
  EXPECT_EQ(run<uint8_t>(DataType::kUint8, ReduceOp::kSum, {{200, 255}, {100, 1}}),
            (std::vector<uint8_t>{44, 0}));
  EXPECT_EQ(run<uint8_t>(DataType::kUint8, ReduceOp::kProd, {{255, 16}, {255, 16}}),
            (std::vector<uint8_t>{1, 0}));
  const int32_t imax = std::numeric_limits<int32_t>::max();
  const int32_t imin = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(run<int32_t>(DataType::kInt32, ReduceOp::kSum, {{imax, imin}, {1, -1}}),
            (std::vector<int32_t>{imin, imax}));
  EXPECT_EQ(run<int32_t>(DataType::kInt32, ReduceOp::kProd, {{imax, imin}, {2, -1}}),
            (std::vector<int32_t>{-2, imin}));
  EXPECT_EQ(run<uint32_t>(DataType::kUint32, ReduceOp::kSum, {{0xffffffffu}, {2u}}),
            (std::vector<uint32_t>{1u}));
  EXPECT_EQ(run<uint32_t>(DataType::kUint32, ReduceOp::kProd, {{0x10000u}, {0x10001u}}),
            (std::vector<uint32_t>{0x10000u}));
  const int64_t lmin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(run<int64_t>(DataType::kInt64, ReduceOp::kProd, {{lmin, 3}, {-1, 0x5555555555555556}}),
            (std::vector<int64_t>{lmin, 2}));
  EXPECT_EQ(run<int64_t>(DataType::kInt64, ReduceOp::kSum, {{lmin}, {-1}}),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(run<uint64_t>(DataType::kUint64, ReduceOp::kSum, {{~uint64_t{0}}, {1}, {5}}),
            (std::vector<uint64_t>{5}));
  EXPECT_EQ(run<uint64_t>(DataType::kUint64, ReduceOp::kProd,
                          {{uint64_t{1} << 32}, {uint64_t{1} << 32}}),
            (std::vector<uint64_t>{0}));
}

TEST_P(KernelsFixed, IntegerMaxMinUseTheType) {
  EXPECT_EQ(run<int8_t>(DataType::kInt8, ReduceOp::kMax, {{-1, 5}, {1, -5}, {-128, 4}}),
            (std::vector<int8_t>{1, 5}));
  EXPECT_EQ(run<uint8_t>(DataType::kUint8, ReduceOp::kMax, {{255, 5}, {1, 200}}),
            (std::vector<uint8_t>{255, 200}));
  EXPECT_EQ(run<int64_t>(DataType::kInt64, ReduceOp::kMin, {{-1, 7}, {1, 8}}),
            (std::vector<int64_t>{-1, 7}));
  EXPECT_EQ(run<uint64_t>(DataType::kUint64, ReduceOp::kMin, {{~uint64_t{0}, 7}, {1, 8}}),
            (std::vector<uint64_t>{1, 7}));
}

TEST_P(KernelsFixed, Float32Specials) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // max/min: NaN anywhere wins, whichever position.
  for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
    auto r = run<float>(DataType::kFloat32, op, {{nan, 1.0f, 1.0f}, {1.0f, nan, 2.0f}, {0.0f, 0.0f, nan}});
    EXPECT_TRUE(std::isnan(r[0]) && std::isnan(r[1]) && std::isnan(r[2]));
  }
  // Signed zero: equal, so the earlier input is kept.
  auto mx = run<float>(DataType::kFloat32, ReduceOp::kMax, {{-0.0f, 0.0f}, {0.0f, -0.0f}});
  EXPECT_TRUE(std::signbit(mx[0]));
  EXPECT_FALSE(std::signbit(mx[1]));
  auto mn = run<float>(DataType::kFloat32, ReduceOp::kMin, {{-0.0f, 0.0f}, {0.0f, -0.0f}});
  EXPECT_TRUE(std::signbit(mn[0]));
  EXPECT_FALSE(std::signbit(mn[1]));
  auto sum = run<float>(DataType::kFloat32, ReduceOp::kSum,
                        {{inf, inf, -0.0f, 2e38f}, {-inf, 1.0f, -0.0f, 2e38f}, {1, 1, -0.0f, 2e38f}});
  EXPECT_TRUE(std::isnan(sum[0]));
  EXPECT_EQ(sum[1], inf);
  EXPECT_TRUE(sum[2] == 0.0f && std::signbit(sum[2]));
  EXPECT_EQ(sum[3], inf);
  // Left to right: (1e8 + 1) - 1e8 is 0 in float32; (1e8 - 1e8) + 1 would be 1.
  EXPECT_EQ(run<float>(DataType::kFloat32, ReduceOp::kSum, {{1e8f}, {1.0f}, {-1e8f}})[0], 0.0f);
  EXPECT_EQ(run<float>(DataType::kFloat32, ReduceOp::kSum, {{1e8f}, {-1e8f}, {1.0f}})[0], 1.0f);
  // Computed in float32, not wider: 2^24 + 1 + 1 stays 2^24.
  EXPECT_EQ(run<float>(DataType::kFloat32, ReduceOp::kSum, {{0x1p24f}, {1.0f}, {1.0f}})[0],
            0x1p24f);
  EXPECT_EQ(run<double>(DataType::kFloat64, ReduceOp::kSum, {{0x1p53}, {1.0}, {1.0}})[0], 0x1p53);
  auto dmax = run<double>(DataType::kFloat64, ReduceOp::kMax, {{-0.0, 1.0}, {0.0, std::nan("")}});
  EXPECT_TRUE(std::signbit(dmax[0]));
  EXPECT_TRUE(std::isnan(dmax[1]));
}

TEST_P(KernelsFixed, HalfRoundsOnceAndOverflowsToInf) {
  // 1 + 2^-11 ties between 1 and 1+2^-10: even is 1; (1+2^-10) + 2^-11 ties up to 1+2^-9.
  EXPECT_EQ(run<uint16_t>(DataType::kFloat16, ReduceOp::kSum, {{0x3c00, 0x3c01}, {0x1000, 0x1000}}),
            (std::vector<uint16_t>{0x3c00, 0x3c02}));
  // Rounded once: 1 + 2^-12 + 2^-11 = 1 + 0.75 ulp, so up. Rounding after each step would give
  // 1 (1 + 2^-12 -> 1, then 1 + 2^-11 ties to 1).
  EXPECT_EQ(run<uint16_t>(DataType::kFloat16, ReduceOp::kSum, {{0x3c00}, {0x0c00}, {0x1000}}),
            (std::vector<uint16_t>{0x3c01}));
  // 65504 + 16 = 65520 rounds to infinity; 60000 * 2 too; -inf stays.
  EXPECT_EQ(run<uint16_t>(DataType::kFloat16, ReduceOp::kSum, {{0x7bff, 0xfc00}, {0x4c00, 0x3c00}}),
            (std::vector<uint16_t>{0x7c00, 0xfc00}));
  // max(-0, +0) keeps -0; max(+0, -0) keeps +0.
  EXPECT_EQ(run<uint16_t>(DataType::kFloat16, ReduceOp::kMax, {{0x8000, 0x0000}, {0x0000, 0x8000}}),
            (std::vector<uint16_t>{0x8000, 0x0000}));
  auto r = run<uint16_t>(DataType::kFloat16, ReduceOp::kMin, {{0x3c00}, {0x7e00}});
  EXPECT_EQ(r[0] & 0x7c00, 0x7c00);
  EXPECT_NE(r[0] & 0x03ff, 0);
}

TEST_P(KernelsFixed, Bfloat16RoundsToNearestEven) {
  // 1 + 2^-8 ties -> 1; 1 + 3*2^-8 ties -> 1 + 2^-6.
  EXPECT_EQ(run<uint16_t>(DataType::kBfloat16, ReduceOp::kSum, {{0x3f80, 0x3f81}, {0x3b80, 0x3b80}}),
            (std::vector<uint16_t>{0x3f80, 0x3f82}));
  // Max finite + max finite overflows to inf.
  EXPECT_EQ(run<uint16_t>(DataType::kBfloat16, ReduceOp::kSum, {{0x7f7f}, {0x7f7f}}),
            (std::vector<uint16_t>{0x7f80}));
}

TEST_P(KernelsFixed, E4m3SaturatesAndRoundsToEven) {
  // 1 + 1/16 ties -> 1 (0x38); 1.125 + 1/16 ties -> 1.25 (0x3a).
  EXPECT_EQ(run<uint8_t>(DataType::kFloat8e4m3, ReduceOp::kSum, {{0x38, 0x39}, {0x18, 0x18}}),
            (std::vector<uint8_t>{0x38, 0x3a}));
  // 448 + 448 saturates; -448 * 2 too; 256 + 224 = 480 (a code that would be NaN) saturates.
  EXPECT_EQ(run<uint8_t>(DataType::kFloat8e4m3, ReduceOp::kSum, {{0x7e, 0xfe, 0x78}, {0x7e, 0xfe, 0x76}}),
            (std::vector<uint8_t>{0x7e, 0xfe, 0x7e}));
  EXPECT_EQ(run<uint8_t>(DataType::kFloat8e4m3, ReduceOp::kProd, {{0x7e, 0x7e}, {0x40, 0xc0}}),
            (std::vector<uint8_t>{0x7e, 0xfe}));
  // NaN stays NaN (only S.1111.111 is NaN).
  auto r = run<uint8_t>(DataType::kFloat8e4m3, ReduceOp::kMax, {{0x7f, 0x38}, {0x38, 0xff}});
  EXPECT_EQ(r[0] & 0x7f, 0x7f);
  EXPECT_EQ(r[1] & 0x7f, 0x7f);
}

TEST_P(KernelsFixed, E5m2KeepsInfinitiesAndSaturatesFinite) {
  // 1 + 1/8 ties -> 1 (0x3c); 1.25 + 1/8 ties -> 1.5 (0x3e).
  EXPECT_EQ(run<uint8_t>(DataType::kFloat8e5m2, ReduceOp::kSum, {{0x3c, 0x3d}, {0x30, 0x30}}),
            (std::vector<uint8_t>{0x3c, 0x3e}));
  // 57344 + 57344 saturates; inf + 1 stays inf; -inf * 2 stays -inf; inf - inf is NaN.
  auto r = run<uint8_t>(DataType::kFloat8e5m2, ReduceOp::kSum,
                        {{0x7b, 0x7c, 0xfc, 0x7c}, {0x7b, 0x3c, 0xfc, 0xfc}});
  EXPECT_EQ(r[0], 0x7b);
  EXPECT_EQ(r[1], 0x7c);
  EXPECT_EQ(r[2], 0xfc);
  EXPECT_EQ(r[3] & 0x7f, 0x7e & 0x7f);
}

INSTANTIATE_TEST_SUITE_P(AllIsas, KernelsFixed,
                         ::testing::Values(KernelIsa::kGeneric, KernelIsa::kAvx2,
                                           KernelIsa::kAvx512),
                         [](const ::testing::TestParamInfo<KernelIsa>& param) {
                           return std::string(kernelIsaName(param.param));
                         });

TEST(Kernels, BadArgumentsLeaveDstAlone) {
  int32_t a[2] = {1, 2};
  int32_t dst[2] = {7, 7};
  const void* srcs[] = {a};
  reduce(DataType::kInt32, ReduceOp::kSum, dst, srcs, 0, 2);
  reduce(static_cast<DataType>(42), ReduceOp::kSum, dst, srcs, 1, 2);
  reduce(DataType::kInt32, static_cast<ReduceOp>(9), dst, srcs, 1, 2);
  reduce(DataType::kInt32, ReduceOp::kSum, dst, srcs, 1, 0);
  EXPECT_EQ(dst[0], 7);
  EXPECT_EQ(dst[1], 7);
  reduce(DataType::kInt32, ReduceOp::kSum, dst, srcs, 1, 2);
  EXPECT_EQ(dst[0], 1);
  EXPECT_EQ(dst[1], 2);
}

}  // namespace
}  // namespace tally
