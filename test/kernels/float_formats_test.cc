// SPDX-License-Identifier: Apache-2.0
// The narrow-float conversions against the reference model (test/kernels/reference.h), plus
// hand-written cases whose expected codes were worked out on paper.
#include "kernels/float_formats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "test/kernels/reference.h"

namespace tally {
namespace {

using ref::Format;

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// The library's conversions for one format, behind one interface.
struct Codec {
  const Format* format;
  float (*to_float)(uint32_t);
  uint32_t (*from_float)(float);
};

const Codec kCodecs[] = {
    {&ref::kHalf, [](uint32_t c) { return halfToFloat(static_cast<uint16_t>(c)); },
     [](float f) -> uint32_t { return floatToHalf(f); }},
    {&ref::kBf16, [](uint32_t c) { return bfloat16ToFloat(static_cast<uint16_t>(c)); },
     [](float f) -> uint32_t { return floatToBfloat16(f); }},
    {&ref::kE4m3, [](uint32_t c) { return fp8e4m3ToFloat(static_cast<uint8_t>(c)); },
     [](float f) -> uint32_t { return floatToFp8e4m3(f); }},
    {&ref::kE5m2, [](uint32_t c) { return fp8e5m2ToFloat(static_cast<uint8_t>(c)); },
     [](float f) -> uint32_t { return floatToFp8e5m2(f); }},
};

const char* nameOf(const Format* f) {
  if (f == &ref::kHalf) return "float16";
  if (f == &ref::kBf16) return "bfloat16";
  if (f == &ref::kE4m3) return "e4m3";
  return "e5m2";
}

// Checks one float32 -> code conversion against the model. NaN results compare by class.
::testing::AssertionResult encodesLikeModel(const Codec& c, float x) {
  const uint32_t got = c.from_float(x);
  const uint32_t want = ref::encode(*c.format, static_cast<double>(x));
  const bool got_nan = ref::isNanCode(*c.format, got);
  const bool want_nan = ref::isNanCode(*c.format, want);
  if (got == want || (got_nan && want_nan)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << nameOf(c.format) << ": float " << x << " (0x" << std::hex << bitsOf(x)
         << ") encoded as 0x" << got << ", model says 0x" << want;
}

// Every code widens to exactly the value its bit fields say, and narrows back to itself.
TEST(FloatFormats, EveryCodeRoundTripsThroughFloat) {
  for (const Codec& c : kCodecs) {
    SCOPED_TRACE(nameOf(c.format));
    const uint32_t ncodes = 1u << ref::totalBits(*c.format);
    int nans = 0;
    for (uint32_t code = 0; code < ncodes; ++code) {
      const float f = c.to_float(code);
      const double want = ref::decode(*c.format, code);
      if (std::isnan(want)) {
        ++nans;
        ASSERT_TRUE(std::isnan(f)) << "code 0x" << std::hex << code;
        // The sign of a NaN survives, and it narrows back to a NaN of the same sign.
        const uint32_t back = c.from_float(f);
        ASSERT_TRUE(ref::isNanCode(*c.format, back)) << "code 0x" << std::hex << code;
        ASSERT_EQ(back >> (ref::totalBits(*c.format) - 1), code >> (ref::totalBits(*c.format) - 1));
        continue;
      }
      ASSERT_EQ(static_cast<double>(f), want) << "code 0x" << std::hex << code;
      ASSERT_EQ(std::signbit(f), std::signbit(want)) << "code 0x" << std::hex << code;
      ASSERT_EQ(c.from_float(f), code) << "code 0x" << std::hex << code;
    }
    // NaN counts per format: a check on the model and on which codes are special.
    const int want_nans = c.format == &ref::kHalf   ? 2 * 1023
                          : c.format == &ref::kBf16 ? 2 * 127
                          : c.format == &ref::kE4m3 ? 2
                                                    : 2 * 3;
    EXPECT_EQ(nans, want_nans);
  }
}

// Rounding at every decision point: each midpoint between adjacent codes (a tie, which must
// go to the even code), and the floats just below and above it.
TEST(FloatFormats, MidpointsRoundToNearestEven) {
  for (const Codec& c : kCodecs) {
    SCOPED_TRACE(nameOf(c.format));
    for (uint32_t code = 0; code < c.format->max_finite; ++code) {
      const double mid = (ref::decode(*c.format, code) + ref::decode(*c.format, code + 1)) / 2;
      const float m = static_cast<float>(mid);
      ASSERT_EQ(static_cast<double>(m), mid);  // midpoints of these formats fit in a float
      for (float x : {m, std::nextafter(m, 0.0f), std::nextafter(m, 1e30f)}) {
        ASSERT_TRUE(encodesLikeModel(c, x));
        ASSERT_TRUE(encodesLikeModel(c, -x));
      }
      const uint32_t tie = c.from_float(m);
      ASSERT_EQ(tie % 2, 0u) << "tie above code 0x" << std::hex << code;
      ASSERT_TRUE(tie == code || tie == code + 1);
    }
  }
}

TEST(FloatFormats, SampledFloatsMatchModel) {
  for (const Codec& c : kCodecs) {
    SCOPED_TRACE(nameOf(c.format));
    // A stride through all 2^32 bit patterns: every exponent, both signs, NaNs and infinities.
    for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4093) {
      ASSERT_TRUE(encodesLikeModel(c, floatOf(static_cast<uint32_t>(u))));
    }
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> small(-600.0f, 600.0f);
    for (int i = 0; i < 100000; ++i) ASSERT_TRUE(encodesLikeModel(c, small(rng)));
  }
}

// Cases worked out by hand, so the model itself is checked too.
TEST(FloatFormats, HandPickedHalf) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3c00);        // tie, down to even
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);    // tie, up to even
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);               // smallest subnormal
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);               // tie with zero, to even
  EXPECT_EQ(floatToHalf(3 * 0x1p-25f), 0x0002);           // tie, up to even
  EXPECT_EQ(floatToHalf(-0x1p-26f), 0x8000);              // underflows to -0
  EXPECT_EQ(floatToHalf(0x1p-14f - 0x1p-25f), 0x0400);    // rounds up into the normals
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);               // overflow by rounding
  EXPECT_EQ(floatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::quiet_NaN()) & 0x7e00, 0x7e00);
  EXPECT_EQ(halfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(halfToFloat(0x3555), 0x1.554p-2f);
  EXPECT_EQ(halfToFloat(0xfbff), -65504.0f);
}

