// SPDX-License-Identifier: Apache-2.0
// reduceMany() (kernels/kernels_many.h) on every instruction set this CPU runs: the fused
// narrow-float loops against the scalar model in reference.h (NaN by class) and against reduce()
// itself (NaN payloads too), bit for bit; lengths around the vector steps so the scalar tail is
// covered, misaligned and in-place buffers, writes confined to dst, and the hand-off to reduce()
// for everything the fused loops do not cover.
#include "kernels/kernels_many.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "test/kernels/reference.h"

namespace tally {
namespace {

constexpr DataType kNarrowTypes[] = {DataType::kBfloat16, DataType::kFloat16,
                                     DataType::kFloat8e4m3, DataType::kFloat8e5m2};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin};
constexpr unsigned char kFence = 0x5a;
constexpr size_t kFenceBytes = 64;

// Codes of a narrow type: `small` keeps the exponent in the lowest four binades, so sums and
// products land in and around the subnormal range; otherwise any bit pattern (NaN, infinity,
// the largest values, so overflow and saturation are hit too).
uint32_t randomCode(const ref::Format& f, std::mt19937_64& rng, bool small) {
  const uint32_t bits = static_cast<uint32_t>(rng());
  const uint32_t sign = (bits >> 31) << (f.exp_bits + f.mant_bits);
  const int magnitude_bits = small ? f.mant_bits + 2 : f.exp_bits + f.mant_bits;
  const uint32_t low = (1u << magnitude_bits) - 1u;
  return sign | (bits & low);
}

// `count` elements of one source inside fences, starting `misalign` bytes past 64-byte
// alignment.
class Fenced {
 public:
  Fenced(size_t bytes, size_t misalign)
      : bytes_(bytes), storage_(bytes + 3 * kFenceBytes, kFence) {
    const auto base = reinterpret_cast<uintptr_t>(storage_.data()) + kFenceBytes;
    start_ = kFenceBytes + (64 - base % 64) % 64 + misalign;
  }
  unsigned char* data() { return storage_.data() + start_; }
  bool fencesIntact() const {
    for (size_t i = 0; i < storage_.size(); ++i) {
      if ((i < start_ || i >= start_ + bytes_) && storage_[i] != kFence) return false;
    }
    return true;
  }