TEST(FloatFormats, HandPickedBfloat16) {
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBfloat16(1.0f + 0x1p-8f), 0x3f80);      // tie, down to even
  EXPECT_EQ(floatToBfloat16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie, up to even
  EXPECT_EQ(floatToBfloat16(-(1.0f + 0x1p-8f + 0x1p-20f)), 0xbf81);
  EXPECT_EQ(floatToBfloat16(0x1p-133f), 0x0001);            // float subnormal, exact
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(floatToBfloat16(0x1.fep127f), 0x7f7f);
  EXPECT_EQ(floatToBfloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(floatToBfloat16(floatOf(0x7f800001u)) & 0x7fc0, 0x7fc0);  // sNaN -> qNaN, not inf
  EXPECT_EQ(bfloat16ToFloat(0xc0a0), -5.0f);
}

TEST(FloatFormats, HandPickedE4m3) {
  EXPECT_EQ(floatToFp8e4m3(1.0f), 0x38);
  EXPECT_EQ(floatToFp8e4m3(1.0625f), 0x38);   // tie, down to even
  EXPECT_EQ(floatToFp8e4m3(1.1875f), 0x3a);   // tie, up to even
  EXPECT_EQ(floatToFp8e4m3(0x1p-9f), 0x01);   // smallest subnormal
  EXPECT_EQ(floatToFp8e4m3(0x1p-10f), 0x00);  // tie with zero
  EXPECT_EQ(floatToFp8e4m3(3 * 0x1p-10f), 0x02);
  EXPECT_EQ(floatToFp8e4m3(-0.0f), 0x80);
  EXPECT_EQ(floatToFp8e4m3(448.0f), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(464.0f), 0x7e);    // tie, even is 448
  EXPECT_EQ(floatToFp8e4m3(470.0f), 0x7e);    // would round to 480: saturates
  EXPECT_EQ(floatToFp8e4m3(-1e30f), 0xfe);
  EXPECT_EQ(floatToFp8e4m3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(floatToFp8e4m3(std::numeric_limits<float>::quiet_NaN()) & 0x7f, 0x7f);
  EXPECT_EQ(fp8e4m3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(fp8e4m3ToFloat(0x78), 256.0f);    // exponent all ones is an ordinary binade
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0xff)));
  EXPECT_EQ(fp8e4m3ToFloat(0x81), -0x1p-9f);
}

TEST(FloatFormats, HandPickedE5m2) {
  EXPECT_EQ(floatToFp8e5m2(1.0f), 0x3c);
  EXPECT_EQ(floatToFp8e5m2(1.125f), 0x3c);   // tie, down to even
  EXPECT_EQ(floatToFp8e5m2(1.375f), 0x3e);   // tie, up to even
  EXPECT_EQ(floatToFp8e5m2(0x1p-16f), 0x01);
  EXPECT_EQ(floatToFp8e5m2(0x1p-17f), 0x00);
  EXPECT_EQ(floatToFp8e5m2(57344.0f), 0x7b);
  EXPECT_EQ(floatToFp8e5m2(61440.0f), 0x7b);  // would round to 65536: saturates
  EXPECT_EQ(floatToFp8e5m2(-1e30f), 0xfb);
  EXPECT_EQ(floatToFp8e5m2(std::numeric_limits<float>::infinity()), 0x7c);
  EXPECT_EQ(floatToFp8e5m2(-std::numeric_limits<float>::infinity()), 0xfc);
  EXPECT_TRUE(std::isnan(fp8e5m2ToFloat(floatToFp8e5m2(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(fp8e5m2ToFloat(0x7b), 57344.0f);
  EXPECT_TRUE(std::isinf(fp8e5m2ToFloat(0xfc)));
}

// The model's own hand checks, so that a wrong model cannot hide a wrong library.
TEST(FloatFormats, ModelSanity) {
  EXPECT_EQ(ref::decode(ref::kHalf, 0x7bff), 65504.0);
  EXPECT_EQ(ref::decode(ref::kE4m3, 0x7e), 448.0);
  EXPECT_EQ(ref::decode(ref::kE5m2, 0x7b), 57344.0);
  EXPECT_EQ(ref::decode(ref::kE4m3, 0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(ref::encode(ref::kHalf, 65520.0), 0x7c00u);
  EXPECT_EQ(ref::encode(ref::kHalf, 65519.0), 0x7bffu);
  EXPECT_EQ(ref::encode(ref::kE4m3, 1.0625), 0x38u);
  EXPECT_EQ(ref::encode(ref::kE4m3, 1.1875), 0x3au);
  EXPECT_EQ(ref::encode(ref::kE5m2, 1e9), 0x7bu);
}

}  // namespace
}  // namespace tally