 private:
  size_t bytes_;
  std::vector<unsigned char> storage_;
  size_t start_ = 0;
};

bool sameOrBothNan(DataType t, const unsigned char* a, const unsigned char* b) {
  const size_t size = dataTypeSize(t);
  if (std::memcmp(a, b, size) == 0) return true;
  const ref::Format* f = ref::formatOf(t);
  uint32_t ca = 0, cb = 0;
  std::memcpy(&ca, a, size);
  std::memcpy(&cb, b, size);
  return f != nullptr && ref::isNanCode(*f, ca) && ref::isNanCode(*f, cb);
}

struct Case {
  DataType type;
  ReduceOp op;
  int nsrcs;
  size_t count;
  size_t misalign;
  bool in_place;
};

std::string describe(KernelIsa isa, const Case& c) {
  return std::string(kernelIsaName(isa)) + " " + dataTypeName(c.type) + " " +
         reduceOpName(c.op) + " nsrcs=" + std::to_string(c.nsrcs) + " count=" +
         std::to_string(c.count) + " misalign=" + std::to_string(c.misalign) +
         (c.in_place ? " in place" : "");
}

// Runs reduceManyWithIsa on `inputs` (nsrcs x count elements, source after source) and checks
// it against the model and against reduceWithIsa on the same variant.
::testing::AssertionResult check(KernelIsa isa, const Case& c,
                                 const std::vector<unsigned char>& inputs) {
  const size_t size = dataTypeSize(c.type);
  const size_t bytes = c.count * size;
  std::vector<Fenced> srcs;
  std::vector<const void*> ptrs;
  for (int k = 0; k < c.nsrcs; ++k) {
    srcs.emplace_back(bytes, c.misalign);
    std::memcpy(srcs.back().data(), inputs.data() + k * bytes, bytes);
  }
  for (Fenced& s : srcs) ptrs.push_back(s.data());
  Fenced own_dst(bytes, c.misalign);
  unsigned char* dst = c.in_place ? srcs[0].data() : own_dst.data();

  std::vector<unsigned char> by_reduce(bytes);
  reduceWithIsa(isa, c.type, c.op, by_reduce.data(), ptrs.data(), c.nsrcs, c.count);
  reduceManyWithIsa(isa, c.type, c.op, dst, ptrs.data(), c.nsrcs, c.count);

  for (int k = c.in_place ? 1 : 0; k < c.nsrcs; ++k) {
    if (std::memcmp(srcs[k].data(), inputs.data() + k * bytes, bytes) != 0) {
      return ::testing::AssertionFailure() << describe(isa, c) << ": source " << k << " changed";
    }
  }
  for (const Fenced& s : srcs) {
    if (!s.fencesIntact()) return ::testing::AssertionFailure() << describe(isa, c) << ": fence";
  }
  if (!own_dst.fencesIntact()) {
    return ::testing::AssertionFailure() << describe(isa, c) << ": wrote past dst";
  }
  std::vector<const unsigned char*> elem(static_cast<size_t>(c.nsrcs));
  unsigned char want[8];
  for (size_t i = 0; i < c.count; ++i) {
    for (int k = 0; k < c.nsrcs; ++k) elem[k] = inputs.data() + k * bytes + i * size;
    ref::reduceElement(c.type, c.op, elem.data(), c.nsrcs, want);
    const unsigned char* got = dst + i * size;
    if (!sameOrBothNan(c.type, got, want)) {
      uint32_t g = 0, w = 0;
      std::memcpy(&g, got, size);
      std::memcpy(&w, want, size);
      return ::testing::AssertionFailure() << describe(isa, c) << ": element " << i << " is 0x"
                                           << std::hex << g << ", model says 0x" << w;
    }
    // reduceMany() agrees with reduce() to the bit, except which NaN comes out when several
    // meet: x86 keeps the first operand's payload and the compiler may swap the operands of a
    // sum (the sanitizer builds do), so only "both NaN" is asked there.
    if (!sameOrBothNan(c.type, got, by_reduce.data() + i * size)) {
      return ::testing::AssertionFailure() << describe(isa, c) << ": element " << i
                                           << " differs from reduce()";
    }
  }
  return ::testing::AssertionSuccess();
}

class KernelsMany : public ::testing::TestWithParam<KernelIsa> {
 protected:
  void SetUp() override {
    if (!kernelIsaSupported(GetParam())) GTEST_SKIP() << "CPU lacks " << kernelIsaName(GetParam());
  }
};

TEST_P(KernelsMany, FusedExactlyForNarrowFloats) {
  const bool vector = GetParam() != KernelIsa::kGeneric;
  for (ReduceOp op : kOps) {
    for (DataType t : kNarrowTypes) EXPECT_EQ(reduceManyIsFused(GetParam(), t, op), vector);
    EXPECT_FALSE(reduceManyIsFused(GetParam(), DataType::kFloat32, op));
    EXPECT_FALSE(reduceManyIsFused(GetParam(), DataType::kInt32, op));
  }
}

// Every narrow type and op, source counts from 1 to 9, lengths on both sides of the steps the
// fused loops take (4 vectors: 32 elements for AVX2, 64 for AVX-512), random codes of both
// kinds, aligned and not, in place and not.
TEST_P(KernelsMany, RandomCodesMatchModelAndReduce) {
  const size_t lengths[] = {1, 7, 8, 9, 17, 31, 32, 33, 63, 64, 65, 250};
  const int source_counts[] = {1, 2, 3, 5, 8, 9};
  std::mt19937_64 rng(2024);
  for (DataType t : kNarrowTypes) {
    const ref::Format& f = *ref::formatOf(t);
    const size_t size = dataTypeSize(t);
    for (ReduceOp op : kOps) {
      for (int nsrcs : source_counts) {
        for (size_t count : lengths) {
          for (bool small : {false, true}) {
            std::vector<unsigned char> inputs(nsrcs * count * size);
            for (size_t e = 0; e < nsrcs * count; ++e) {
              const uint32_t code = randomCode(f, rng, small);
              std::memcpy(inputs.data() + e * size, &code, size);
            }
            const size_t misalign = small ? 1 : 0;
            for (bool in_place : {false, true}) {
              ASSERT_TRUE(check(GetParam(), {t, op, nsrcs, count, misalign, in_place}, inputs));
            }
          }
        }
      }
    }
  }
}

// Rounding ties, overflow and saturation written out, in every lane and in the tail: each of
// the 83 elements gets the same pair, so the vector body (64) and the scalar tail both see it.
TEST_P(KernelsMany, TiesAndOverflowInEveryLane) {
  struct Pair {
    DataType type;
    uint32_t a, b, sum;
  };
  const Pair pairs[] = {
      {DataType::kBfloat16, 0x3f80, 0x3b80, 0x3f80},  // 1 + 2^-8: tie, stays even 1.0
      {DataType::kBfloat16, 0x3f81, 0x3b80, 0x3f82},  // tie, rounds up to even
      {DataType::kFloat16, 0x7bff, 0x7bff, 0x7c00},   // 65504 + 65504: infinity
      {DataType::kFloat16, 0x3c00, 0x1000, 0x3c00},   // 1 + 2^-11: tie, stays 1.0
      {DataType::kFloat8e4m3, 0x7e, 0x7e, 0x7e},      // 448 + 448 saturates to 448
      {DataType::kFloat8e4m3, 0x38, 0x18, 0x38},      // 1 + 2^-4: tie, stays 1.0
      {DataType::kFloat8e5m2, 0x7b, 0x7b, 0x7b},      // 57344 + 57344 saturates
      {DataType::kFloat8e5m2, 0x7c, 0x3c, 0x7c},      // inf + 1 = inf
      {DataType::kFloat8e5m2, 0x01, 0x01, 0x02},      // subnormals add exactly
  };
  const size_t count = 64 + 19;
  for (const Pair& p : pairs) {
    const size_t size = dataTypeSize(p.type);
    std::vector<unsigned char> a(count * size), b(count * size), out(count * size);
    for (size_t i = 0; i < count; ++i) {
      std::memcpy(a.data() + i * size, &p.a, size);
      std::memcpy(b.data() + i * size, &p.b, size);
    }
    const void* srcs[] = {a.data(), b.data()};
    reduceManyWithIsa(GetParam(), p.type, ReduceOp::kSum, out.data(), srcs, 2, count);
    for (size_t i = 0; i < count; ++i) {
      uint32_t got = 0;
      std::memcpy(&got, out.data() + i * size, size);
      ASSERT_EQ(got, p.sum) << dataTypeName(p.type) << " 0x" << std::hex << p.a << " + 0x"
                            << p.b << " at element " << std::dec << i;
    }
  }
}

// Types without a fused loop go to reduce() and give its answer.
TEST_P(KernelsMany, OtherTypesGiveReduceResults) {
  const size_t count = 37;
  std::vector<float> a(count), b(count), c(count), many(count), plain(count);
  for (size_t i = 0; i < count; ++i) {
    a[i] = 0.5f * static_cast<float>(i);
    b[i] = 3.25f - static_cast<float>(i);
    c[i] = 1e-3f * static_cast<float>(i * i);
  }
  const void* srcs[] = {a.data(), b.data(), c.data()};
  reduceManyWithIsa(GetParam(), DataType::kFloat32, ReduceOp::kSum, many.data(), srcs, 3, count);
  reduceWithIsa(GetParam(), DataType::kFloat32, ReduceOp::kSum, plain.data(), srcs, 3, count);
  EXPECT_EQ(many, plain);
  EXPECT_EQ(many[4], (2.0f + -0.75f) + 0.016f);
}

TEST_P(KernelsMany, BadArgumentsLeaveDstAlone) {
  std::vector<unsigned char> in(64, 0x3c), dst(64, kFence);
  const void* srcs[] = {in.data()};
  reduceManyWithIsa(GetParam(), DataType::kFloat16, ReduceOp::kSum, dst.data(), srcs, 0, 32);
  reduceManyWithIsa(GetParam(), static_cast<DataType>(99), ReduceOp::kSum, dst.data(), srcs, 1,
                    32);
  reduceManyWithIsa(GetParam(), DataType::kBfloat16, static_cast<ReduceOp>(9), dst.data(), srcs,
                    1, 32);
  reduceManyWithIsa(GetParam(), DataType::kBfloat16, ReduceOp::kSum, dst.data(), srcs, 1, 0);
  EXPECT_EQ(dst, std::vector<unsigned char>(64, kFence));
}

INSTANTIATE_TEST_SUITE_P(AllIsas, KernelsMany,
                         ::testing::Values(KernelIsa::kGeneric, KernelIsa::kAvx2,
                                           KernelIsa::kAvx512),
                         [](const ::testing::TestParamInfo<KernelIsa>& param) {
                           return std::string(kernelIsaName(param.param));
                         });

// The public entry point picks a fused loop where it has one and agrees with reduce().
TEST(KernelsManyDispatch, MatchesReduce) {
  std::mt19937_64 rng(5);
  const size_t count = 1003;
  for (DataType t : kNarrowTypes) {
    const size_t size = dataTypeSize(t);
    std::vector<unsigned char> in(4 * count * size), many(count * size), plain(count * size);
    for (auto& byte : in) byte = static_cast<unsigned char>(rng());
    const void* srcs[4];
    for (int k = 0; k < 4; ++k) srcs[k] = in.data() + k * count * size;
    reduceMany(t, ReduceOp::kSum, many.data(), srcs, 4, count);
    reduce(t, ReduceOp::kSum, plain.data(), srcs, 4, count);
    size_t nans = 0;
    for (size_t i = 0; i < count; ++i) {
      const unsigned char* m = many.data() + i * size;
      const unsigned char* p = plain.data() + i * size;
      ASSERT_TRUE(sameOrBothNan(t, m, p)) << dataTypeName(t) << " element " << i;
      nans += std::memcmp(m, p, size) != 0;
    }
    // Random bytes make few NaNs: most elements must agree to the bit.
    EXPECT_LT(nans, count / 4) << dataTypeName(t);
  }
}

}  // namespace
}  // namespace tally
